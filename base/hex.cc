#include "base/hex.h"

#include <cstring>

namespace rdmanet {

namespace {

constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

}  // namespace

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

std::string base64_encode(const std::string& bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t n = static_cast<uint32_t>(static_cast<unsigned char>(bytes[i])) << 16;
    if (i + 1 < bytes.size()) {
      n |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[i + 1])) << 8;
    }
    if (i + 2 < bytes.size()) {
      n |= static_cast<unsigned char>(bytes[i + 2]);
    }
    out += kB64[(n >> 18) & 63];
    out += kB64[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? kB64[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kB64[n & 63] : '=';
  }
  return out;
}

std::optional<std::string> base64_decode(const std::string& text) {
  if (text.size() % 4 != 0) {
    return std::nullopt;
  }
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    uint32_t n = 0;
    int pad = 0;
    for (size_t k = 0; k < 4; ++k) {
      char c = text[i + k];
      uint32_t v = 0;
      if (c == '=' && i + 4 == text.size() && k >= 2) {
        ++pad;
      } else if (const char* at = std::strchr(kB64, c); c != '\0' && at != nullptr && pad == 0) {
        v = static_cast<uint32_t>(at - kB64);
      } else {
        return std::nullopt;
      }
      n = (n << 6) | v;
    }
    // Canonical only (RFC 4648 3.5): the bits padding drops must be zero, so
    // one text means one byte string.
    if ((pad == 2 && (n & 0xffff) != 0) || (pad == 1 && (n & 0xff) != 0)) {
      return std::nullopt;
    }
    out += static_cast<char>((n >> 16) & 0xff);
    if (pad < 2) {
      out += static_cast<char>((n >> 8) & 0xff);
    }
    if (pad < 1) {
      out += static_cast<char>(n & 0xff);
    }
  }
  return out;
}

}  // namespace rdmanet
