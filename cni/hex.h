// Hex encoding of arbitrary bytes, for file names and JSON fields that must
// carry bytes an interface name may hold (libcni allows more than UTF-8).
#pragma once

#include <string>

namespace rdmanet {

// Lower-case hex, two digits per byte.
std::string hex(const std::string& bytes);

// The inverse of hex(); empty for text that is not lower-case hex pairs.
std::string unhex(const std::string& text);

}  // namespace rdmanet
