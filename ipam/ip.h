// IP addresses and prefixes as 128-bit integers, so that v4 and v6 share one
// arithmetic (ordinals, ranges, bitmaps). A v4 address keeps its 32-bit value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace rdmanet::ipam {

__extension__ using u128 = unsigned __int128;

struct IpAddr {
  bool v6 = false;
  u128 value = 0;

  int bits() const { return v6 ? 128 : 32; }
  std::string str() const;
  // clang-tidy 14 takes the 0 the defaulted <=> compares with for a null pointer
  // (llvm-project#53961, fixed in clang-tidy 18).
  auto operator<=>(const IpAddr&) const = default;  // NOLINT(modernize-use-nullptr)
};

// Parses "10.1.2.3" or "fd00::1" (no prefix, no zone).
std::optional<IpAddr> parse_ip(const std::string& text);

struct Prefix {
  IpAddr addr;  // as written; network() masks the host bits
  int len = 0;

  IpAddr network() const;
  // The highest address of the prefix (the v4 broadcast address).
  IpAddr last() const;
  bool contains(const IpAddr& ip) const;
  bool has_host_bits() const { return network() != addr; }
  std::string str() const;  // "10.1.0.0/16"
  // Equal as written: 10.1.0.1/24 is not 10.1.0.0/24.
  bool operator==(const Prefix&) const = default;
};

// Parses "10.1.0.0/16" or "fd00::/64".
std::optional<Prefix> parse_prefix(const std::string& text);

// Parses either form; a bare address becomes a full-length prefix.
std::optional<Prefix> parse_ip_or_prefix(const std::string& text);

// The address `n` after `ip`; no overflow checks (callers stay inside a prefix).
inline IpAddr add(IpAddr ip, u128 n) {
  ip.value += n;
  return ip;
}

// Decimal text of a 128-bit number, for messages.
std::string u128_str(u128 n);

}  // namespace rdmanet::ipam
