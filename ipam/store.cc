#include "ipam/store.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <optional>

#include "base/file_lock.h"
#include "base/files.h"

namespace rdmanet::ipam {

namespace {

constexpr const char* kTmpPrefix = ".tmp-";

Fd open_dir(int at, const char* name) {
  return Fd(openat(at, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
}

Error not_a_file(const std::string& what, mode_t mode) {
  return Error(ErrorKind::kState, what + " is " + file_type_name(mode) +
                                      ", not a file this plugin wrote; remove it by hand");
}

// Anything but a regular file (a directory, a symlink, a FIFO that would block) is kState
// naming it: no write of ours makes one.
Error refused(const std::string& what, Refusal why, const struct stat& st) {
  if (why == Refusal::kTooLarge) {
    return Error(ErrorKind::kState, what + " is larger than any file this plugin writes");
  }
  return not_a_file(what, st.st_mode);
}

// The content of a file, nullopt when it does not exist.
Expected<std::optional<std::string>> read_file(int dir_fd, const std::string& name,
                                               const std::string& what) {
  // The largest, an index bitmap, is 128 KiB.
  return read_file_at(dir_fd, name, what, {.max_size = 1 << 20, .refused = &refused});
}

}  // namespace

Expected<Store> Store::open(const std::string& dir,
                            std::optional<std::chrono::milliseconds> lock_wait) {
  TRY(make_directories(dir, 0700));
  // DEL, GC and the reclaim rule trust the leases and records found here.
  TRY(check_private_directory(dir).with_context("IPAM store"));
  Store store(dir);
  Fd dir_fd = open_dir(AT_FDCWD, dir.c_str());
  if (!dir_fd.valid()) {
    return io_error("opening " + dir, errno);
  }
  store.lock_fd_.reset(
      openat(dir_fd.get(), "lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!store.lock_fd_.valid()) {
    return io_error("opening " + dir + "/lock", errno);
  }
  TRY(lock_exclusively(store.lock_fd_.get(), dir + "/lock", lock_wait));
  std::array<std::pair<const char*, Fd*>, 3> subdirs = {
      std::pair{"leases", &store.leases_fd_}, std::pair{"attachments", &store.records_fd_},
      std::pair{"index", &store.index_fd_}};
  bool created = false;
  for (auto [name, fd] : subdirs) {
    *fd = open_dir(dir_fd.get(), name);
    if (!fd->valid() && errno == ENOENT) {
      if (mkdirat(dir_fd.get(), name, 0700) != 0 && errno != EEXIST) {
        return io_error("creating " + dir + "/" + name, errno);
      }
      created = true;
      *fd = open_dir(dir_fd.get(), name);
    }
    if (!fd->valid()) {
      return io_error("opening " + dir + "/" + name, errno);
    }
  }
  if (created && fsync(dir_fd.get()) != 0) {
    return io_error("syncing " + dir, errno);
  }
  return store;
}

Status Store::write_new(int dir_fd, const std::string& what, const std::string& content,
                        std::string* tmp_name) {
  *tmp_name = temp_name(dir_fd);
  Fd fd(openat(dir_fd, tmp_name->c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
               0600));
  if (!fd.valid()) {
    return io_error("creating " + what, errno);
  }
  if (int err = write_all(fd.get(), content); err != 0) {
    fd.reset();
    unlinkat(dir_fd, tmp_name->c_str(), 0);
    return io_error("writing " + what, err);
  }
  if (dir_fd != leases_fd_.get()) {
    // Records are not synced (store.h): a process crash leaves them whole in the page cache.
    return ok_status();
  }
  // A lease is synced by sync(), after every link of the call and before the caller reports
  // anything. Until then a crash of the machine may leave it empty or half-written, hence
  // unparseable and reclaimable (allocator.h, rule 1): it was never reported.
  unsynced_.push_back({std::move(fd), what});
  return ok_status();
}

Expected<bool> Store::claim(const Lease& lease) {
  std::string name = lease.ip.str();
  std::string what = dir_ + "/leases/" + name;
  std::string tmp;
  TRY(write_new(leases_fd_.get(), what, format_lease(lease), &tmp));
  int rc = linkat(leases_fd_.get(), tmp.c_str(), leases_fd_.get(), name.c_str(), 0);
  int err = errno;
  unlinkat(leases_fd_.get(), tmp.c_str(), 0);
  if (rc != 0) {
    unsynced_.pop_back();  // nothing to make durable
    if (err == EEXIST) {
      return false;
    }
    return io_error("creating " + what, err);
  }
  return true;
}

Expected<std::optional<Lease>> Store::read_lease(const IpAddr& ip) const {
  std::string name = ip.str();
  TRY_ASSIGN(auto text, read_file(leases_fd_.get(), name, dir_ + "/leases/" + name));
  if (!text) {
    return std::optional<Lease>();
  }
  return std::optional<Lease>(parse_lease(ip, *text));
}

bool Store::has_lease(const IpAddr& ip) const {
  struct stat st {};
  return fstatat(leases_fd_.get(), ip.str().c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 ||
         errno != ENOENT;
}

Status Store::release(const IpAddr& ip) {
  std::string name = ip.str();
  if (unlinkat(leases_fd_.get(), name.c_str(), 0) != 0 && errno != ENOENT) {
    struct stat st {};
    if (errno == EISDIR && fstatat(leases_fd_.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
      return not_a_file(dir_ + "/leases/" + name, st.st_mode);
    }
    return io_error("removing " + dir_ + "/leases/" + name, errno);
  }
  return ok_status();
}

Expected<std::vector<Lease>> Store::list_leases() const {
  TRY_ASSIGN(auto ips, leased_addresses());
  std::vector<Lease> leases;
  for (const auto& ip : ips) {
    auto lease = read_lease(ip);
    if (!lease && lease.error().kind() == ErrorKind::kState) {
      // Not a file we wrote: unreadable, so GC and the sweep release it (or say why not).
      spdlog::warn("{}", lease.error().msg());
      leases.push_back(parse_lease(ip, ""));
      continue;
    }
    TRY(lease);
    if (*lease) {
      leases.push_back(std::move(**lease));
    }
  }
  return leases;
}

Expected<std::vector<IpAddr>> Store::leased_addresses() const {
  TRY_ASSIGN(auto names, directory_entries(leases_fd_.get(), dir_ + "/leases"));
  std::vector<IpAddr> out;
  for (const auto& name : names) {
    if (auto ip = parse_ip(name)) {  // not temporaries
      out.push_back(*ip);
    }
  }
  return out;
}

Expected<std::optional<Record>> Store::read_record(const Owner& owner) const {
  std::string name = record_name(owner);
  std::string what = dir_ + "/attachments/" + name;
  TRY_ASSIGN(auto text, read_file(records_fd_.get(), name, what));
  if (!text) {
    return std::optional<Record>();
  }
  auto record = parse_record(*text);
  if (!record || record->owner != owner) {
    // A torn or foreign record: the leases decide (they name their owner).
    return std::optional<Record>();
  }
  return record;
}

Status Store::write_record(const Record& record) {
  std::string name = record_name(record.owner);
  std::string what = dir_ + "/attachments/" + name;
  std::string tmp;
  TRY(write_new(records_fd_.get(), what, format_record(record), &tmp));
  if (int err = move_into_place(records_fd_.get(), tmp, name); err != 0) {
    unlinkat(records_fd_.get(), tmp.c_str(), 0);
    return io_error("renaming " + what, err);
  }
  return ok_status();
}

Status Store::remove_record(const Owner& owner) {
  std::string name = record_name(owner);
  if (unlinkat(records_fd_.get(), name.c_str(), 0) != 0 && errno != ENOENT) {
    return io_error("removing " + dir_ + "/attachments/" + name, errno);
  }
  return ok_status();
}

Expected<std::vector<Record>> Store::list_records() const {
  TRY_ASSIGN(auto names, directory_entries(records_fd_.get(), dir_ + "/attachments"));
  std::vector<Record> records;
  for (const auto& name : names) {
    if (name.rfind(kTmpPrefix, 0) == 0) {
      continue;
    }
    TRY_ASSIGN(auto text, read_file(records_fd_.get(), name, dir_ + "/attachments/" + name));
    if (!text) {
      continue;
    }
    if (auto record = parse_record(*text); record && record_name(record->owner) == name) {
      records.push_back(std::move(*record));
    }
  }
  return records;
}

Status Store::sync() {
  // One fsync per lease claimed: it writes the lease's data and, on ext4 (journalled), XFS
  // and btrfs, commits the link that named it in the same go (the link changed the inode,
  // and the inode's fsync commits that change with the directory entry it made). Releases
  // and records are not synced (store.h).
  for (const auto& [fd, what] : unsynced_) {
    if (fsync(fd.get()) != 0) {
      return io_error("syncing " + what, errno);
    }
  }
  unsynced_.clear();
  return ok_status();
}

Expected<std::optional<std::string>> Store::read_index(size_t set) const {
  std::string name = std::to_string(set);
  return read_file(index_fd_.get(), name, dir_ + "/index/" + name);
}

Status Store::write_index(size_t set, const std::string& content) {
  std::string name = std::to_string(set);
  std::string what = dir_ + "/index/" + name;
  // Atomically replaced but not fsynced: the index is a hint (index.h).
  std::string tmp = temp_name(index_fd_.get());
  Fd fd(openat(index_fd_.get(), tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
               0600));
  if (!fd.valid()) {
    return io_error("creating " + what, errno);
  }
  int err = write_all(fd.get(), content);
  fd.reset();
  if (err != 0) {
    unlinkat(index_fd_.get(), tmp.c_str(), 0);
    return io_error("writing " + what, err);
  }
  if (int moved = move_into_place(index_fd_.get(), tmp, name); moved != 0) {
    unlinkat(index_fd_.get(), tmp.c_str(), 0);
    return io_error("renaming " + what, moved);
  }
  return ok_status();
}

Status Store::patch_index(size_t set, const std::vector<std::pair<off_t, std::string>>& parts) {
  if (parts.empty()) {
    return ok_status();
  }
  std::string name = std::to_string(set);
  std::string what = dir_ + "/index/" + name;
  Fd fd(openat(index_fd_.get(), name.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid()) {
    return io_error("opening " + what, errno);
  }
  for (const auto& [offset, bytes] : parts) {
    if (int err = write_all(fd.get(), bytes, offset); err != 0) {
      return io_error("writing " + what, err);
    }
  }
  return ok_status();
}

// One fixed temporary name per directory: every write runs under the store's exclusive
// lock and links or renames its temporary away before the next one, so a name is never in
// use twice, and what a killed call leaves behind is found without listing a directory.
std::string Store::temp_name(int dir_fd) const {
  return std::string(kTmpPrefix) + (dir_fd == leases_fd_.get()    ? "lease"
                                    : dir_fd == records_fd_.get() ? "record"
                                                                  : "index");
}

Status Store::remove_stale_temporaries() {
  for (int fd : {leases_fd_.get(), records_fd_.get(), index_fd_.get()}) {
    if (unlinkat(fd, temp_name(fd).c_str(), 0) != 0 && errno != ENOENT) {
      return io_error("removing " + temp_name(fd) + " in " + dir_, errno);
    }
  }
  return ok_status();
}

Status Store::remove_temporaries() {
  for (auto [fd, sub] :
       {std::pair{leases_fd_.get(), "leases"}, std::pair{records_fd_.get(), "attachments"},
        std::pair{index_fd_.get(), "index"}}) {
    TRY_ASSIGN(auto names, directory_entries(fd, dir_ + "/" + sub));
    for (const auto& name : names) {
      if (name.rfind(kTmpPrefix, 0) == 0) {
        unlinkat(fd, name.c_str(), 0);
      }
    }
  }
  return ok_status();
}

}  // namespace rdmanet::ipam
