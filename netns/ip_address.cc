#include "netns/ip_address.h"

#include <arpa/inet.h>

#include <charconv>
#include <cstring>

namespace rdmanet::netns {
namespace {

Error bad(std::string_view what, std::string_view text, std::string_view why) {
  return {ErrorKind::kInvalidConfig,
          "invalid " + std::string(what) + " \"" + std::string(text) + "\": " + std::string(why)};
}

}  // namespace

Expected<IpAddress> IpAddress::parse(std::string_view text) {
  // inet_pton is strict (no octal, no short forms, no zone), but needs a NUL-terminated
  // copy, and a view with an embedded NUL must not be silently truncated.
  if (text.empty() || text.size() > INET6_ADDRSTRLEN || text.find('\0') != text.npos) {
    return bad("IP address", text, "not an IPv4 or IPv6 address");
  }
  std::string copy(text);
  IpAddress ip;
  if (inet_pton(AF_INET, copy.c_str(), ip.bytes_.data()) == 1) {
    ip.family_ = AF_INET;
    return ip;
  }
  if (inet_pton(AF_INET6, copy.c_str(), ip.bytes_.data()) == 1) {
    ip.family_ = AF_INET6;
    return ip;
  }
  return bad("IP address", text, "not an IPv4 or IPv6 address");
}

IpAddress IpAddress::from_bytes(const void* bytes, size_t len) {
  IpAddress ip;
  ip.family_ = len == 4 ? AF_INET : AF_INET6;
  std::memcpy(ip.bytes_.data(), bytes, len == 4 ? 4 : 16);
  return ip;
}

bool IpAddress::is_v4() const { return family_ == AF_INET; }

bool IpAddress::is_link_local() const {
  if (is_v4()) {
    return bytes_[0] == 169 && bytes_[1] == 254;
  }
  return bytes_[0] == 0xfe && (bytes_[1] & 0xc0) == 0x80;
}

std::string IpAddress::str() const {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(family_, bytes_.data(), buf, sizeof buf);
  return buf;
}

Expected<IpPrefix> IpPrefix::parse(std::string_view text) {
  size_t slash = text.find('/');
  if (slash == text.npos) {
    return bad("IP prefix", text, "missing /<prefix length>");
  }
  auto addr = IpAddress::parse(text.substr(0, slash));
  if (!addr.ok()) {
    return bad("IP prefix", text, "not an IPv4 or IPv6 address before '/'");
  }
  std::string_view len_text = text.substr(slash + 1);
  int max = addr->is_v4() ? 32 : 128;
  int len = -1;
  bool digits_only = !len_text.empty() && len_text.size() <= 3 &&
                     len_text.find_first_not_of("0123456789") == len_text.npos &&
                     !(len_text.size() > 1 && len_text[0] == '0');
  if (digits_only) {
    std::from_chars(len_text.data(), len_text.data() + len_text.size(), len);
  }
  if (len < 0 || len > max) {
    return bad("IP prefix", text, "prefix length must be 0.." + std::to_string(max));
  }
  return IpPrefix{*addr, len};
}

IpPrefix IpPrefix::network() const {
  uint8_t bytes[16] = {};
  std::memcpy(bytes, addr.data(), addr.size());
  for (size_t i = 0; i < addr.size(); ++i) {
    int keep = len - static_cast<int>(i) * 8;
    if (keep <= 0) {
      bytes[i] = 0;
    } else if (keep < 8) {
      bytes[i] &= static_cast<uint8_t>(0xff << (8 - keep));
    }
  }
  return {IpAddress::from_bytes(bytes, addr.size()), len};
}

std::string IpPrefix::str() const { return addr.str() + "/" + std::to_string(len); }

}  // namespace rdmanet::netns
