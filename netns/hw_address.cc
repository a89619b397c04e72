#include "netns/hw_address.h"

namespace rdmanet::netns {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') {
    return c - '0';
  }
  if (c >= 'a' && c <= 'f') {
    return c - 'a' + 10;
  }
  if (c >= 'A' && c <= 'F') {
    return c - 'A' + 10;
  }
  return -1;
}

}  // namespace

Expected<HwAddress> HwAddress::parse(std::string_view text) {
  // "xx" then ":xx" repeated: length 3n-1 for n bytes.
  size_t n = (text.size() + 1) / 3;
  bool ok = !text.empty() && text.size() % 3 == 2 && n <= 32;
  std::vector<uint8_t> bytes;
  for (size_t i = 0; ok && i < n; ++i) {
    int hi = hex_value(text[i * 3]);
    int lo = hex_value(text[i * 3 + 1]);
    bool sep_ok = i + 1 == n || text[i * 3 + 2] == ':';
    ok = hi >= 0 && lo >= 0 && sep_ok;
    bytes.push_back(static_cast<uint8_t>(hi * 16 + lo));
  }
  if (!ok) {
    return Error(ErrorKind::kInvalidConfig,
                 "invalid hardware address \"" + std::string(text) +
                     "\": expected colon-separated hex pairs like 02:00:0a:01:02:03");
  }
  return HwAddress(std::move(bytes));
}

std::string HwAddress::str() const {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (uint8_t b : bytes_) {
    if (!out.empty()) {
      out += ':';
    }
    out += kHex[b >> 4];
    out += kHex[b & 0xf];
  }
  return out;
}

}  // namespace rdmanet::netns
