#include "base/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>

#include <cerrno>
#include <cstring>

namespace rdmanet {

Expected<FileLock> FileLock::acquire(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) {
    return Error(ErrorKind::kIo, "open lock " + path + ": " + std::strerror(errno));
  }
  while (::flock(fd.get(), LOCK_EX) != 0) {
    if (errno != EINTR) {
      return Error(ErrorKind::kIo, "lock " + path + ": " + std::strerror(errno));
    }
  }
  return FileLock(std::move(fd));
}

}  // namespace rdmanet
