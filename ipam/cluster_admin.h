// The operator's view of a cluster-mode network and the reclaim of a node that
// is gone (rdmanet-ipam cluster blocks|reclaim-node, see ipam/README.md).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "base/error.h"
#include "ipam/config.h"
#include "ipam/ip.h"
#include "ipam/kv_store.h"

namespace rdmanet::ipam {

struct BlockOwner {
  Prefix block;
  std::string node;  // empty when the value is unreadable
  std::string claimed_at;
  int64_t mod_revision = 0;
};

// Every block of `network` in etcd with its owner, in address order.
Expected<std::vector<BlockOwner>> list_block_owners(const IpamConfig& config,
                                                    const std::string& network, KvStore& etcd);

// Deletes every block `node` holds in etcd, each only if unchanged since it was
// read (a block its node rewrote meanwhile stays); returns the blocks deleted,
// calling `each` for every one as it goes. For a node that is gone: see the README.
Expected<std::vector<Prefix>> reclaim_node_blocks(
    const IpamConfig& config, const std::string& network, const std::string& node, KvStore& etcd,
    const std::function<void(const Prefix&)>& each = {});

// The node agent's heartbeat: <prefix>/.agents/<node>, attached to a fresh lease of
// `ttl_seconds` each time (the old one expires on its own). A node whose agent stops is
// gone from there `ttl_seconds` later.
class EtcdClient;
Status heartbeat(const ClusterConfig& cluster, const std::string& node, int ttl_seconds,
                 EtcdClient& etcd);

// The owners of `network`'s blocks that have no heartbeat, with how many blocks each holds.
// Only the report: their blocks come back through reclaim_node_blocks alone, since a node
// cut off from etcd still hands out addresses from the blocks it holds.
Expected<std::map<std::string, size_t>> silent_block_owners(const IpamConfig& config,
                                                            const std::string& network,
                                                            KvStore& etcd);

}  // namespace rdmanet::ipam
