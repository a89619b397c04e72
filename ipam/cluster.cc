#include "ipam/cluster.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <ctime>
#include <nlohmann/json.hpp>

#include "base/hex.h"
#include "base/json_fields.h"
#include "ipam/blocks.h"
#include "ipam/pool.h"

namespace rdmanet::ipam {

using nlohmann::json;

ClusterBlocks::ClusterBlocks(IpamConfig config, std::string network, std::string node, KvStore& kv,
                             bool damage_tolerant, std::function<int64_t()> now)
    : damage_tolerant_(damage_tolerant),
      config_(std::move(config)),
      network_(std::move(network)),
      node_(std::move(node)),
      now_(now ? std::move(now) : [] { return static_cast<int64_t>(std::time(nullptr)); }),
      kv_(kv) {}

Expected<NodeBlocks> ClusterBlocks::load(Store& store) const {
  return load_node_blocks(store.dir(), node_);
}

Status ClusterBlocks::save(Store& store, const NodeBlocks& blocks) const {
  return save_node_blocks(store.dir(), node_, blocks);
}

Expected<std::vector<RangeSet>> ClusterBlocks::held(Store& store) {
  auto blocks = load(store);
  if (!blocks && damage_tolerant_) {
    // DEL, CHECK and GC work on leases; they must not fail on the node's block list.
    spdlog::warn("{}; leases only, no block released", blocks.error().msg());
    return config_.range_sets;
  }
  TRY_ASSIGN(NodeBlocks local, std::move(blocks));
  auto& list = local.held;
  std::sort(list.begin(), list.end(),
            [](const HeldBlock& a, const HeldBlock& b) { return a.block.addr < b.block.addr; });
  std::vector<RangeSet> out;
  for (const auto& set : config_.range_sets) {
    RangeSet mine;
    mine.where = set.where;
    for (const auto& b : list) {
      if (b.block.len == block_len(cluster(), b.block.addr.v6)) {
        auto part = clipped(set, b.block);
        mine.ranges.insert(mine.ranges.end(), part.ranges.begin(), part.ranges.end());
      }
    }
    out.push_back(std::move(mine));
  }
  return out;
}

Expected<std::optional<HeldBlock>> ClusterBlocks::written_by_retry(const Prefix& b,
                                                                   int64_t not_revision) {
  std::string key = block_key(cluster(), network_, b);
  TRY_ASSIGN(auto now, kv_.range(key, "").with_context("cannot read block " + b.str()));
  if (now.size() == 1 && block_owner(now.front().value) == node_ &&
      now.front().mod_revision != not_revision) {
    spdlog::info("block {} is {}'s (etcd revision {}, written by a retried transaction)", b.str(),
                 node_, now.front().mod_revision);
    return std::optional<HeldBlock>(HeldBlock{b, now.front().mod_revision, now_()});
  }
  return std::optional<HeldBlock>();
}

Expected<std::optional<HeldBlock>> ClusterBlocks::adopt(const EtcdBlock& e) {
  std::string key = block_key(cluster(), network_, e.block);
  TRY_ASSIGN(TxnResult r, kv_.txn({Compare{Compare::Target::kModRevision, key, e.mod_revision}},
                                  {Op{key, block_value(node_)}})
                              .with_context("cannot adopt block " + e.block.str()));
  if (r.succeeded) {
    spdlog::info("adopted block {}: etcd says it is this node's (etcd revision {})", e.block.str(),
                 r.revision);
    return std::optional<HeldBlock>(HeldBlock{e.block, r.revision, now_()});
  }
  // Deleted or reclaimed meanwhile, or rewritten by this very adoption (see claim()).
  auto mine = written_by_retry(e.block, e.mod_revision);
  if (mine && !*mine) {
    spdlog::warn("block {} changed in etcd while this node adopted it: left alone", e.block.str());
  }
  return mine;
}

Expected<int64_t> ClusterBlocks::pinned_sizes(const std::vector<KeyValue>& kvs) {
  std::string key = block_sizes_key(cluster(), network_);
  json mine = block_sizes_value(cluster());
  auto found =
      std::find_if(kvs.begin(), kvs.end(), [&](const KeyValue& kv) { return kv.key == key; });
  std::optional<KeyValue> sizes;
  if (found != kvs.end()) {
    sizes = *found;
  } else {
    // The network's first claim: these sizes become the network's, unless another
    // node's first claim was quicker.
    TRY(kv_.txn({Compare{Compare::Target::kCreateRevision, key, 0}}, {Op{key, mine.dump()}})
            .with_context("cannot record the block sizes of network " + network_));
    TRY_ASSIGN(auto now, kv_.range(key, "").with_context("cannot read the block sizes of network " +
                                                         network_));
    if (now.size() == 1) {
      sizes = now.front();
    }
  }
  if (!sizes) {
    return Error(ErrorKind::kTryAgainLater,
                 "the block sizes of network " + network_ + " vanished from etcd (" + key + ")");
  }
  json theirs = parse_json(sizes->value);
  if (theirs != mine) {
    return Error(ErrorKind::kInvalidConfig,
                 "ipam.cluster.blockSize/blockSizeV6 (" + mine.dump() + ") differ from the sizes " +
                     "network " + network_ + " has in etcd at " + key + " (" + sizes->value +
                     "): every node must cut the ranges alike, or blocks of two sizes would "
                     "overlap; change the sizes only when no node holds a block (see the README)");
  }
  return sizes->mod_revision;
}

Expected<std::optional<HeldBlock>> ClusterBlocks::claim(const Prefix& b, int64_t sizes_revision) {
  std::string key = block_key(cluster(), network_, b);
  std::string sizes = block_sizes_key(cluster(), network_);
  TRY_ASSIGN(TxnResult r, kv_.txn({Compare{Compare::Target::kCreateRevision, key, 0},
                                   Compare{Compare::Target::kModRevision, sizes, sizes_revision}},
                                  {Op{key, block_value(node_)}})
                              .with_context("cannot claim block " + b.str()));
  if (r.succeeded) {
    spdlog::info("claimed block {} for {} (etcd revision {})", b.str(), node_, r.revision);
    return std::optional<HeldBlock>(HeldBlock{b, r.revision, now_()});
  }
  // Lost to another node, or to this very claim: a txn the client retried on another
  // member after its first attempt committed (a leader change) finds the key taken.
  // The key did not exist when grow() read the blocks, and only this process (holding
  // the store lock) writes this node's blocks, so a key naming this node is this claim's.
  return written_by_retry(b, 0);
}

bool ClusterBlocks::forget_lost(NodeBlocks& local, const EtcdBlocks& etcd) const {
  auto mine = [&](const Prefix& b) {
    const EtcdBlock* e = etcd.find(b);
    return e != nullptr && e->owner == node_;
  };
  // A block listed here that etcd no longer gives this node was reclaimed by an
  // operator: stop allocating from it (its leases stay until their DEL).
  size_t lost = std::erase_if(local.held, [&](const HeldBlock& h) {
    if (mine(h.block)) {
      return false;
    }
    const EtcdBlock* e = etcd.find(h.block);
    spdlog::error("block {} is no longer this node's in etcd ({}): no more addresses from it",
                  h.block.str(), e == nullptr ? "gone" : "now " + e->owner);
    return true;
  });
  // A release etcd no longer shows as pending has happened.
  size_t done = std::erase_if(local.releasing, [&](const HeldBlock& h) { return !mine(h.block); });
  return lost + done > 0;
}

Expected<bool> ClusterBlocks::adopt_unlisted(NodeBlocks& local, const EtcdBlocks& etcd, size_t set,
                                             bool* changed) {
  // Blocks etcd gives this node that it does not list (a claim killed before it
  // was recorded, a release that did not finish).
  bool grew = false;
  for (const auto& b : blocks_of(config_, set)) {
    const EtcdBlock* e = etcd.find(b);
    if (e == nullptr || e->owner != node_ || local.holds(b)) {
      continue;
    }
    TRY_ASSIGN(auto adopted, adopt(*e));
    std::erase_if(local.releasing, [&](const HeldBlock& h) { return h.block == b; });
    *changed = true;
    if (adopted) {
      local.held.push_back(*adopted);
      grew = true;
    }
  }
  return grew;
}

Expected<bool> ClusterBlocks::claim_free(NodeBlocks& local, const EtcdBlocks& etcd,
                                         const std::vector<KeyValue>& kvs, size_t set) {
  auto candidates = blocks_of(config_, set);
  std::optional<int64_t> sizes_revision;  // read when a claim is needed
  // Nodes start at different places to contend less.
  size_t n = candidates.size();
  size_t start = n == 0 ? 0 : static_cast<size_t>(fnv1a64(node_) % n);
  for (size_t i = 0; i < n; ++i) {
    const Prefix& b = candidates[(start + i) % n];
    // A block whose every address is excluded (or a gateway) would only be held.
    if (etcd.overlaps(b) ||
        !Pool(clipped(config_.range_sets[set], b), config_.exclude).next_unreserved(0)) {
      continue;
    }
    if (!sizes_revision) {
      TRY_ASSIGN(sizes_revision, pinned_sizes(kvs));
    }
    TRY_ASSIGN(auto claimed, claim(b, *sizes_revision));
    if (claimed) {
      local.held.push_back(*claimed);
      return true;
    }
  }
  return false;
}

Status ClusterBlocks::grow(Store& store, size_t set) {
  TRY_ASSIGN(NodeBlocks local, load(store));
  // The network's keys: its blocks, and the block sizes every node must use.
  std::string prefix = network_prefix(cluster(), network_);
  TRY_ASSIGN(auto kvs, kv_.range(prefix, prefix_end(prefix))
                           .with_context("cannot claim an address block for " +
                                         config_.range_sets[set].where));
  EtcdBlocks etcd(kvs, blocks_prefix(cluster(), network_));
  bool changed = forget_lost(local, etcd);
  Expected<bool> grew = adopt_unlisted(local, etcd, set, &changed);
  if (grew && !*grew) {
    grew = claim_free(local, etcd, kvs, set);
    changed = changed || (grew && *grew);
  }
  // What etcd now says is this node's is recorded even when a later step failed.
  if (changed) {
    TRY(save(store, local));
  }
  TRY_ASSIGN(bool got, std::move(grew));
  if (!got) {
    return Error(ErrorKind::kAddressUnavailable,
                 "no free address in the blocks node " + node_ + " holds in " +
                     config_.range_sets[set].where + " and all " +
                     std::to_string(blocks_of(config_, set).size()) +
                     " of its blocks are claimed (by " + std::to_string(etcd.owners()) + " nodes)");
  }
  return ok_status();
}

std::vector<bool> ClusterBlocks::occupied(Store& store, const std::vector<Prefix>& blocks) const {
  // Small blocks (a v4 /26: 64 addresses) are probed address by address; when that
  // would take more probes than reading the lease directory once, it is read instead
  // (a v6 /80 block has 2^48 addresses).
  constexpr u128 kMaxProbes = 4096;
  u128 probes = 0;
  for (const auto& b : blocks) {
    int host_bits = b.addr.bits() - b.len;
    probes += host_bits >= 32 ? kMaxProbes + 1 : u128{1} << host_bits;
  }
  std::vector<bool> out(blocks.size(), false);
  if (probes <= kMaxProbes) {
    for (size_t k = 0; k < blocks.size(); ++k) {
      for (IpAddr ip = blocks[k].network();; ip = add(ip, 1)) {
        if (store.has_lease(ip)) {
          out[k] = true;
          break;
        }
        if (ip == blocks[k].last()) {
          break;
        }
      }
    }
    return out;
  }
  auto leased = store.leased_addresses();
  if (!leased) {
    spdlog::warn("{}: no block released", leased.error().msg());
    return std::vector<bool>(blocks.size(), true);
  }
  for (const auto& ip : *leased) {
    for (size_t k = 0; k < blocks.size(); ++k) {
      out[k] = out[k] || blocks[k].contains(ip);
    }
  }
  return out;
}

bool ClusterBlocks::release(Store& store, NodeBlocks& local, const HeldBlock& h) {
  std::string key = block_key(cluster(), network_, h.block);
  auto r =
      kv_.txn({Compare{Compare::Target::kModRevision, key, h.revision}}, {Op{key, std::nullopt}});
  if (!r) {
    // The delete may still commit: the block stays out of the node's list, and is
    // retried by GC or taken back (rewritten) by the next claim.
    spdlog::warn("block {} unlisted; its release in etcd did not complete: {}", h.block.str(),
                 r.error().msg());
    return false;
  }
  if (!r->succeeded) {
    spdlog::warn("block {} changed in etcd since this node claimed it: left alone", h.block.str());
  } else {
    spdlog::info("released block {}", h.block.str());
  }
  std::erase_if(local.releasing, [&](const HeldBlock& p) { return p.block == h.block; });
  if (auto s = save(store, local); !s) {
    spdlog::warn("{}", s.error().msg());
    return false;
  }
  return true;
}

void ClusterBlocks::released(Store& store, const std::vector<IpAddr>& ips, bool every_block) {
  auto loaded = load(store);
  if (!loaded) {
    spdlog::warn("{}", loaded.error().msg());
    return;
  }
  NodeBlocks& local = *loaded;
  // Which blocks to look at: those the addresses were in, those already empty
  // (they may be due), and on GC all of them.
  std::vector<HeldBlock*> check;
  std::vector<Prefix> check_blocks;
  for (auto& h : local.held) {
    bool touched =
        every_block || h.empty_since ||
        std::any_of(ips.begin(), ips.end(), [&](const IpAddr& ip) { return h.block.contains(ip); });
    if (touched) {
      check.push_back(&h);
      check_blocks.push_back(h.block);
    }
  }
  int64_t now = now_();
  bool changed = false;
  auto used = occupied(store, check_blocks);
  for (size_t k = 0; k < check.size(); ++k) {
    HeldBlock& h = *check[k];
    if (used[k] && h.empty_since) {
      h.empty_since.reset();
      changed = true;
    } else if (!used[k] && !h.empty_since) {
      h.empty_since = now;
      changed = true;
    }
  }
  if (changed) {
    if (auto s = save(store, local); !s) {
      spdlog::warn("{}", s.error().msg());
      return;
    }
  }
  // Pending releases are retried by GC only, so that DELs never wait for an etcd
  // that did not answer. The first release etcd does not answer ends the round;
  // the node keeps its other blocks.
  bool answered = true;
  while (every_block && answered && !local.releasing.empty()) {
    HeldBlock pending = local.releasing.front();
    answered = release(store, local, pending);
  }
  // Due blocks, one at a time: unlisted (durably) first, so that from then on this
  // node hands out nothing from it, then released.
  auto due = [&](const HeldBlock& h) {
    return h.empty_since && now - *h.empty_since >= cluster().release_after.count();
  };
  for (auto it = std::find_if(local.held.begin(), local.held.end(), due);
       answered && it != local.held.end();
       it = std::find_if(local.held.begin(), local.held.end(), due)) {
    HeldBlock h = *it;
    local.held.erase(it);
    local.releasing.push_back(h);
    if (auto s = save(store, local); !s) {
      spdlog::warn("{}", s.error().msg());
      return;
    }
    answered = release(store, local, h);
  }
}

}  // namespace rdmanet::ipam
