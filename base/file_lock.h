// An exclusive advisory lock on a file (flock), held until the FileLock is destroyed.
//
// flock belongs to the open file description: a process that opens the same lock file
// twice waits on itself forever, so every lock is taken at most once per process (callers
// keep a lock order), and a forked child must close the descriptor (netns_sysfs does).
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "base/error.h"
#include "base/fd.h"

namespace rdmanet {

class FileLock {
 public:
  // Opens (creating it 0600, never through a symlink) and locks `path`, waiting as long as
  // another process holds it.
  static Expected<FileLock> acquire(const std::string& path);
  // The same, waiting at most `limit`: then kTryAgainLater (11) naming the lock. For locks
  // whose holder does something slow or unbounded.
  static Expected<FileLock> acquire_within(const std::string& path,
                                           std::chrono::milliseconds limit);

  FileLock() = default;

 private:
  explicit FileLock(Fd fd) : fd_(std::move(fd)) {}
  Fd fd_;  // closing it releases the lock
};

// flock(LOCK_EX) on an open file, waiting as long as it takes, or at most `limit`: then
// kTryAgainLater (11) naming `what`. For locks that live in a file a caller also uses.
Status lock_exclusively(int fd, const std::string& what,
                        std::optional<std::chrono::milliseconds> limit = std::nullopt);

}  // namespace rdmanet
