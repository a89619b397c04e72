// Cluster mode: addresses unique across every node of a cluster, with no
// network call on the common path.
//
// Each range is cut into aligned blocks (blockSize, e.g. /26). A node claims
// a whole block in etcd with a transaction that succeeds only if the block's
// key does not exist yet (create_revision == 0), and lists the blocks it holds
// in its node store (<dataDir>/<network>/blocks.json). Addresses are then
// allocated inside those blocks exactly as in node mode (same store, same
// locks, same speed); etcd is asked only when every block the node holds is
// full. See ipam/README.md "Cluster mode" for the guarantees.
//
// etcd layout, per network:
//   <prefix>/<network>/blocks/<block, "/" as "_">  {"node": ..., "claimedAt": ...}
//   <prefix>/<network>/blockSizes                  {"v4": 26, "v6": 120}, by the first claim
//
// Crash safety: a block is claimed in etcd before the node lists it, and
// unlisted before it is released in etcd. A kill in between leaves a block
// that etcd says is the node's but the node does not list; the next claim
// adopts it. Never the reverse, which would hand out addresses of a block
// another node may claim.
#pragma once

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "ipam/allocator.h"
#include "ipam/config.h"
#include "ipam/kv_store.h"
#include "ipam/store.h"

namespace rdmanet::ipam {

// A block the node holds, as recorded in blocks.json.
struct HeldBlock {
  Prefix block;
  int64_t revision = 0;                // etcd mod_revision of the claim: a release compares it
  std::optional<int64_t> empty_since;  // unix seconds; set by the DEL that emptied it
};

// The node's blocks file (blocks.json).
struct NodeBlocks {
  std::vector<HeldBlock> held;  // allocated from
  // Unlisted for release, their etcd delete sent but not known to have happened: GC
  // retries it, and a claim that finds one still the node's in etcd takes it back.
  std::vector<HeldBlock> releasing;
};

// A block as etcd records it.
struct EtcdBlock {
  Prefix block;
  std::string owner;  // empty when the value is unreadable
  int64_t mod_revision = 0;
};

// Reads the node name the DaemonSet wrote; kTryAgainLater when it has not
// yet, kInvalidConfig when it is not a Kubernetes node name.
Expected<std::string> read_node_name(const std::string& file);

// Every block of range set `set` (in address order), clipped to its ranges.
std::vector<Prefix> blocks_of(const IpamConfig& config, size_t set);

// The etcd key of a block and back.
std::string block_key(const ClusterConfig& c, const std::string& network, const Prefix& block);
std::string blocks_prefix(const ClusterConfig& c, const std::string& network);

class ClusterBlocks final : public BlockSource {
 public:
  // `config.cluster` must be set; `kv` (etcd) must outlive this object.
  // `damage_tolerant` (DEL, CHECK, GC): a damaged blocks.json means leases only
  // (the config's whole ranges), never a failed call. `now`: unix seconds (tests).
  ClusterBlocks(IpamConfig config, std::string network, std::string node, KvStore& kv,
                bool damage_tolerant = false, std::function<int64_t()> now = {});

  Expected<std::vector<RangeSet>> held(Store& store) override;
  Status grow(Store& store, size_t set) override;
  void released(Store& store, const std::vector<IpAddr>& ips, bool every_block) override;

 private:
  Expected<NodeBlocks> load(Store& store) const;
  Status save(Store& store, const NodeBlocks& blocks) const;
  nlohmann::json claim_value() const;
  // Takes a block etcd says is this node's but the node does not list. Rewritten, not
  // just listed: the rewrite moves its mod_revision, so a delete of it still in flight
  // (a release that timed out) or an operator's reclaim can no longer remove it from
  // under the node. nullopt when the key changed meanwhile.
  Expected<std::optional<HeldBlock>> adopt(const EtcdBlock& e);
  // The network's block sizes in etcd (recorded by its first claim), checked against
  // this node's config (kInvalidConfig when they differ); returns the key's revision,
  // which every claim compares. `kvs`: the network's keys, as grow() read them.
  Expected<int64_t> pinned_sizes(const std::vector<KeyValue>& kvs);
  // The block if this node got it; nullopt when another node has it (or the
  // network's block sizes changed since `sizes_revision`).
  Expected<std::optional<HeldBlock>> claim(const Prefix& b, int64_t sizes_revision);
  // After a transaction of this node on block `b` failed its comparison: the block, if
  // etcd now has it as this node's at a revision other than `not_revision` (the
  // client retried the transaction on another member after the first attempt had
  // committed, and the answer was lost); nullopt otherwise.
  Expected<std::optional<HeldBlock>> written_by_retry(const Prefix& b, int64_t not_revision);
  // For each block, whether some address in it is leased.
  std::vector<bool> occupied(Store& store, const std::vector<Prefix>& blocks) const;
  // Deletes an unlisted block in etcd if unchanged since the node claimed it; false
  // when etcd did not answer (whether it is deleted is then unknown).
  bool release_in_etcd(const HeldBlock& h);

  const ClusterConfig& cluster() const { return *config_.cluster; }

  bool damage_tolerant_;
  IpamConfig config_;
  std::string network_;
  std::string node_;
  std::function<int64_t()> now_;
  KvStore& kv_;
};

// Operator views and actions (rdmanet-ipam cluster ...).
struct BlockOwner {
  Prefix block;
  std::string node;
  std::string claimed_at;
  int64_t mod_revision = 0;
};
Expected<std::vector<BlockOwner>> list_block_owners(const IpamConfig& config,
                                                    const std::string& network, KvStore& etcd);
// Deletes every block `node` holds in etcd (each only if unchanged since it was
// read); returns the blocks deleted. For a node that is gone: see the README.
// `each` is called for every block as it is deleted.
Expected<std::vector<Prefix>> reclaim_node_blocks(
    const IpamConfig& config, const std::string& network, const std::string& node, KvStore& etcd,
    const std::function<void(const Prefix&)>& each = {});

}  // namespace rdmanet::ipam
