// Which build a binary is: the version CMake stamps in (RDMANET_VERSION, the release tag
// for images; the project version otherwise). `rdmanet version` prints it, so an operator
// can tell which build a node runs.
#pragma once

#include <string_view>

namespace rdmanet {

std::string_view build_version();

}  // namespace rdmanet
