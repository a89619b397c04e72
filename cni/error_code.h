// The one place where error kinds become CNI error codes (spec: 1-99 are the spec's own,
// 100+ the plugin's; see the ErrorKind comments in base/error.h).
#pragma once

#include "base/error.h"

namespace rdmanet::cni {

int error_code(const Error& error);

}  // namespace rdmanet::cni
