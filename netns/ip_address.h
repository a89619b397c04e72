// IP addresses and prefixes as values, with strict parsing and canonical formatting.
#pragma once

#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/error.h"

namespace rdmanet::netns {

class IpAddress {
 public:
  // Parses a plain IPv4 dotted quad or IPv6 address ("10.1.2.3", "fd00::5"); no prefix,
  // zone, port or surrounding space. Errors are kInvalidConfig and quote the input.
  static Expected<IpAddress> parse(std::string_view text);
  // From raw network-order bytes; len must be 4 or 16.
  static IpAddress from_bytes(const void* bytes, size_t len);

  int family() const { return family_; }  // AF_INET or AF_INET6
  bool is_v4() const;
  const uint8_t* data() const { return bytes_.data(); }
  size_t size() const { return is_v4() ? 4 : 16; }
  bool is_link_local() const;  // fe80::/10 or 169.254/16
  std::string str() const;     // canonical form (RFC 5952 for IPv6)

  friend bool operator==(const IpAddress&, const IpAddress&) = default;

 private:
  int family_ = 0;
  std::array<uint8_t, 16> bytes_{};
};

// An interface address with its prefix length ("10.1.2.3/24"); host bits are kept.
struct IpPrefix {
  IpAddress addr;
  int len = 0;

  // Parses "<address>/<len>"; the length is decimal without sign or leading zeros and at
  // most 32 or 128.
  static Expected<IpPrefix> parse(std::string_view text);
  IpPrefix network() const;  // host bits cleared: 10.1.2.3/24 -> 10.1.2.0/24
  std::string str() const;

  friend bool operator==(const IpPrefix&, const IpPrefix&) = default;
};

}  // namespace rdmanet::netns
