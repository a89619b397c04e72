#include "cni/error_code.h"

namespace rdmanet::cni {

namespace {

struct Code {
  ErrorKind kind;
  int code;
};

constexpr Code kCodes[] = {
    {ErrorKind::kIncompatibleVersion, 1},
    {ErrorKind::kUnsupportedField, 2},
    {ErrorKind::kUnknownContainer, 3},
    {ErrorKind::kInvalidEnvironment, 4},
    {ErrorKind::kIo, 5},
    {ErrorKind::kDecode, 6},
    {ErrorKind::kInvalidConfig, 7},
    {ErrorKind::kTryAgainLater, 11},
    {ErrorKind::kNotAvailable, 50},
    {ErrorKind::kLimitedConnectivity, 51},
    {ErrorKind::kDeviceNotFound, 100},
    {ErrorKind::kDeviceBusy, 101},
    {ErrorKind::kKernel, 102},
    {ErrorKind::kDelegateFailed, 103},
    {ErrorKind::kPluginNotFound, 103},
    {ErrorKind::kAddressUnavailable, 104},
    {ErrorKind::kRdmaIsolation, 105},
    {ErrorKind::kGidTimeout, 106},
    {ErrorKind::kState, 107},
    {ErrorKind::kInternal, 199},
};

}  // namespace

int error_code(const Error& error) {
  if (error.kind() == ErrorKind::kDelegateReported) {
    return error.delegated_code();
  }
  for (const auto& entry : kCodes) {
    if (entry.kind == error.kind()) {
      return entry.code;
    }
  }
  return 199;
}

}  // namespace rdmanet::cni
