#include "base/dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>

#include "base/files.h"

namespace rdmanet {

namespace {

// One path component: never empty, ".", ".." or holding a '/'.
Status check_component(const std::string& name) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
      name.find('\0') != std::string::npos) {
    return Error(ErrorKind::kInternal, "\"" + name + "\" is not one path component");
  }
  return ok_status();
}

constexpr int kDirFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;

}  // namespace

Expected<std::optional<Dir>> Dir::open(const std::string& path) {
  Fd fd(::open(path.c_str(), kDirFlags));
  if (!fd.valid()) {
    if (errno == ENOENT) {
      return std::optional<Dir>();
    }
    return io_error("open directory " + path + (errno == ELOOP ? " (a symlink)" : ""), errno);
  }
  return std::optional<Dir>(Dir(std::move(fd), path));
}

Expected<std::optional<Dir>> Dir::sub(const std::string& name) const {
  TRY(check_component(name));
  const std::string path = path_ + "/" + name;
  Fd fd(::openat(fd_.get(), name.c_str(), kDirFlags));
  if (!fd.valid()) {
    if (errno == ENOENT) {
      return std::optional<Dir>();
    }
    if (errno == ELOOP || errno == ENOTDIR) {
      return Error(ErrorKind::kIo, path + " is not a directory (a symlink or a file)");
    }
    return io_error("open directory " + path, errno);
  }
  return std::optional<Dir>(Dir(std::move(fd), path));
}

Expected<Dir> Dir::make_sub(const std::string& name, mode_t mode) const {
  TRY(check_component(name));
  const std::string path = path_ + "/" + name;
  for (int attempt = 0; attempt < 3; ++attempt) {
    Fd fd(::openat(fd_.get(), name.c_str(), kDirFlags));
    if (fd.valid()) {
      return Dir(std::move(fd), path);
    }
    if (errno == ELOOP || errno == ENOTDIR) {
      TRY(remove(name));
    } else if (errno != ENOENT) {
      return io_error("open directory " + path, errno);
    }
    if (::mkdirat(fd_.get(), name.c_str(), mode) == 0) {
      Fd made(::openat(fd_.get(), name.c_str(), kDirFlags));
      // mkdir's mode is filtered by the umask; the caller asked for exactly this one.
      if (made.valid() && ::fchmod(made.get(), mode) == 0) {
        return Dir(std::move(made), path);
      }
    } else if (errno != EEXIST) {
      return io_error("create directory " + path, errno);
    }
  }
  return Error(ErrorKind::kIo, path + " keeps changing under rdmanet: not a directory it can use");
}

Status Dir::write(const std::string& name, const std::string& data, mode_t mode) const {
  TRY(check_component(name));
  const std::string tmp = "." + name + ".rdmanet-tmp";
  // A leftover (or something planted under the name) goes first; O_EXCL refuses a symlink.
  TRY(remove(tmp));
  Fd fd(
      ::openat(fd_.get(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode));
  if (!fd.valid()) {
    return io_error("create " + path_ + "/" + tmp, errno);
  }
  auto fail = [&](const std::string& what, int err) {
    fd.reset();
    ::unlinkat(fd_.get(), tmp.c_str(), 0);
    return io_error(what + " " + path_ + "/" + tmp, err);
  };
  if (::fchmod(fd.get(), mode) != 0) {
    return fail("chmod", errno);
  }
  if (int err = write_all(fd.get(), data); err != 0) {
    return fail("write", err);
  }
  if (::close(fd.release()) != 0) {
    return fail("close", errno);
  }
  if (int err = move_into_place(fd_.get(), tmp, name); err != 0) {
    ::unlinkat(fd_.get(), tmp.c_str(), 0);
    return io_error("rename " + path_ + "/" + tmp + " to " + name, err);
  }
  return ok_status();
}

Expected<std::optional<std::string>> Dir::read_own(const std::string& name, size_t max_size) const {
  TRY(check_component(name));
  return read_file_at(fd_.get(), name, path_ + "/" + name,
                      {.max_size = max_size, .only_own = true});
}

Status Dir::remove(const std::string& name) const {
  TRY(check_component(name));
  if (::unlinkat(fd_.get(), name.c_str(), 0) != 0 && errno != ENOENT) {
    return io_error("remove " + path_ + "/" + name, errno);
  }
  return ok_status();
}

bool Dir::remove_empty_dir(const std::string& name) const {
  return check_component(name) && ::unlinkat(fd_.get(), name.c_str(), AT_REMOVEDIR) == 0;
}

Expected<std::vector<std::string>> Dir::entries() const {
  return directory_entries(fd_.get(), path_);
}

Status Dir::check_private() const {
  struct stat st {};
  if (::fstat(fd_.get(), &st) != 0) {
    return io_error("stat " + path_, errno);
  }
  return check_private_directory(st, path_);
}

Expected<std::string> Dir::link_target(const std::string& name) const {
  TRY(check_component(name));
  char target[PATH_MAX];
  ssize_t n = ::readlinkat(fd_.get(), name.c_str(), target, sizeof(target) - 1);
  if (n < 0) {
    return io_error("readlink " + path_ + "/" + name, errno);
  }
  return std::string(target, static_cast<size_t>(n));
}

}  // namespace rdmanet
