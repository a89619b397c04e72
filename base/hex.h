// Encodings. Base64 (RFC 4648), as etcd's JSON gateway carries bytes. File-name-safe hex of
// arbitrary bytes, for file names and JSON
// fields that must carry bytes an interface name may hold (libcni allows more
// than UTF-8), and a hash that stays the same across builds and versions (it
// names files on disk, unlike std::hash).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace rdmanet {

// Lower-case hex, two digits per byte.
std::string hex(const std::string& bytes);

// The inverse of hex(); empty for text that is not lower-case hex pairs.
std::string unhex(const std::string& text);

// Base64 with padding. The decoder takes canonical text only (RFC 4648 3.5: the bits
// under the padding are zero), so one text means one byte string; std::nullopt otherwise.
std::string base64_encode(const std::string& bytes);
std::optional<std::string> base64_decode(const std::string& text);

// FNV-1a, 64 bits.
uint64_t fnv1a64(const std::string& data, uint64_t seed = 14695981039346656037ULL);

// `text` as it is when it is at most `max` bytes, else its first 64 bytes, '~'
// and 16 hex digits of its hash: file names stay under NAME_MAX whatever the
// length of a container id or network name (neither can contain '~').
std::string bounded_name(const std::string& text, size_t max = 128);

}  // namespace rdmanet
