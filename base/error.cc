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

}  // namespace rdmanet
