// Link-layer addresses: 6 bytes for Ethernet, 20 for IPoIB.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace rdmanet::netns {

class HwAddress {
 public:
  HwAddress() = default;
  explicit HwAddress(std::vector<uint8_t> bytes) : bytes_(std::move(bytes)) {}
  // Parses colon-separated hex pairs ("02:00:0a:01:02:03"), 1..32 bytes; kInvalidConfig
  // otherwise.
  static Expected<HwAddress> parse(std::string_view text);

  const std::vector<uint8_t>& bytes() const { return bytes_; }
  bool empty() const { return bytes_.empty(); }
  std::string str() const;  // lower-case hex pairs

  friend bool operator==(const HwAddress&, const HwAddress&) = default;

 private:
  std::vector<uint8_t> bytes_;
};

}  // namespace rdmanet::netns
