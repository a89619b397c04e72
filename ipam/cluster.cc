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

#include "cni/atomic_file.h"
#include "cni/hex.h"

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

EtcdClient client_for(const ClusterConfig& c) { return {c.endpoints, c.tls, c.timeout}; }

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
      if (b.last() >= r.start && b.network() <= r.end) {
        out.push_back(b);
      }
      if (b.last() == r.subnet.last()) {
        break;
      }
    }
  }
  return out;
}

std::string blocks_prefix(const ClusterConfig& c, const std::string& network) {
  std::string p = c.prefix;
  if (p.back() != '/') {
    p += '/';
  }
  return p + network + "/blocks/";
}

std::string block_key(const ClusterConfig& c, const std::string& network, const Prefix& block) {
  std::string name = block.str();
  std::replace(name.begin(), name.end(), '/', '_');
  return blocks_prefix(c, network) + name;
}

ClusterBlocks::ClusterBlocks(IpamConfig config, std::string network, std::string node,
                             std::function<int64_t()> now)
    : config_(std::move(config)),
      network_(std::move(network)),
      node_(std::move(node)),
      now_(now ? std::move(now) : [] { return static_cast<int64_t>(std::time(nullptr)); }),
      etcd_(client_for(*config_.cluster)) {}

std::optional<size_t> ClusterBlocks::set_of(const Prefix& block) const {
  for (size_t i = 0; i < config_.range_sets.size(); ++i) {
    for (const auto& r : config_.range_sets[i].ranges) {
      if (r.subnet.addr.v6 == block.addr.v6 && block.len == block_len(cluster(), block.addr.v6) &&
          r.subnet.contains(block.network()) && block.last() >= r.start &&
          block.network() <= r.end) {
        return i;
      }
    }
  }
  return std::nullopt;
}

Expected<std::vector<HeldBlock>> ClusterBlocks::load(Store& store) const {
  std::string path = store.dir() + "/" + kBlocksFile;
  std::ifstream in(path);
  if (!in) {
    if (errno == ENOENT) {
      return std::vector<HeldBlock>{};
    }
    return Error(ErrorKind::kIo, "cannot read " + path + ": " + std::strerror(errno));
  }
  std::stringstream text;
  text << in.rdbuf();
  json doc = json::parse(text.str(), nullptr, false);
  // Written atomically: anything unreadable is damage, never a torn write.
  if (!doc.is_object() || !doc.contains("node") || !doc["node"].is_string() ||
      !doc.contains("blocks") || !doc["blocks"].is_array()) {
    return Error(ErrorKind::kState, path + " is corrupt");
  }
  if (doc["node"] != node_) {
    return Error(ErrorKind::kState, path + " lists the blocks of node " +
                                        doc["node"].get<std::string>() + ", this node is " + node_ +
                                        " (a store must not move between nodes)");
  }
  std::vector<HeldBlock> out;
  for (const auto& item : doc["blocks"]) {
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
    out.push_back(b);
  }
  return out;
}

Status ClusterBlocks::save(Store& store, const std::vector<HeldBlock>& blocks) const {
  json list = json::array();
  for (const auto& b : blocks) {
    json item = {{"block", b.block.str()}, {"revision", b.revision}};
    if (b.empty_since) {
      item["emptySince"] = *b.empty_since;
    }
    list.push_back(std::move(item));
  }
  json doc = {{"node", node_}, {"blocks", std::move(list)}};
  return write_file_atomically(store.dir() + "/" + kBlocksFile, doc.dump(1) + "\n", 0600);
}

Expected<std::vector<RangeSet>> ClusterBlocks::held(Store& store) {
  auto blocks = load(store);
  if (!blocks) {
    return std::move(blocks).error();
  }
  std::sort(blocks->begin(), blocks->end(),
            [](const HeldBlock& a, const HeldBlock& b) { return a.block.addr < b.block.addr; });
  std::vector<RangeSet> out;
  for (const auto& set : config_.range_sets) {
    RangeSet mine;
    mine.where = set.where;
    for (const auto& b : *blocks) {
      for (const auto& r : set.ranges) {
        if (r.subnet.addr.v6 != b.block.addr.v6 ||
            b.block.len != block_len(cluster(), r.subnet.addr.v6) || b.block.last() < r.start ||
            b.block.network() > r.end) {
          continue;
        }
        Range part = r;
        part.start = std::max(r.start, b.block.network());
        part.end = std::min(r.end, b.block.last());
        mine.ranges.push_back(part);
      }
    }
    out.push_back(std::move(mine));
  }
  return out;
}

Status ClusterBlocks::grow(Store& store, size_t set) {
  auto local = load(store);
  if (!local) {
    return std::move(local).error();
  }
  std::string prefix = blocks_prefix(cluster(), network_);
  auto kvs = etcd_.range(prefix, EtcdClient::prefix_end(prefix));
  if (!kvs) {
    return Error(kvs.error().kind(), "cannot claim an address block for " +
                                         config_.range_sets[set].where + ": " + kvs.error().msg());
  }
  std::map<std::string, const KeyValue*> taken;  // block text -> its key
  std::set<std::string> owners;
  for (const auto& kv : *kvs) {
    if (auto b = block_of_key(kv.key, prefix)) {
      taken[b->str()] = &kv;
      owners.insert(owner_of(kv.value));
    }
  }
  bool changed = false;
  // A block listed here that etcd no longer gives this node was reclaimed by an
  // operator: stop allocating from it (its leases stay until their DEL).
  for (auto it = local->begin(); it != local->end();) {
    auto t = taken.find(it->block.str());
    if (t == taken.end() || owner_of(t->second->value) != node_) {
      spdlog::error("block {} is no longer this node's in etcd ({}): no more addresses from it",
                    it->block.str(),
                    t == taken.end() ? "gone" : "now " + owner_of(t->second->value));
      it = local->erase(it);
      changed = true;
    } else {
      ++it;
    }
  }
  auto listed = [&](const Prefix& b) {
    return std::any_of(local->begin(), local->end(),
                       [&](const HeldBlock& h) { return h.block.str() == b.str(); });
  };
  // Blocks etcd gives this node that it does not list (a claim killed before
  // it was recorded, a release killed half way): adopted.
  auto candidates = blocks_of(config_, set);
  bool grew = false;
  for (const auto& b : candidates) {
    auto t = taken.find(b.str());
    if (t != taken.end() && owner_of(t->second->value) == node_ && !listed(b)) {
      spdlog::info("adopting block {}: etcd says it is this node's", b.str());
      local->push_back({b, t->second->mod_revision, std::nullopt});
      changed = grew = true;
    }
  }
  if (!grew) {
    // Claim a free block; nodes start at different places to contend less.
    size_t n = candidates.size();
    size_t start = n == 0 ? 0 : static_cast<size_t>(fnv1a64(node_) % n);
    for (size_t i = 0; i < n && !grew; ++i) {
      const Prefix& b = candidates[(start + i) % n];
      if (taken.count(b.str()) != 0) {
        continue;
      }
      std::string key = block_key(cluster(), network_, b);
      json value = {{"node", node_}, {"claimedAt", now_rfc3339()}};
      auto r =
          etcd_.txn({Compare{Compare::Target::kCreateRevision, key, 0}}, {Op{key, value.dump()}});
      if (!r) {
        return Error(r.error().kind(), "cannot claim block " + b.str() + ": " + r.error().msg());
      }
      if (r->succeeded) {
        spdlog::info("claimed block {} for {} (etcd revision {})", b.str(), node_, r->revision);
        local->push_back({b, r->revision, std::nullopt});
        changed = grew = true;
      }
    }
  }
  if (changed) {
    if (auto s = save(store, *local); !s) {
      return s;
    }
  }
  if (!grew) {
    return Error(ErrorKind::kAddressUnavailable,
                 "no free address in the blocks node " + node_ + " holds in " +
                     config_.range_sets[set].where + " and all " +
                     std::to_string(candidates.size()) + " of its blocks are claimed (by " +
                     std::to_string(owners.size()) + " nodes)");
  }
  return ok_status();
}

bool ClusterBlocks::empty(Store& store, const Prefix& block) const {
  for (IpAddr ip = block.network();; ip = add(ip, 1)) {
    if (store.has_lease(ip)) {
      return false;
    }
    if (ip == block.last()) {
      return true;
    }
  }
}

void ClusterBlocks::released(Store& store, const std::vector<IpAddr>& ips, bool every_block) {
  auto local = load(store);
  if (!local) {
    spdlog::warn("{}", local.error().msg());
    return;
  }
  int64_t now = now_();
  bool changed = false;
  std::vector<HeldBlock> release;
  for (auto it = local->begin(); it != local->end();) {
    bool touched = every_block || std::any_of(ips.begin(), ips.end(), [&](const IpAddr& ip) {
                     return block_containing(ip, it->block.len).str() == it->block.str();
                   });
    if (!touched && !it->empty_since) {
      ++it;
      continue;
    }
    if (!empty(store, it->block)) {
      changed = changed || it->empty_since.has_value();
      it->empty_since.reset();
      ++it;
      continue;
    }
    if (!it->empty_since) {
      it->empty_since = now;
      changed = true;
    }
    if (now - *it->empty_since >= cluster().release_after.count()) {
      release.push_back(*it);
      it = local->erase(it);
      changed = true;
      continue;
    }
    ++it;
  }
  if (!changed) {
    return;
  }
  // Unlisted (and durable) first: from here on this node hands out nothing from them.
  if (auto s = save(store, *local); !s) {
    spdlog::warn("{}", s.error().msg());
    return;
  }
  for (const auto& b : release) {
    std::string key = block_key(cluster(), network_, b.block);
    auto r = etcd_.txn({Compare{Compare::Target::kModRevision, key, b.revision}},
                       {Op{key, std::nullopt}});
    if (!r) {
      // Still this node's in etcd: the next claim adopts it again.
      spdlog::warn("block {} unlisted but not released in etcd: {}", b.block.str(),
                   r.error().msg());
    } else if (!r->succeeded) {
      spdlog::warn("block {} changed in etcd since this node claimed it: left alone",
                   b.block.str());
    } else {
      spdlog::info("released block {} (empty since {})", b.block.str(), *b.empty_since);
    }
  }
}

Expected<std::vector<BlockOwner>> list_block_owners(const IpamConfig& config,
                                                    const std::string& network) {
  auto etcd = client_for(*config.cluster);
  std::string prefix = blocks_prefix(*config.cluster, network);
  auto kvs = etcd.range(prefix, EtcdClient::prefix_end(prefix));
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
                                                  const std::string& node) {
  auto owners = list_block_owners(config, network);
  if (!owners) {
    return std::move(owners).error();
  }
  auto etcd = client_for(*config.cluster);
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
    }
  }
  return out;
}

}  // namespace rdmanet::ipam
