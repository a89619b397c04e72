#include "ipam/ip.h"

#include <arpa/inet.h>

#include <array>
#include <charconv>

namespace rdmanet::ipam {

namespace {

u128 mask_of(int len, int bits) {
  if (len <= 0) {
    return 0;
  }
  u128 all = bits == 128 ? ~u128{0} : (u128{1} << 32) - 1;
  return len >= bits ? all : (all << (bits - len)) & all;
}

}  // namespace

std::string IpAddr::str() const {
  std::array<char, INET6_ADDRSTRLEN> buf{};
  if (!v6) {
    uint32_t be = htonl(static_cast<uint32_t>(value));
    inet_ntop(AF_INET, &be, buf.data(), buf.size());
  } else {
    std::array<unsigned char, 16> bytes{};
    for (int i = 0; i < 16; ++i) {
      bytes[15 - i] = static_cast<unsigned char>(value >> (8 * i));
    }
    inet_ntop(AF_INET6, bytes.data(), buf.data(), buf.size());
  }
  return buf.data();
}

std::optional<IpAddr> parse_ip(const std::string& text) {
  if (text.find(':') == std::string::npos) {
    uint32_t be = 0;
    if (inet_pton(AF_INET, text.c_str(), &be) != 1) {
      return std::nullopt;
    }
    return IpAddr{false, ntohl(be)};
  }
  std::array<unsigned char, 16> bytes{};
  if (inet_pton(AF_INET6, text.c_str(), bytes.data()) != 1) {
    return std::nullopt;
  }
  IpAddr ip{true, 0};
  for (unsigned char b : bytes) {
    ip.value = (ip.value << 8) | b;
  }
  return ip;
}

IpAddr Prefix::network() const { return {addr.v6, addr.value & mask_of(len, addr.bits())}; }

IpAddr Prefix::last() const {
  return {addr.v6,
          network().value | (mask_of(addr.bits(), addr.bits()) & ~mask_of(len, addr.bits()))};
}

bool Prefix::contains(const IpAddr& ip) const {
  return ip.v6 == addr.v6 && (ip.value & mask_of(len, addr.bits())) == network().value;
}

std::string Prefix::str() const { return network().str() + "/" + std::to_string(len); }

std::optional<Prefix> parse_prefix(const std::string& text) {
  auto slash = text.find('/');
  if (slash == std::string::npos) {
    return std::nullopt;
  }
  auto ip = parse_ip(text.substr(0, slash));
  if (!ip) {
    return std::nullopt;
  }
  const char* first = text.data() + slash + 1;
  const char* end = text.data() + text.size();
  int len = -1;
  auto [ptr, ec] = std::from_chars(first, end, len);
  if (ec != std::errc() || ptr != end || first == end || len < 0 || len > ip->bits()) {
    return std::nullopt;
  }
  return Prefix{*ip, len};
}

std::optional<Prefix> parse_ip_or_prefix(const std::string& text) {
  if (text.find('/') != std::string::npos) {
    return parse_prefix(text);
  }
  auto ip = parse_ip(text);
  if (!ip) {
    return std::nullopt;
  }
  return Prefix{*ip, ip->bits()};
}

std::string u128_str(u128 n) {
  if (n == 0) {
    return "0";
  }
  std::string out;
  while (n != 0) {
    out.insert(out.begin(), static_cast<char>('0' + static_cast<int>(n % 10)));
    n /= 10;
  }
  return out;
}

}  // namespace rdmanet::ipam
