// A directory handle for trees others can write in (a pod's files under a hostPath):
// every operation is relative to the open directory and never follows a symlink, so
// nothing planted in the tree can redirect a write, a read or a removal elsewhere.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/fd.h"

namespace rdmanet {

class Dir {
 public:
  // Opens `path` (absolute); its last component must be a directory, not a symlink.
  // std::nullopt when it does not exist.
  static Expected<std::optional<Dir>> open(const std::string& path);

  // The subdirectory `name` (one path component). std::nullopt when it is not there; a
  // non-directory there (a symlink, a file) is kIo naming it.
  Expected<std::optional<Dir>> sub(const std::string& name) const;
  // The same, created with exactly `mode` when missing. Something that is not a directory at
  // `name` is removed first (it never is rdmanet's): the new directory is rdmanet's own.
  Expected<Dir> make_sub(const std::string& name, mode_t mode) const;

  // Replaces `name` with `data` (mode exactly `mode`): a temporary beside it, then renamed
  // over it, so readers see the old or the new content. A symlink at `name` is replaced, not
  // followed. No fsync: for files that need not outlive the machine.
  Status write(const std::string& name, const std::string& data, mode_t mode) const;

  // The content of `name` if it is a regular file that this process's user owns, that has
  // no other link (no hard link to a file elsewhere), and of at most `max_size` bytes;
  // std::nullopt when there is no `name`. Anything else is kIo saying why. Never blocks (a
  // FIFO is refused).
  Expected<std::optional<std::string>> read_own(const std::string& name, size_t max_size) const;

  // Removes the entry `name` (a file or a symlink, never what it points to); a missing one
  // is fine.
  Status remove(const std::string& name) const;
  // Removes the empty subdirectory `name`; false (and nothing changed) when it is not empty
  // or not there.
  bool remove_empty_dir(const std::string& name) const;

  Expected<std::vector<std::string>> entries() const;
  // check_private_directory of the open directory itself (no path is looked up again).
  Status check_private() const;
  // The target of the symlink `name`.
  Expected<std::string> link_target(const std::string& name) const;

  const std::string& path() const { return path_; }
  int fd() const { return fd_.get(); }

 private:
  Dir(Fd fd, std::string path) : fd_(std::move(fd)), path_(std::move(path)) {}
  Fd fd_;
  std::string path_;
};

}  // namespace rdmanet
