#include "base/files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "base/fd.h"

namespace rdmanet {

namespace {

Status make_directory(const std::string& path, mode_t mode) {
  if (::mkdir(path.c_str(), mode) == 0) {
    // mkdir's mode is filtered by the umask; the caller asked for exactly this one.
    if (::chmod(path.c_str(), mode) != 0) {
      return io_error("chmod " + path, errno);
    }
    return ok_status();
  }
  if (errno != EEXIST) {
    return io_error("create directory " + path, errno);
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return io_error("stat " + path, errno);
  }
  if (!S_ISDIR(st.st_mode)) {
    return Error(ErrorKind::kIo, path + " exists and is not a directory");
  }
  return ok_status();
}

}  // namespace

Status check_private_directory(const struct stat& st, const std::string& path) {
  if (!S_ISDIR(st.st_mode)) {
    return Error(ErrorKind::kIo, path + " is not a directory (a symlink is refused)");
  }
  if (st.st_uid != ::geteuid() || (st.st_mode & 022) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return Error(ErrorKind::kIo, path + " must be owned by uid " + std::to_string(::geteuid()) +
                                     " and writable by it alone (it is uid " +
                                     std::to_string(st.st_uid) + ", mode " + mode + ")");
  }
  return ok_status();
}

Status check_private_directory(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    return io_error("stat " + path, errno);
  }
  return check_private_directory(st, path);
}

Status make_directories(const std::string& path, mode_t mode) {
  for (size_t slash = path.find('/', 1); slash != std::string::npos;
       slash = path.find('/', slash + 1)) {
    if (path[slash - 1] == '/') {
      continue;  // "//" names no new directory
    }
    if (auto s = make_directory(path.substr(0, slash), mode); !s) {
      return s;
    }
  }
  if (path.empty() || path.back() == '/') {
    return ok_status();
  }
  return make_directory(path, mode);
}

int write_all(int fd, std::string_view data, std::optional<off_t> offset) {
  size_t off = 0;
  while (off < data.size()) {
    const char* from = data.data() + off;
    const size_t size = data.size() - off;
    ssize_t n = offset ? ::pwrite(fd, from, size, *offset + static_cast<off_t>(off))
                       : ::write(fd, from, size);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      return errno;
    }
    off += static_cast<size_t>(n);
  }
  return 0;
}

Status write_file_atomically(const std::string& path, const std::string& data, mode_t mode,
                             Survives survives) {
  const bool sync = survives == Survives::kMachineCrash;
  std::string tmp = path + ".tmp";
  // A leftover from a crash may be read-only to us; O_EXCL also refuses a symlink.
  if (::unlink(tmp.c_str()) != 0 && errno != ENOENT) {
    return io_error("remove stale " + tmp, errno);
  }
  Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode));
  if (!fd.valid()) {
    return io_error("create " + tmp, errno);
  }
  auto fail = [&](const std::string& what, int err) {
    fd.reset();
    ::unlink(tmp.c_str());
    return io_error(what + " " + tmp, err);
  };
  if (::fchmod(fd.get(), mode) != 0) {
    return fail("chmod", errno);
  }
  if (int err = write_all(fd.get(), data); err != 0) {
    return fail("write", err);
  }
  if (sync && ::fsync(fd.get()) != 0) {
    return fail("sync", errno);
  }
  if (::close(fd.release()) != 0) {
    return fail("close", errno);
  }
  if (int err = move_into_place(AT_FDCWD, tmp, path); err != 0) {
    ::unlink(tmp.c_str());
    return io_error("rename " + tmp + " to " + path, err);
  }
  if (!sync) {
    return ok_status();
  }
  // The new content is visible already; this only makes the rename durable.
  Fd dir(::open(parent_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.valid()) {
    ::fsync(dir.get());
  }
  return ok_status();
}

int move_into_place(int dir_fd, const std::string& tmp, const std::string& name) {
  struct stat st {};
  if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
      ::renameat2(dir_fd, tmp.c_str(), dir_fd, name.c_str(), RENAME_EXCHANGE) == 0) {
    ::unlinkat(dir_fd, tmp.c_str(), 0);  // the old content
    return 0;
  }
  // Nothing there (or not a file, or no RENAME_EXCHANGE on this file system).
  return ::renameat(dir_fd, tmp.c_str(), dir_fd, name.c_str()) == 0 ? 0 : errno;
}

bool changed_before_this_boot(const std::string& path) {
  struct stat st {};
  timespec now{};
  timespec up{};
  if (::lstat(path.c_str(), &st) != 0 || ::clock_gettime(CLOCK_REALTIME, &now) != 0 ||
      ::clock_gettime(CLOCK_BOOTTIME, &up) != 0) {
    return false;
  }
  // The boot's wall-clock time, to the second: what /proc/stat's btime says.
  const time_t booted = now.tv_sec - up.tv_sec;
  return st.st_ctim.tv_sec < booted;
}

const char* file_type_name(mode_t mode) {
  if (S_ISDIR(mode)) {
    return "a directory";
  }
  if (S_ISLNK(mode)) {
    return "a symlink";
  }
  return S_ISFIFO(mode) ? "a FIFO" : "a special file";
}

namespace {

Error refused_by_default(const std::string& what, Refusal why, const struct stat& st,
                         size_t max_size) {
  switch (why) {
    case Refusal::kNotRegular:
      return Error(ErrorKind::kIo,
                   "read " + what + ": not a regular file (" + file_type_name(st.st_mode) + ")");
    case Refusal::kNotOwn:
      return Error(ErrorKind::kIo, "read " + what + ": not a file rdmanet wrote (owner uid " +
                                       std::to_string(st.st_uid) + ", " +
                                       std::to_string(st.st_nlink) + " links)");
    case Refusal::kTooLarge:
      break;
  }
  return Error(ErrorKind::kIo,
               "read " + what + ": larger than " + std::to_string(max_size) + " bytes");
}

}  // namespace

Expected<std::optional<std::string>> read_file_at(int dir_fd, const std::string& name,
                                                  const std::string& what,
                                                  const ReadOptions& options) {
  auto refuse = [&](Refusal why, const struct stat& st) {
    return options.refused ? options.refused(what, why, st)
                           : refused_by_default(what, why, st, options.max_size);
  };
  // O_NOFOLLOW: a symlink fails the open (ELOOP, then fstatat says what is there);
  // O_NONBLOCK: a FIFO does not block it.
  Fd fd(::openat(dir_fd, name.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (!fd.valid()) {
    const int err = errno;
    if (err == ENOENT) {
      return std::optional<std::string>();
    }
    struct stat st {};
    if (err == ELOOP && ::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
      return refuse(Refusal::kNotRegular, st);
    }
    return io_error("read " + what, err);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return io_error("stat " + what, errno);
  }
  if (!S_ISREG(st.st_mode)) {
    return refuse(Refusal::kNotRegular, st);
  }
  if (options.only_own && (st.st_uid != ::geteuid() || st.st_nlink != 1)) {
    return refuse(Refusal::kNotOwn, st);
  }
  // To the end, whatever st_size says; room for one byte beyond the limit tells a file that
  // is too large.
  const size_t max_size = options.max_size;
  const size_t size_seen = static_cast<size_t>(std::max<off_t>(st.st_size, 0));
  std::string data;
  size_t got = 0;
  for (;;) {
    if (got == data.size()) {
      if (got > max_size) {
        return refuse(Refusal::kTooLarge, st);
      }
      const size_t more = std::max<size_t>({size_seen, got, 4096});
      data.resize(got + std::min(max_size - got, more) + 1);
    }
    ssize_t n = ::read(fd.get(), data.data() + got, data.size() - got);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      return io_error("read " + what, errno);
    }
    if (n == 0) {
      break;
    }
    got += static_cast<size_t>(n);
  }
  data.resize(got);
  return std::optional<std::string>(std::move(data));
}

Expected<std::optional<std::string>> read_file(const std::string& path, size_t max_size) {
  return read_file_at(AT_FDCWD, path, path, {.max_size = max_size});
}

Expected<std::vector<std::string>> directory_entries(int dir_fd, const std::string& what) {
  Fd fd(::dup(dir_fd));
  if (!fd.valid()) {
    return io_error("listing " + what, errno);
  }
  DIR* d = ::fdopendir(fd.get());
  if (d == nullptr) {
    return io_error("listing " + what, errno);
  }
  fd.release();  // closedir closes it
  ::rewinddir(d);
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {  // NOLINT(concurrency-mt-unsafe): d is this call's own
    std::string name = e->d_name;
    if (name != "." && name != "..") {
      names.push_back(std::move(name));
    }
  }
  ::closedir(d);
  return names;
}

Expected<std::vector<std::string>> directory_entries(const std::string& dir) {
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT) {
      return std::vector<std::string>();
    }
    return io_error("listing " + dir, errno);
  }
  return directory_entries(fd.get(), dir);
}

Status check_absolute_path(const std::string& path, const std::string& what, ErrorKind kind) {
  if (path.empty() || path.front() != '/') {
    return Error(kind, what + ": \"" + path + "\" must be an absolute path");
  }
  if (path.find('\0') != std::string::npos) {
    return Error(kind, what + " contains a NUL byte");
  }
  if (("/" + path + "/").find("/../") != std::string::npos) {
    return Error(kind, what + ": \"" + path + "\" must not contain \"..\"");
  }
  return ok_status();
}

std::string parent_of(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) {
    return ".";
  }
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace rdmanet
