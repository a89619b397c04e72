#include "ipam/etcd_layout.h"

#include <algorithm>
#include <ctime>

#include "base/json_fields.h"
#include "ipam/blocks.h"

namespace rdmanet::ipam {

using nlohmann::json;

namespace {

std::string now_rfc3339() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

std::string network_prefix(const ClusterConfig& c, const std::string& network) {
  std::string p = c.prefix;
  if (p.back() != '/') {
    p += '/';
  }
  return p + network + "/";
}

std::string agents_prefix(const ClusterConfig& c) { return c.prefix + "/.agents/"; }

std::string agent_value(const std::string& node) {
  return json{{"node", node}, {"at", now_rfc3339()}}.dump();
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

std::optional<Prefix> block_of_key(const std::string& key, const std::string& blocks_prefix) {
  if (key.rfind(blocks_prefix, 0) != 0) {
    return std::nullopt;
  }
  std::string text = key.substr(blocks_prefix.size());
  std::replace(text.begin(), text.end(), '_', '/');
  auto p = parse_prefix(text);
  if (!p || p->has_host_bits()) {
    return std::nullopt;
  }
  return p;
}

std::string block_value(const std::string& node) {
  return json{{"node", node}, {"claimedAt", now_rfc3339()}}.dump();
}

std::string block_owner(const std::string& value, std::string* claimed_at) {
  json doc = parse_json(value);
  if (!doc.is_object() || !doc.contains("node") || !doc["node"].is_string()) {
    return "";
  }
  if (claimed_at != nullptr && doc.contains("claimedAt") && doc["claimedAt"].is_string()) {
    *claimed_at = doc["claimedAt"].get<std::string>();
  }
  return doc["node"].get<std::string>();
}

json block_sizes_value(const ClusterConfig& c) {
  return {{"v4", c.block_len_v4}, {"v6", c.block_len_v6}};
}

EtcdBlocks::EtcdBlocks(const std::vector<KeyValue>& kvs, const std::string& blocks_prefix) {
  for (const auto& kv : kvs) {
    if (auto b = block_of_key(kv.key, blocks_prefix)) {
      std::string owner = block_owner(kv.value);
      owners_.insert(owner);
      by_start_.emplace(b->network(), EtcdBlock{*b, std::move(owner), kv.mod_revision});
      lens_.insert(b->len);
    }
  }
}

const EtcdBlock* EtcdBlocks::find(const Prefix& b) const {
  auto [lo, hi] = by_start_.equal_range(b.network());
  for (auto it = lo; it != hi; ++it) {
    if (it->second.block.len == b.len) {
      return &it->second;
    }
  }
  return nullptr;
}

// A blockSize changed on a live network, or nodes reading two versions of the
// config, must not give one address two owners. Aligned blocks overlap only by
// containment, so it is one that starts inside `b` or a larger one holding its start.
bool EtcdBlocks::overlaps(const Prefix& b) const {
  auto inside = by_start_.lower_bound(b.network());
  if (inside != by_start_.end() && inside->first <= b.last()) {
    return true;
  }
  return std::any_of(lens_.begin(), lens_.end(), [&](int len) {
    return len < b.len && find(block_containing(b.network(), len)) != nullptr;
  });
}

}  // namespace rdmanet::ipam
