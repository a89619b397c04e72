#include "ipam/cluster.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "base/files.h"
#include "base/hex.h"
#include "ipam/pool.h"

namespace rdmanet::ipam {

using nlohmann::json;

namespace {

constexpr const char* kBlocksFile = "blocks.json";

// A Kubernetes node name: a DNS-1123 subdomain.
bool is_node_name(const std::string& name) {
  if (name.empty() || name.size() > 253) {
    return false;
  }
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.')) {
      return false;
    }
  }
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  return alnum(name.front()) && alnum(name.back());
}

std::string now_rfc3339() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

Prefix block_containing(const IpAddr& ip, int len) {
  Prefix p{ip, len};
  return Prefix{p.network(), len};
}

int block_len(const ClusterConfig& c, bool v6) { return v6 ? c.block_len_v6 : c.block_len_v4; }

// The owner recorded in a block's etcd value; empty when unreadable.
std::string owner_of(const std::string& value, std::string* claimed_at = nullptr) {
  json doc = json::parse(value, nullptr, false);
  if (!doc.is_object() || !doc.contains("node") || !doc["node"].is_string()) {
    return "";
  }
  if (claimed_at != nullptr && doc.contains("claimedAt") && doc["claimedAt"].is_string()) {
    *claimed_at = doc["claimedAt"].get<std::string>();
  }
  return doc["node"].get<std::string>();
}

// True when some address of `block` is in the range (between its start and end).
bool intersects(const Prefix& block, const Range& r) {
  return r.subnet.addr.v6 == block.addr.v6 && block.last() >= r.start && block.network() <= r.end;
}

// The part of range set `set` inside `block`.
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

// The block a key names ("<prefix>/<net>/blocks/10.1.0.64_26"), or nullopt.
std::optional<Prefix> block_of_key(const std::string& key, const std::string& prefix) {
  if (key.rfind(prefix, 0) != 0) {
    return std::nullopt;
  }
  std::string text = key.substr(prefix.size());
  std::replace(text.begin(), text.end(), '_', '/');
  auto p = parse_prefix(text);
  if (!p || p->has_host_bits()) {
    return std::nullopt;
  }
  return p;
}

// The blocks in etcd, by network address (blocks of different sizes can share one).
class EtcdBlocks {
 public:
  EtcdBlocks(const std::vector<KeyValue>& kvs, const std::string& prefix) {
    for (const auto& kv : kvs) {
      if (auto b = block_of_key(kv.key, prefix)) {
        std::string owner = owner_of(kv.value);
        owners_.insert(owner);
        by_start_.emplace(b->network(), EtcdBlock{*b, std::move(owner), kv.mod_revision});
        lens_.insert(b->len);
      }
    }
  }

  const EtcdBlock* find(const Prefix& b) const {
    auto [lo, hi] = by_start_.equal_range(b.network());
    for (auto it = lo; it != hi; ++it) {
      if (it->second.block.len == b.len) {
        return &it->second;
      }
    }
    return nullptr;
  }

  // True when a block in etcd shares an address with `b`, whatever its size: a
  // blockSize changed on a live network, or nodes reading two versions of the
  // config, must not give one address two owners. Aligned blocks overlap only by
  // containment, so it is one that starts inside `b` or a larger one holding its start.
  bool overlaps(const Prefix& b) const {
    auto inside = by_start_.lower_bound(b.network());
    if (inside != by_start_.end() && inside->first <= b.last()) {
      return true;
    }
    return std::any_of(lens_.begin(), lens_.end(), [&](int len) {
      return len < b.len && find(block_containing(b.network(), len)) != nullptr;
    });
  }

  size_t owners() const { return owners_.size(); }

 private:
  std::multimap<IpAddr, EtcdBlock> by_start_;
  std::set<int> lens_;
  std::set<std::string> owners_;
};

}  // namespace

Expected<std::string> read_node_name(const std::string& file) {
  std::ifstream in(file);
  if (!in) {
    return Error(ErrorKind::kTryAgainLater,
                 "cluster mode needs the node name in " + file + ": " + std::strerror(errno) +
                     " (the rdmanet DaemonSet writes it from NODE_NAME; is it running here?)");
  }
  std::string name;
  std::getline(in, name, '\0');
  while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) {
    name.pop_back();
  }
  if (!is_node_name(name)) {
    return Error(ErrorKind::kInvalidConfig, "the node name in " + file +
                                                " is not a Kubernetes node name: \"" +
                                                name.substr(0, 64) + "\"");
  }
  return name;
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

std::string network_prefix(const ClusterConfig& c, const std::string& network) {
  std::string p = c.prefix;
  if (p.back() != '/') {
    p += '/';
  }
  return p + network + "/";
}

std::string blocks_prefix(const ClusterConfig& c, const std::string& network) {
  return network_prefix(c, network) + "blocks/";
}

std::string block_sizes_key(const ClusterConfig& c, const std::string& network) {
  return network_prefix(c, network) + "blockSizes";
}

std::string block_key(const ClusterConfig& c, const std::string& network, const Prefix& block) {
  std::string name = block.str();
  std::replace(name.begin(), name.end(), '/', '_');
  return blocks_prefix(c, network) + name;
}

ClusterBlocks::ClusterBlocks(IpamConfig config, std::string network, std::string node, KvStore& kv,
                             bool damage_tolerant, std::function<int64_t()> now)
    : damage_tolerant_(damage_tolerant),
      config_(std::move(config)),
      network_(std::move(network)),
      node_(std::move(node)),
      now_(now ? std::move(now) : [] { return static_cast<int64_t>(std::time(nullptr)); }),
      kv_(kv) {}

Expected<NodeBlocks> ClusterBlocks::load(Store& store) const {
  std::string path = store.dir() + "/" + kBlocksFile;
  std::ifstream in(path);
  if (!in) {
    if (errno == ENOENT) {
      return NodeBlocks{};
    }
    return Error(ErrorKind::kIo, "cannot read " + path + ": " + std::strerror(errno));
  }
  std::stringstream text;
  text << in.rdbuf();
  json doc = json::parse(text.str(), nullptr, false);
  // Written atomically: anything unreadable is damage, never a torn write.
  if (!doc.is_object() || !doc.contains("node") || !doc["node"].is_string() ||
      !doc.contains("blocks") || !doc["blocks"].is_array() ||
      (doc.contains("releasing") && !doc["releasing"].is_array())) {
    return Error(ErrorKind::kState, path + " is corrupt");
  }
  if (doc["node"] != node_) {
    return Error(ErrorKind::kState, path + " lists the blocks of node " +
                                        doc["node"].get<std::string>() + ", this node is " + node_ +
                                        " (a store must not move between nodes)");
  }
  NodeBlocks out;
  for (auto [key, list] :
       {std::pair{"blocks", &out.held}, std::pair{"releasing", &out.releasing}}) {
    for (const auto& item : doc.value(key, json::array())) {
      HeldBlock b;
      std::optional<Prefix> p;
      if (item.is_object() && item.contains("block") && item["block"].is_string()) {
        p = parse_prefix(item["block"].get<std::string>());
      }
      if (!p || !item.contains("revision") || !item["revision"].is_number_integer()) {
        return Error(ErrorKind::kState, path + " has a malformed entry: " + item.dump());
      }
      b.block = *p;
      b.revision = item["revision"].get<int64_t>();
      if (item.contains("emptySince") && item["emptySince"].is_number_integer()) {
        b.empty_since = item["emptySince"].get<int64_t>();
      }
      list->push_back(b);
    }
  }
  return out;
}

Status ClusterBlocks::save(Store& store, const NodeBlocks& blocks) const {
  auto to_json = [](const std::vector<HeldBlock>& list) {
    json out = json::array();
    for (const auto& b : list) {
      json item = {{"block", b.block.str()}, {"revision", b.revision}};
      if (b.empty_since) {
        item["emptySince"] = *b.empty_since;
      }
      out.push_back(std::move(item));
    }
    return out;
  };
  json doc = {{"node", node_}, {"blocks", to_json(blocks.held)}};
  if (!blocks.releasing.empty()) {
    doc["releasing"] = to_json(blocks.releasing);
  }
  return write_file_atomically(store.dir() + "/" + kBlocksFile, doc.dump(1) + "\n", 0600);
}

Expected<std::vector<RangeSet>> ClusterBlocks::held(Store& store) {
  auto blocks = load(store);
  if (!blocks && damage_tolerant_) {
    // DEL, CHECK and GC work on leases; they must not fail on the node's block list.
    spdlog::warn("{}; leases only, no block released", blocks.error().msg());
    return config_.range_sets;
  }
  if (!blocks) {
    return std::move(blocks).error();
  }
  auto& list = blocks->held;
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

json ClusterBlocks::claim_value() const { return {{"node", node_}, {"claimedAt", now_rfc3339()}}; }

Expected<std::optional<HeldBlock>> ClusterBlocks::written_by_retry(const Prefix& b,
                                                                   int64_t not_revision) {
  std::string key = block_key(cluster(), network_, b);
  auto now = kv_.range(key, "");
  if (!now) {
    return Error(now.error().kind(), "cannot read block " + b.str() + ": " + now.error().msg());
  }
  if (now->size() == 1 && owner_of(now->front().value) == node_ &&
      now->front().mod_revision != not_revision) {
    spdlog::info("block {} is {}'s (etcd revision {}, written by a retried transaction)", b.str(),
                 node_, now->front().mod_revision);
    return std::optional<HeldBlock>(HeldBlock{b, now->front().mod_revision, now_()});
  }
  return std::optional<HeldBlock>();
}

Expected<std::optional<HeldBlock>> ClusterBlocks::adopt(const EtcdBlock& e) {
  std::string key = block_key(cluster(), network_, e.block);
  auto r = kv_.txn({Compare{Compare::Target::kModRevision, key, e.mod_revision}},
                   {Op{key, claim_value().dump()}});
  if (!r) {
    return Error(r.error().kind(), "cannot adopt block " + e.block.str() + ": " + r.error().msg());
  }
  if (r->succeeded) {
    spdlog::info("adopted block {}: etcd says it is this node's (etcd revision {})", e.block.str(),
                 r->revision);
    return std::optional<HeldBlock>(HeldBlock{e.block, r->revision, now_()});
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
  json mine = {{"v4", cluster().block_len_v4}, {"v6", cluster().block_len_v6}};
  auto found =
      std::find_if(kvs.begin(), kvs.end(), [&](const KeyValue& kv) { return kv.key == key; });
  std::optional<KeyValue> sizes;
  if (found != kvs.end()) {
    sizes = *found;
  } else {
    // The network's first claim: these sizes become the network's, unless another
    // node's first claim was quicker.
    auto r = kv_.txn({Compare{Compare::Target::kCreateRevision, key, 0}}, {Op{key, mine.dump()}});
    if (!r) {
      return Error(r.error().kind(),
                   "cannot record the block sizes of network " + network_ + ": " + r.error().msg());
    }
    auto now = kv_.range(key, "");
    if (!now) {
      return Error(now.error().kind(),
                   "cannot read the block sizes of network " + network_ + ": " + now.error().msg());
    }
    if (now->size() == 1) {
      sizes = now->front();
    }
  }
  if (!sizes) {
    return Error(ErrorKind::kTryAgainLater,
                 "the block sizes of network " + network_ + " vanished from etcd (" + key + ")");
  }
  json theirs = json::parse(sizes->value, nullptr, false);
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
  auto r = kv_.txn({Compare{Compare::Target::kCreateRevision, key, 0},
                    Compare{Compare::Target::kModRevision, sizes, sizes_revision}},
                   {Op{key, claim_value().dump()}});
  if (!r) {
    return Error(r.error().kind(), "cannot claim block " + b.str() + ": " + r.error().msg());
  }
  if (r->succeeded) {
    spdlog::info("claimed block {} for {} (etcd revision {})", b.str(), node_, r->revision);
    return std::optional<HeldBlock>(HeldBlock{b, r->revision, now_()});
  }
  // Lost to another node, or to this very claim: a txn the client retried on another
  // member after its first attempt committed (a leader change) finds the key taken.
  // The key did not exist when grow() read the blocks, and only this process (holding
  // the store lock) writes this node's blocks, so a key naming this node is this claim's.
  return written_by_retry(b, 0);
}

Status ClusterBlocks::grow(Store& store, size_t set) {
  auto local = load(store);
  if (!local) {
    return std::move(local).error();
  }
  // The network's keys: its blocks, and the block sizes every node must use.
  std::string prefix = network_prefix(cluster(), network_);
  auto kvs = kv_.range(prefix, prefix_end(prefix));
  if (!kvs) {
    return Error(kvs.error().kind(), "cannot claim an address block for " +
                                         config_.range_sets[set].where + ": " + kvs.error().msg());
  }
  EtcdBlocks etcd(*kvs, blocks_prefix(cluster(), network_));
  auto mine = [&](const Prefix& b) {
    const EtcdBlock* e = etcd.find(b);
    return e != nullptr && e->owner == node_;
  };
  bool changed = false;
  // A block listed here that etcd no longer gives this node was reclaimed by an
  // operator: stop allocating from it (its leases stay until their DEL).
  std::erase_if(local->held, [&](const HeldBlock& h) {
    if (mine(h.block)) {
      return false;
    }
    const EtcdBlock* e = etcd.find(h.block);
    spdlog::error("block {} is no longer this node's in etcd ({}): no more addresses from it",
                  h.block.str(), e == nullptr ? "gone" : "now " + e->owner);
    changed = true;
    return true;
  });
  // A release etcd no longer shows as pending has happened.
  changed |=
      std::erase_if(local->releasing, [&](const HeldBlock& h) { return !mine(h.block); }) > 0;

  auto candidates = blocks_of(config_, set);
  auto listed = [&](const Prefix& b) {
    return std::any_of(local->held.begin(), local->held.end(),
                       [&](const HeldBlock& h) { return h.block.str() == b.str(); });
  };
  Status result = ok_status();
  bool grew = false;
  // Blocks etcd gives this node that it does not list (a claim killed before it
  // was recorded, a release that did not finish): adopted.
  for (const auto& b : candidates) {
    const EtcdBlock* e = etcd.find(b);
    if (e == nullptr || e->owner != node_ || listed(b)) {
      continue;
    }
    auto adopted = adopt(*e);
    if (!adopted) {
      result = std::move(adopted).error();
      break;
    }
    std::erase_if(local->releasing, [&](const HeldBlock& h) { return h.block.str() == b.str(); });
    changed = true;
    if (*adopted) {
      local->held.push_back(**adopted);
      grew = true;
    }
  }
  std::optional<int64_t> sizes_revision;  // read when a claim is needed
  if (result && !grew) {
    // Claim a free block; nodes start at different places to contend less.
    size_t n = candidates.size();
    size_t start = n == 0 ? 0 : static_cast<size_t>(fnv1a64(node_) % n);
    for (size_t i = 0; i < n && !grew; ++i) {
      const Prefix& b = candidates[(start + i) % n];
      // A block whose every address is excluded (or a gateway) would only be held.
      if (etcd.overlaps(b) ||
          !Pool(clipped(config_.range_sets[set], b), config_.exclude).next_unreserved(0)) {
        continue;
      }
      if (!sizes_revision) {
        auto pinned = pinned_sizes(*kvs);
        if (!pinned) {
          result = std::move(pinned).error();
          break;
        }
        sizes_revision = *pinned;
      }
      auto claimed = claim(b, *sizes_revision);
      if (!claimed) {
        result = std::move(claimed).error();
        break;
      }
      if (*claimed) {
        local->held.push_back(**claimed);
        changed = grew = true;
      }
    }
  }
  if (changed) {
    if (auto s = save(store, *local); !s) {
      return s;
    }
  }
  if (!result) {
    return result;
  }
  if (!grew) {
    return Error(ErrorKind::kAddressUnavailable,
                 "no free address in the blocks node " + node_ + " holds in " +
                     config_.range_sets[set].where + " and all " +
                     std::to_string(candidates.size()) + " of its blocks are claimed (by " +
                     std::to_string(etcd.owners()) + " nodes)");
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

bool ClusterBlocks::release_in_etcd(const HeldBlock& h) {
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
  return true;
}

void ClusterBlocks::released(Store& store, const std::vector<IpAddr>& ips, bool every_block) {
  auto local = load(store);
  if (!local) {
    spdlog::warn("{}", local.error().msg());
    return;
  }
  // Which blocks to look at: those the addresses were in, those already empty
  // (they may be due), and on GC all of them.
  std::vector<HeldBlock*> check;
  std::vector<Prefix> check_blocks;
  for (auto& h : local->held) {
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
  // Pending releases are retried by GC only, so that DELs never wait for an etcd
  // that did not answer.
  bool answered = true;
  if (every_block) {
    while (answered && !local->releasing.empty()) {
      answered = release_in_etcd(local->releasing.front());
      if (answered) {
        local->releasing.erase(local->releasing.begin());
        changed = true;
      }
    }
  }
  if (changed) {
    if (auto s = save(store, *local); !s) {
      spdlog::warn("{}", s.error().msg());
      return;
    }
  }
  // Due blocks, one at a time: unlisted (durably) first, so that from then on this
  // node hands out nothing from it, then deleted in etcd. The first delete etcd
  // does not answer ends the round; the node keeps its other blocks.
  auto due = [&](const HeldBlock& h) {
    return h.empty_since && now - *h.empty_since >= cluster().release_after.count();
  };
  for (auto it = std::find_if(local->held.begin(), local->held.end(), due);
       answered && it != local->held.end();
       it = std::find_if(local->held.begin(), local->held.end(), due)) {
    HeldBlock h = *it;
    local->held.erase(it);
    local->releasing.push_back(h);
    if (auto s = save(store, *local); !s) {
      spdlog::warn("{}", s.error().msg());
      return;
    }
    answered = release_in_etcd(h);
    if (answered) {
      local->releasing.pop_back();
      if (auto s = save(store, *local); !s) {
        spdlog::warn("{}", s.error().msg());
        return;
      }
    }
  }
}

Expected<std::vector<BlockOwner>> list_block_owners(const IpamConfig& config,
                                                    const std::string& network, KvStore& etcd) {
  std::string prefix = blocks_prefix(*config.cluster, network);
  auto kvs = etcd.range(prefix, prefix_end(prefix));
  if (!kvs) {
    return std::move(kvs).error();
  }
  std::vector<BlockOwner> out;
  for (const auto& kv : *kvs) {
    auto b = block_of_key(kv.key, prefix);
    if (!b) {
      continue;
    }
    BlockOwner o;
    o.block = *b;
    o.node = owner_of(kv.value, &o.claimed_at);
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
  auto owners = list_block_owners(config, network, etcd);
  if (!owners) {
    return std::move(owners).error();
  }
  std::vector<Prefix> out;
  for (const auto& o : *owners) {
    if (o.node != node) {
      continue;
    }
    std::string key = block_key(*config.cluster, network, o.block);
    auto r = etcd.txn({Compare{Compare::Target::kModRevision, key, o.mod_revision}},
                      {Op{key, std::nullopt}});
    if (!r) {
      return std::move(r).error();
    }
    if (r->succeeded) {
      out.push_back(o.block);
      if (each) {
        each(o.block);
      }
    }
  }
  return out;
}

}  // namespace rdmanet::ipam
