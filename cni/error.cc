#include "cni/error.h"

#include <cerrno>
#include <cstring>

namespace rdmanet {

int cni_code(const Error& error) {
  switch (error.kind()) {
    case ErrorKind::kIncompatibleVersion:
      return 1;
    case ErrorKind::kUnsupportedField:
      return 2;
    case ErrorKind::kUnknownContainer:
      return 3;
    case ErrorKind::kInvalidEnvironment:
      return 4;
    case ErrorKind::kIo:
      return 5;
    case ErrorKind::kDecode:
      return 6;
    case ErrorKind::kInvalidConfig:
      return 7;
    case ErrorKind::kTryAgainLater:
      return 11;
    case ErrorKind::kNotAvailable:
      return 50;
    case ErrorKind::kLimitedConnectivity:
      return 51;
    case ErrorKind::kDeviceNotFound:
      return 100;
    case ErrorKind::kDeviceBusy:
      return 101;
    case ErrorKind::kKernel:
      return 102;
    case ErrorKind::kDelegate:
    case ErrorKind::kPluginNotFound:
      return 103;
    case ErrorKind::kAddressUnavailable:
      return 104;
    case ErrorKind::kRdmaIsolation:
      return 105;
    case ErrorKind::kGidTimeout:
      return 106;
    case ErrorKind::kState:
      return 107;
    case ErrorKind::kInternal:
      return 199;
    case ErrorKind::kDelegated:
      return error.delegated_code();
  }
  return 199;
}

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
