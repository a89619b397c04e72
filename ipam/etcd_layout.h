// Where a cluster-mode network lives in etcd, and what its values hold:
//
//   <prefix>/<network>/blocks/<block, "/" as "_">  {"node": ..., "claimedAt": <RFC 3339>}
//   <prefix>/<network>/blockSizes                  {"v4": 26, "v6": 120}, by the first claim
//   <prefix>/.agents/<node>                        {"node": ..., "at": <RFC 3339>}, with a
//                                                  lease: the node agent's heartbeat
//
// and the network's blocks as a range of its keys shows them.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ipam/config.h"
#include "ipam/ip.h"
#include "ipam/kv_store.h"

namespace rdmanet::ipam {

// "<prefix>/.agents/": the node agents' heartbeats (no network name starts with a dot).
std::string agents_prefix(const ClusterConfig& c);
// The value of `node`'s heartbeat now.
std::string agent_value(const std::string& node);

// "<prefix>/<network>/": every key of the network starts with it.
std::string network_prefix(const ClusterConfig& c, const std::string& network);
std::string blocks_prefix(const ClusterConfig& c, const std::string& network);
std::string block_sizes_key(const ClusterConfig& c, const std::string& network);
std::string block_key(const ClusterConfig& c, const std::string& network, const Prefix& block);
// The block a key under `blocks_prefix` names ("10.1.0.64_26"); nullopt for other keys.
std::optional<Prefix> block_of_key(const std::string& key, const std::string& blocks_prefix);

// The value of a block `node` claims now.
std::string block_value(const std::string& node);
// The node a block's value names, empty when unreadable; its claim time into `claimed_at`.
std::string block_owner(const std::string& value, std::string* claimed_at = nullptr);
// The block sizes of `c` as the blockSizes key holds them.
nlohmann::json block_sizes_value(const ClusterConfig& c);

// A block as etcd records it.
struct EtcdBlock {
  Prefix block;
  std::string owner;  // empty when the value is unreadable
  int64_t mod_revision = 0;
};

// The blocks among a range's keys, by network address (blocks of different
// sizes can share one).
class EtcdBlocks {
 public:
  EtcdBlocks(const std::vector<KeyValue>& kvs, const std::string& blocks_prefix);

  // The block of exactly this prefix, or nullptr.
  const EtcdBlock* find(const Prefix& b) const;
  // True when a block in etcd shares an address with `b`, whatever its size.
  bool overlaps(const Prefix& b) const;
  // How many nodes own blocks.
  size_t owners() const { return owners_.size(); }

 private:
  std::multimap<IpAddr, EtcdBlock> by_start_;
  std::set<int> lens_;
  std::set<std::string> owners_;
};

}  // namespace rdmanet::ipam
