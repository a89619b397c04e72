#include "ipam/blocks.h"

#include <algorithm>

namespace rdmanet::ipam {

namespace {

// True when some address of `block` is in the range (between its start and end).
bool intersects(const Prefix& block, const Range& r) {
  return r.subnet.addr.v6 == block.addr.v6 && block.last() >= r.start && block.network() <= r.end;
}

}  // namespace

int block_len(const ClusterConfig& c, bool v6) { return v6 ? c.block_len_v6 : c.block_len_v4; }

Prefix block_containing(const IpAddr& ip, int len) {
  Prefix p{ip, len};
  return Prefix{p.network(), len};
}

std::vector<Prefix> blocks_of(const IpamConfig& config, size_t set) {
  std::vector<Prefix> out;
  for (const auto& r : config.range_sets[set].ranges) {
    int len = block_len(*config.cluster, r.subnet.addr.v6);
    u128 size = u128{1} << (r.subnet.addr.bits() - len);
    for (IpAddr at = r.subnet.network(); at <= r.subnet.last(); at = add(at, size)) {
      Prefix b{at, len};
      if (intersects(b, r)) {
        out.push_back(b);
      }
      if (b.last() == r.subnet.last()) {
        break;
      }
    }
  }
  return out;
}

RangeSet clipped(const RangeSet& set, const Prefix& block) {
  RangeSet part;
  part.where = set.where;
  for (const auto& r : set.ranges) {
    if (intersects(block, r)) {
      Range c = r;
      c.start = std::max(r.start, block.network());
      c.end = std::min(r.end, block.last());
      part.ranges.push_back(c);
    }
  }
  return part;
}

}  // namespace rdmanet::ipam
