#include "base/error.h"

#include <cerrno>
#include <cstring>

namespace rdmanet {

Error sys_error(const std::string& what, int err) {
  ErrorKind kind = ErrorKind::kKernel;
  if (err == ENOENT || err == ENODEV || err == ENXIO) {
    kind = ErrorKind::kDeviceNotFound;
  } else if (err == EBUSY) {
    kind = ErrorKind::kDeviceBusy;
  }
  Error e(kind, what + ": " + std::strerror(err));
  e.sys_errno_ = err;
  return e;
}

bool is_transient(const Error& error) {
  switch (error.sys_errno()) {
    case EMFILE:
    case ENFILE:
    case ENOMEM:
    case ENOLCK:
    case EIO:
    case EINTR:
    case EAGAIN:
    case ENOSPC:
    case ENOBUFS:
    case EDQUOT:
      return true;
    default:
      return error.kind() == ErrorKind::kTryAgainLater;
  }
}

Error io_error(const std::string& what, int err) {
  Error e(ErrorKind::kIo, what + ": " + std::strerror(err));
  e.sys_errno_ = err;
  return e;
}

}  // namespace rdmanet
