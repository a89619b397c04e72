#include "ipam/pool.h"

#include <algorithm>
#include <bit>

namespace rdmanet::ipam {

void Bitmap::set_range(size_t first, size_t last) {
  for (size_t i = first; i <= last && i < bits_;) {
    if (i % 64 == 0 && last - i >= 63) {
      words_[i / 64] = ~uint64_t{0};
      i += 64;
    } else {
      set(i);
      ++i;
    }
  }
}

size_t Bitmap::count() const {
  size_t n = 0;
  for (uint64_t w : words_) {
    n += static_cast<size_t>(std::popcount(w));
  }
  return n;
}

std::optional<size_t> Bitmap::find_clear_from(size_t from) const {
  if (bits_ == 0) {
    return std::nullopt;
  }
  from %= bits_;
  // Bits before `begin` in its word count as set; bits past bits_ are never set,
  // so a hit at or past `end` means there is none in [begin, end).
  auto scan = [&](size_t begin, size_t end) -> std::optional<size_t> {
    for (size_t i = begin; i < end; i = (i / 64 + 1) * 64) {
      uint64_t w = words_[i / 64] | ((uint64_t{1} << (i % 64)) - 1);
      if (w != ~uint64_t{0}) {
        size_t found = (i / 64) * 64 + static_cast<size_t>(std::countr_one(w));
        return found < end ? std::optional<size_t>(found) : std::nullopt;
      }
    }
    return std::nullopt;
  };
  if (auto hit = scan(from, bits_)) {
    return hit;
  }
  return scan(0, from);
}

Bitmap& Bitmap::operator|=(const Bitmap& other) {
  for (size_t i = 0; i < words_.size() && i < other.words_.size(); ++i) {
    words_[i] |= other.words_[i];
  }
  return *this;
}

Pool::Pool(const RangeSet& set, const std::vector<Prefix>& exclude)
    : exclude_(exclude), v6_(set.v6()), where_(set.where), description_(set.describe()) {
  std::string identity = set.v6() ? "6" : "4";
  for (const auto& r : set.ranges) {
    segments_.push_back({size_, r});
    u128 first = size_;
    size_ += r.end.value - r.start.value + 1;
    identity +=
        "|" + r.subnet.str() + "," + r.start.str() + "," + r.end.str() + "," + r.gateway.str();
    auto reserve = [&](const IpAddr& ip, std::string why) {
      if (ip >= r.start && ip <= r.end) {
        u128 o = first + (ip.value - r.start.value);
        reserved_.push_back({o, o, std::move(why)});
      }
    };
    reserve(r.gateway, "is the gateway of " + r.where);
    reserve(r.subnet.network(), "is the network address of " + r.where);
    if (!r.subnet.addr.v6) {
      reserve(r.subnet.last(), "is the broadcast address of " + r.where);
    }
    for (const auto& p : exclude) {
      if (p.addr.v6 != r.start.v6) {
        continue;
      }
      IpAddr lo = std::max(p.network(), r.start);
      IpAddr hi = std::min(p.last(), r.end);
      if (lo <= hi) {
        reserved_.push_back({first + (lo.value - r.start.value), first + (hi.value - r.start.value),
                             "is excluded by " + p.str()});
      }
      identity += "|x" + p.str();
    }
  }
  std::sort(reserved_.begin(), reserved_.end(),
            [](const Reserved& a, const Reserved& b) { return a.first < b.first; });
  fingerprint_ = fnv1a64(identity);
}

IpAddr Pool::address(u128 ordinal) const {
  auto it = std::upper_bound(segments_.begin(), segments_.end(), ordinal,
                             [](u128 o, const Segment& s) { return o < s.first; });
  return add(std::prev(it)->range.start, ordinal - std::prev(it)->first);
}

const Range& Pool::range_at(u128 ordinal) const {
  auto it = std::upper_bound(segments_.begin(), segments_.end(), ordinal,
                             [](u128 o, const Segment& s) { return o < s.first; });
  return std::prev(it)->range;
}

std::optional<u128> Pool::ordinal(const IpAddr& ip) const {
  for (const auto& s : segments_) {
    if (ip.v6 == s.range.start.v6 && ip >= s.range.start && ip <= s.range.end) {
      return s.first + (ip.value - s.range.start.value);
    }
  }
  return std::nullopt;
}

std::string Pool::reserved_reason(const IpAddr& ip) const {
  auto o = ordinal(ip);
  if (!o) {
    return "is not in " + where_;
  }
  for (const auto& r : reserved_) {
    if (*o >= r.first && *o <= r.last) {
      return r.why;
    }
  }
  return {};
}

bool Pool::reserved(u128 ordinal) const {
  return std::any_of(reserved_.begin(), reserved_.end(),
                     [&](const Reserved& r) { return ordinal >= r.first && ordinal <= r.last; });
}

std::optional<u128> Pool::next_unreserved(u128 from) const {
  u128 o = from;
  // Intervals are sorted by start; one pass jumps over every block that covers o.
  bool moved = true;
  while (moved && o < size_) {
    moved = false;
    for (const auto& r : reserved_) {
      if (o >= r.first && o <= r.last) {
        o = r.last + 1;
        moved = true;
      }
    }
  }
  if (o >= size_) {
    return std::nullopt;
  }
  return o;
}

Bitmap Pool::reserved_mask() const {
  Bitmap mask(static_cast<size_t>(size_));
  for (const auto& r : reserved_) {
    mask.set_range(static_cast<size_t>(r.first), static_cast<size_t>(r.last));
  }
  return mask;
}

std::optional<u128> next_free(const Pool& pool, const Bitmap& taken, u128 cursor) {
  Bitmap mask = pool.reserved_mask();
  mask |= taken;
  auto hit = mask.find_clear_from(static_cast<size_t>(cursor));
  if (!hit) {
    return std::nullopt;
  }
  return u128{*hit};
}

}  // namespace rdmanet::ipam
