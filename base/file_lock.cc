#include "base/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

namespace rdmanet {

namespace {

Expected<Fd> open_lock_file(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) {
    return io_error("open lock " + path, errno);
  }
  return fd;
}

}  // namespace

Status lock_exclusively(int fd, const std::string& what,
                        std::optional<std::chrono::milliseconds> limit) {
  if (!limit) {
    while (::flock(fd, LOCK_EX) != 0) {
      if (errno != EINTR) {
        return io_error("lock " + what, errno);
      }
    }
    return ok_status();
  }
  const auto deadline = std::chrono::steady_clock::now() + *limit;
  auto pause = std::chrono::milliseconds(1);
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) {
      return io_error("lock " + what, errno);
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return Error(ErrorKind::kTryAgainLater,
                   "lock " + what + " still held after " + std::to_string(limit->count()) + " ms");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
  return ok_status();
}

Expected<FileLock> FileLock::acquire_within(const std::string& path,
                                            std::chrono::milliseconds limit) {
  TRY_ASSIGN(Fd fd, open_lock_file(path));
  TRY(lock_exclusively(fd.get(), path, limit));
  return FileLock(std::move(fd));
}

Expected<FileLock> FileLock::acquire(const std::string& path) {
  TRY_ASSIGN(Fd fd, open_lock_file(path));
  TRY(lock_exclusively(fd.get(), path));
  return FileLock(std::move(fd));
}

}  // namespace rdmanet
