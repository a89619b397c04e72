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

Expected<FileLock> FileLock::acquire_within(const std::string& path,
                                            std::chrono::milliseconds limit) {
  TRY_ASSIGN(Fd fd, open_lock_file(path));
  const auto deadline = std::chrono::steady_clock::now() + limit;
  auto pause = std::chrono::milliseconds(1);
  while (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) {
      return io_error("lock " + path, errno);
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return Error(ErrorKind::kTryAgainLater,
                   "lock " + path + " still held after " + std::to_string(limit.count()) + " ms");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
  return FileLock(std::move(fd));
}

Expected<FileLock> FileLock::acquire(const std::string& path) {
  TRY_ASSIGN(Fd fd, open_lock_file(path));
  while (::flock(fd.get(), LOCK_EX) != 0) {
    if (errno != EINTR) {
      return io_error("lock " + path, errno);
    }
  }
  return FileLock(std::move(fd));
}

}  // namespace rdmanet
