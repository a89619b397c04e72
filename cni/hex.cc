#include "cni/hex.h"

namespace rdmanet {

std::string hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

std::string unhex(const std::string& text) {
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') {
      return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
      return c - 'a' + 10;
    }
    return -1;
  };
  std::string out;
  for (size_t i = 0; i + 1 < text.size(); i += 2) {
    int hi = nibble(text[i]);
    int lo = nibble(text[i + 1]);
    if (hi < 0 || lo < 0) {
      return {};
    }
    out += static_cast<char>((hi << 4) | lo);
  }
  return text.size() % 2 == 0 ? out : std::string();
}

uint64_t fnv1a64(const std::string& data, uint64_t seed) {
  uint64_t h = seed;
  for (unsigned char c : data) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

std::string bounded_name(const std::string& text, size_t max) {
  if (text.size() <= max) {
    return text;
  }
  std::string digest = hex(std::string(8, '\0'));
  uint64_t h = fnv1a64(text);
  for (int i = 15; i >= 0; --i, h >>= 4) {
    digest[i] = "0123456789abcdef"[h & 15];
  }
  return text.substr(0, 64) + "~" + digest;
}

}  // namespace rdmanet
