// A range set seen as a pool of ordinals 0..size-1 (its ranges in config
// order), the addresses in it that are never handed out, and the bitmap used
// to find a free ordinal without looking at any lease.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/hex.h"
#include "ipam/config.h"
#include "ipam/ip.h"

namespace rdmanet::ipam {

// Range sets larger than this have no bitmap index; they are probed instead
// (see allocator.h). 2^20 bits is a 128 KiB index file.
inline constexpr u128 kMaxBitmapBits = u128{1} << 20;

class Bitmap {
 public:
  explicit Bitmap(size_t bits = 0) : bits_(bits), words_((bits + 63) / 64, 0) {}

  size_t size() const { return bits_; }
  bool test(size_t i) const { return ((words_[i / 64] >> (i % 64)) & 1U) != 0; }
  void set(size_t i) { words_[i / 64] |= uint64_t{1} << (i % 64); }
  void reset(size_t i) { words_[i / 64] &= ~(uint64_t{1} << (i % 64)); }
  // Sets bits first..last (inclusive).
  void set_range(size_t first, size_t last);
  size_t count() const;
  // The first clear bit at or after `from`, wrapping around to 0; nullopt
  // when every bit is set.
  std::optional<size_t> find_clear_from(size_t from) const;
  Bitmap& operator|=(const Bitmap& other);

  std::vector<uint64_t>& words() { return words_; }
  const std::vector<uint64_t>& words() const { return words_; }

 private:
  size_t bits_;
  std::vector<uint64_t> words_;
};

class Pool {
 public:
  // `exclude` applies to every range set; gateways, the network address and
  // the v4 broadcast address are reserved too.
  Pool(const RangeSet& set, const std::vector<Prefix>& exclude);

  u128 size() const { return size_; }
  bool v6() const { return v6_; }
  bool has_bitmap() const { return size_ <= kMaxBitmapBits; }
  IpAddr address(u128 ordinal) const;
  const Range& range_at(u128 ordinal) const;
  // The ordinal of an address, or nullopt when no range of the set holds it.
  std::optional<u128> ordinal(const IpAddr& ip) const;
  // Why an address of the pool is never handed out ("is the gateway of
  // ipam.ranges[0][0]"), or empty when it may be.
  std::string reserved_reason(const IpAddr& ip) const;
  bool reserved(u128 ordinal) const;
  // The first unreserved ordinal >= from, or nullopt when there is none.
  std::optional<u128> next_unreserved(u128 from) const;
  // A bitmap of size() bits with the reserved ordinals set (bitmap pools only).
  Bitmap reserved_mask() const;
  // Changes whenever the ranges or reserved addresses change: an index built
  // for another fingerprint is rebuilt.
  uint64_t fingerprint() const { return fingerprint_; }
  const std::string& where() const { return where_; }
  const std::string& description() const { return description_; }

 private:
  struct Segment {
    u128 first;  // ordinal of range.start
    Range range;
  };
  struct Reserved {
    u128 first;
    u128 last;
    std::string why;
  };
  std::vector<Segment> segments_;
  std::vector<Reserved> reserved_;  // sorted by first, may overlap
  std::vector<Prefix> exclude_;
  u128 size_ = 0;
  bool v6_ = false;
  uint64_t fingerprint_ = 0;
  std::string where_;
  std::string description_;
};

// Next-fit: the first ordinal at or after `cursor` (wrapping) that is neither
// reserved nor set in `taken`.
std::optional<u128> next_free(const Pool& pool, const Bitmap& taken, u128 cursor);

}  // namespace rdmanet::ipam
