// Address blocks of cluster mode: each range is cut into aligned blocks of the
// network's block size (a node claims whole blocks, see cluster.h), and the
// node allocates from the parts of its range sets inside the blocks it holds.
#pragma once

#include <vector>

#include "ipam/config.h"
#include "ipam/ip.h"

namespace rdmanet::ipam {

// The prefix length of a block of the family: blockSize or blockSizeV6.
int block_len(const ClusterConfig& c, bool v6);

// The aligned block of length `len` that holds `ip`.
Prefix block_containing(const IpAddr& ip, int len);

// Every block of range set `set` that holds an address of one of its ranges, in
// address order; `config.cluster` must be set.
std::vector<Prefix> blocks_of(const IpamConfig& config, size_t set);

// The part of range set `set` inside `block`: its ranges cut to the block, each
// keeping its subnet and gateway (results report the network's prefix).
RangeSet clipped(const RangeSet& set, const Prefix& block);

}  // namespace rdmanet::ipam
