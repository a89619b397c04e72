// Cluster mode: addresses unique across every node of a cluster, with no
// network call on the common path.
//
// Each range is cut into aligned blocks (blockSize, e.g. /26; blocks.h). A
// node claims a whole block in etcd with a transaction that succeeds only if
// the block's key does not exist yet (create_revision == 0), and lists the
// blocks it holds in its node store (blocks.json, node_blocks.h). Addresses are
// then allocated inside those blocks exactly as in node mode (same store, same
// locks, same speed); etcd is asked only when every block the node holds is
// full. The keys are in etcd_layout.h; the guarantees in ipam/README.md
// "Cluster mode".
//
// Crash safety: a block is claimed in etcd before the node lists it, and
// unlisted before it is released in etcd. A kill in between leaves a block
// that etcd says is the node's but the node does not list; the next claim
// adopts it. Never the reverse, which would hand out addresses of a block
// another node may claim.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ipam/allocator.h"
#include "ipam/config.h"
#include "ipam/etcd_layout.h"
#include "ipam/kv_store.h"
#include "ipam/node_blocks.h"
#include "ipam/store.h"

namespace rdmanet::ipam {

// The node's blocks as the allocator's source of addresses (allocator.h).
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

  // Steps of grow(). Drops the listed blocks etcd no longer gives this node, and the
  // releases etcd shows done; true when `local` changed.
  bool forget_lost(NodeBlocks& local, const EtcdBlocks& etcd) const;
  // Adopts the blocks of `set` etcd gives this node that it does not list; true when
  // one was added to `local->held`.
  Expected<bool> adopt_unlisted(NodeBlocks& local, const EtcdBlocks& etcd, size_t set,
                                bool* changed);
  // Claims one free block of `set`; true when one was added to `local->held`.
  Expected<bool> claim_free(NodeBlocks& local, const EtcdBlocks& etcd,
                            const std::vector<KeyValue>& kvs, size_t set);

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
  // The one way a block is given back, for DEL and GC alike: `h`, already in
  // `local.releasing` and saved so, is deleted in etcd if unchanged since the node
  // claimed it, then dropped from the list. False when etcd did not answer (whether
  // it is deleted is then unknown: it stays releasing) or the list was not saved.
  bool release(Store& store, NodeBlocks& local, const HeldBlock& h);

  const ClusterConfig& cluster() const { return *config_.cluster; }

  bool damage_tolerant_;
  IpamConfig config_;
  std::string network_;
  std::string node_;
  std::function<int64_t()> now_;
  KvStore& kv_;
};

}  // namespace rdmanet::ipam
