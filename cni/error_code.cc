#include "cni/error_code.h"

namespace rdmanet::cni {

namespace {

struct Code {
  ErrorKind kind;
  int code;
};

constexpr Code kCodes[] = {
    {ErrorKind::kIncompatibleVersion, code::kIncompatibleCniVersion},
    {ErrorKind::kUnsupportedField, code::kUnsupportedField},
    {ErrorKind::kUnknownContainer, code::kUnknownContainer},
    {ErrorKind::kInvalidEnvironment, code::kInvalidEnvironmentVariables},
    {ErrorKind::kIo, code::kIoFailure},
    {ErrorKind::kDecode, code::kDecodingFailure},
    {ErrorKind::kInvalidConfig, code::kInvalidNetworkConfig},
    {ErrorKind::kTryAgainLater, code::kTryAgainLater},
    {ErrorKind::kNotAvailable, code::kNotAvailable},
    {ErrorKind::kLimitedConnectivity, code::kLimitedConnectivity},
    {ErrorKind::kDeviceNotFound, 100},
    {ErrorKind::kDeviceBusy, 101},
    {ErrorKind::kKernel, 102},
    {ErrorKind::kDelegateFailed, 103},
    {ErrorKind::kPluginNotFound, 103},
    {ErrorKind::kAddressUnavailable, 104},
    {ErrorKind::kRdmaIsolation, 105},
    {ErrorKind::kGidTimeout, 106},
    {ErrorKind::kState, 107},
    {ErrorKind::kPortNotActive, 108},
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

bool predates_status(const Error& error) {
  const int c = error_code(error);
  return c == code::kIncompatibleCniVersion || c == code::kInvalidEnvironmentVariables;
}

bool predates_gc(const Error& error) {
  const int c = error_code(error);
  return c == code::kIncompatibleCniVersion || c == code::kUnknownContainer ||
         c == code::kInvalidEnvironmentVariables;
}

bool rejects_the_config(const Error& error) {
  const int c = error_code(error);
  return c == code::kIncompatibleCniVersion || c == code::kUnsupportedField ||
         c == code::kInvalidEnvironmentVariables || c == code::kDecodingFailure ||
         c == code::kInvalidNetworkConfig;
}

}  // namespace rdmanet::cni
