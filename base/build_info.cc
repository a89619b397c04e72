#include "base/build_info.h"

#ifndef RDMANET_VERSION
#error "RDMANET_VERSION is set by base/CMakeLists.txt"
#endif

namespace rdmanet {

std::string_view build_version() { return RDMANET_VERSION; }

}  // namespace rdmanet
