#include "ipam/cluster_admin.h"

#include <algorithm>
#include <set>

#include "ipam/etcd.h"
#include "ipam/etcd_layout.h"

namespace rdmanet::ipam {

Expected<std::vector<BlockOwner>> list_block_owners(const IpamConfig& config,
                                                    const std::string& network, KvStore& etcd) {
  std::string prefix = blocks_prefix(*config.cluster, network);
  TRY_ASSIGN(auto kvs, etcd.range(prefix, prefix_end(prefix)));
  std::vector<BlockOwner> out;
  for (const auto& kv : kvs) {
    auto b = block_of_key(kv.key, prefix);
    if (!b) {
      continue;
    }
    BlockOwner o;
    o.block = *b;
    o.node = block_owner(kv.value, &o.claimed_at);
    o.mod_revision = kv.mod_revision;
    out.push_back(std::move(o));
  }
  std::sort(out.begin(), out.end(),
            [](const BlockOwner& a, const BlockOwner& b) { return a.block.addr < b.block.addr; });
  return out;
}

Expected<std::vector<Prefix>> reclaim_node_blocks(const IpamConfig& config,
                                                  const std::string& network,
                                                  const std::string& node, KvStore& etcd,
                                                  const std::function<void(const Prefix&)>& each) {
  TRY_ASSIGN(auto owners, list_block_owners(config, network, etcd));
  std::vector<Prefix> out;
  for (const auto& o : owners) {
    if (o.node != node) {
      continue;
    }
    std::string key = block_key(*config.cluster, network, o.block);
    TRY_ASSIGN(TxnResult r, etcd.txn({Compare{Compare::Target::kModRevision, key, o.mod_revision}},
                                     {Op{key, std::nullopt}}));
    if (r.succeeded) {
      out.push_back(o.block);
      if (each) {
        each(o.block);
      }
    }
  }
  return out;
}

Status heartbeat(const ClusterConfig& cluster, const std::string& node, int ttl_seconds,
                 EtcdClient& etcd) {
  TRY_ASSIGN(int64_t lease, etcd.lease_grant(ttl_seconds));
  return etcd.put_with_lease(agents_prefix(cluster) + node, agent_value(node), lease);
}

Expected<std::map<std::string, size_t>> silent_block_owners(const IpamConfig& config,
                                                            const std::string& network,
                                                            KvStore& etcd) {
  std::string agents = agents_prefix(*config.cluster);
  TRY_ASSIGN(auto beating, etcd.range(agents, prefix_end(agents)));
  std::set<std::string> alive;
  for (const auto& kv : beating) {
    alive.insert(kv.key.substr(agents.size()));
  }
  TRY_ASSIGN(auto owners, list_block_owners(config, network, etcd));
  std::map<std::string, size_t> out;
  for (const auto& o : owners) {
    if (!o.node.empty() && alive.count(o.node) == 0) {
      ++out[o.node];
    }
  }
  return out;
}

}  // namespace rdmanet::ipam
