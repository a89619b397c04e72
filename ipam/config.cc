#include "ipam/config.h"

#include "base/json_fields.h"

namespace rdmanet::ipam {

using nlohmann::json;

namespace {

constexpr ErrorKind kInvalid = ErrorKind::kInvalidConfig;

Expected<IpAddr> address_field(Fields& f, const std::string& key, bool* present) {
  std::string text;
  TRY(f.string(key, &text).status());
  *present = !text.empty();
  if (text.empty()) {
    return IpAddr{};
  }
  auto ip = parse_ip(text);
  if (!ip) {
    return f.error(key, "is not a valid IP address: \"" + text + "\"");
  }
  return *ip;
}

// One range, with host-local's defaults and checks.
Expected<Range> parse_range(const json& obj, const std::string& where) {
  Fields f(obj, where, kInvalid);
  Range r;
  r.where = where;
  std::string subnet;
  TRY(f.required_string("subnet", &subnet).status());
  auto prefix = parse_prefix(subnet);
  if (!prefix) {
    return f.error("subnet", "is not a valid CIDR: \"" + subnet + "\"");
  }
  if (prefix->has_host_bits()) {
    return f.error("subnet",
                   "has host bits set: \"" + subnet + "\" (network is " + prefix->str() + ")");
  }
  // Like host-local: a subnet needs at least 2 host bits (v4 /31 and /32, v6
  // /127 and /128 leave nothing to hand out besides network and gateway).
  if (prefix->len > prefix->addr.bits() - 2) {
    return f.error("subnet", "\"" + subnet + "\" is too small to allocate from (at most /" +
                                 std::to_string(prefix->addr.bits() - 2) + ")");
  }
  r.subnet = *prefix;
  IpAddr network = prefix->network();
  IpAddr last = prefix->last();

  struct Field {
    const char* key;
    IpAddr* out;
    IpAddr fallback;
  };
  for (auto [key, out, fallback] :
       {Field{"gateway", &r.gateway, add(network, 1)},
        Field{"rangeStart", &r.start, add(network, 1)},
        Field{"rangeEnd", &r.end, prefix->addr.v6 ? last : IpAddr{false, last.value - 1}}}) {
    bool present = false;
    TRY_ASSIGN(IpAddr ip, address_field(f, key, &present));
    if (!present) {
      *out = fallback;
      continue;
    }
    if (!prefix->contains(ip)) {
      return f.error(key, ip.str() + " is not in subnet " + prefix->str());
    }
    *out = ip;
  }
  if (r.start > r.end) {
    return f.error("rangeStart", r.start.str() + " is after rangeEnd " + r.end.str());
  }
  return r;
}

bool overlaps(const Range& a, const Range& b) {
  return a.subnet.addr.v6 == b.subnet.addr.v6 && a.start <= b.end && b.start <= a.end;
}

Status parse_routes(Fields& f, std::vector<cni::Route>* routes) {
  std::vector<json> items;
  TRY(f.object_list("routes", &items).status());
  for (size_t n = 0; n < items.size(); ++n) {
    Fields rf(items[n], f.path("routes") + "[" + std::to_string(n) + "]", kInvalid);
    cni::Route route;
    TRY(rf.required_string("dst", &route.dst).status());
    if (!cni::is_valid_cidr(route.dst)) {
      return rf.error("dst", "is not a valid CIDR: \"" + route.dst + "\"");
    }
    TRY(rf.string("gw", &route.gw).status());
    if (!route.gw.empty() && !parse_ip(route.gw)) {
      return rf.error("gw", "is not a valid IP address: \"" + route.gw + "\"");
    }
    routes->push_back(std::move(route));
  }
  return ok_status();
}

// A whole number of seconds (JSON number), at least `min`.
Status seconds_field(Fields& f, const std::string& key, long long min, long long* out) {
  TRY(f.integer64(key, out).status());
  if (*out < min) {
    return f.error(key,
                   "must be at least " + std::to_string(min) + ", got " + std::to_string(*out));
  }
  return ok_status();
}

// Every range must split into blocks: the block no larger than the subnet,
// and at most 2^16 blocks per range (each is one etcd key).
Status check_block_sizes(Fields& f, const ClusterConfig& c, const std::vector<RangeSet>& sets) {
  for (const auto& set : sets) {
    for (const auto& r : set.ranges) {
      bool v6 = r.subnet.addr.v6;
      int len = v6 ? c.block_len_v6 : c.block_len_v4;
      const char* key = v6 ? "blockSizeV6" : "blockSize";
      if (len < r.subnet.len || len > r.subnet.addr.bits() - 2) {
        return f.error(key, "/" + std::to_string(len) + " does not fit " + r.where + ".subnet " +
                                r.subnet.str() + " (between /" + std::to_string(r.subnet.len) +
                                " and /" + std::to_string(r.subnet.addr.bits() - 2) + ")");
      }
      if (len - r.subnet.len > 16) {
        return f.error(key, "/" + std::to_string(len) + " splits " + r.where + ".subnet " +
                                r.subnet.str() + " into 2^" + std::to_string(len - r.subnet.len) +
                                " blocks (at most 2^16)");
      }
    }
  }
  return ok_status();
}

// ipam.cluster.etcd.tls: absolute paths, a cert only with its key, and only for https members.
Status parse_etcd_tls(Fields& e, const json& tls, ClusterConfig& c) {
  Fields t(tls, "ipam.cluster.etcd.tls", kInvalid);
  for (auto [key, out] :
       {std::pair{"ca", &c.tls.ca}, std::pair{"cert", &c.tls.cert}, std::pair{"key", &c.tls.key}}) {
    TRY(t.string(key, out).status());
    if (!out->empty() && out->front() != '/') {
      return t.error(key, "must be an absolute path");
    }
  }
  if (c.tls.cert.empty() != c.tls.key.empty()) {
    return t.error(c.tls.cert.empty() ? "cert" : "key",
                   "is required with " + t.path(c.tls.cert.empty() ? "key" : "cert"));
  }
  for (const auto& ep : c.endpoints) {
    if (!ep.tls) {
      // The certificates would protect some members' traffic and not the others'.
      return e.error("tls", "is set, but endpoint " + ep.url + " is not https");
    }
  }
  return ok_status();
}

// ipam.cluster.etcd: its members, key prefix, timeout and TLS files.
Status parse_etcd(const json& etcd, ClusterConfig& c) {
  Fields e(etcd, "ipam.cluster.etcd", kInvalid);
  std::vector<std::string> urls;
  TRY(e.string_list("endpoints", &urls).status());
  if (urls.empty()) {
    return e.error("endpoints", "must list at least one etcd member URL");
  }
  for (size_t n = 0; n < urls.size(); ++n) {
    auto ep = parse_endpoint(urls[n]);
    if (!ep) {
      return Error(kInvalid,
                   e.path("endpoints") + "[" + std::to_string(n) + "] " + ep.error().msg());
    }
    c.endpoints.push_back(std::move(*ep));
  }
  TRY(e.string("prefix", &c.prefix).status());
  if (c.prefix.empty() || c.prefix.front() != '/') {
    return e.error("prefix", "must start with /");
  }
  long long timeout = 5;
  TRY(seconds_field(e, "timeout", 1, &timeout));
  if (timeout > 60) {
    // A CNI call is itself bounded by the runtime; a minute of waiting is already too long.
    return e.error("timeout", "must be at most 60 seconds, got " + std::to_string(timeout));
  }
  c.timeout = std::chrono::seconds(timeout);
  json tls;
  TRY(e.object("tls", &tls).status());
  if (!tls.is_null()) {
    TRY(parse_etcd_tls(e, tls, c));
  }
  return ok_status();
}

Expected<ClusterConfig> parse_cluster(const json& obj, const std::vector<RangeSet>& sets) {
  Fields f(obj, "ipam.cluster", kInvalid);
  ClusterConfig c;
  TRY(f.integer("blockSize", &c.block_len_v4).status());
  TRY(f.integer("blockSizeV6", &c.block_len_v6).status());
  long long release = c.release_after.count();
  TRY(seconds_field(f, "releaseAfter", 0, &release));
  c.release_after = std::chrono::seconds(release);
  TRY(f.string("nodeNameFile", &c.node_name_file).status());
  if (c.node_name_file.empty() || c.node_name_file.front() != '/') {
    return f.error("nodeNameFile", "must be an absolute path");
  }
  TRY(check_block_sizes(f, c, sets));
  json etcd;
  TRY(f.object("etcd", &etcd).status());
  if (etcd.is_null()) {
    return f.error("etcd", "is required in cluster mode");
  }
  TRY(parse_etcd(etcd, c));
  return c;
}

// ipam.ranges[i]: a non-empty list of ranges of one address family.
Expected<RangeSet> parse_range_set(const json& ranges, const std::string& set_where) {
  if (!ranges.is_array() || ranges.empty()) {
    return Error(kInvalid, set_where + " must be a non-empty array of ranges");
  }
  RangeSet set;
  set.where = set_where;
  for (size_t j = 0; j < ranges.size(); ++j) {
    std::string where = set_where + "[" + std::to_string(j) + "]";
    if (!ranges[j].is_object()) {
      return Error(kInvalid, where + " must be an object, got " + json_type_name(ranges[j]));
    }
    TRY_ASSIGN(Range r, parse_range(ranges[j], where));
    if (!set.ranges.empty() && set.ranges.front().subnet.addr.v6 != r.subnet.addr.v6) {
      return Error(kInvalid, where + ".subnet mixes address families within " + set_where);
    }
    set.ranges.push_back(std::move(r));
  }
  return set;
}

// The legacy single range at the top level comes first, as in host-local; then ipam.ranges.
Expected<std::vector<RangeSet>> parse_range_sets(Fields& f, const json& ipam) {
  std::vector<RangeSet> out;
  if (f.has("subnet")) {
    TRY_ASSIGN(Range r, parse_range(ipam, "ipam"));
    out.push_back(RangeSet{{std::move(r)}, "ipam"});
  }
  if (f.has("ranges")) {
    const json& sets = ipam["ranges"];
    if (!sets.is_array()) {
      return f.error("ranges",
                     std::string("must be an array of range sets, got ") + json_type_name(sets));
    }
    for (size_t i = 0; i < sets.size(); ++i) {
      TRY_ASSIGN(RangeSet set, parse_range_set(sets[i], "ipam.ranges[" + std::to_string(i) + "]"));
      out.push_back(std::move(set));
    }
  }
  if (out.empty()) {
    return Error(kInvalid, "ipam.ranges: no IP ranges specified");
  }
  return out;
}

// No two ranges anywhere may overlap: an address belongs to one range set.
Status check_no_overlap(const std::vector<RangeSet>& sets) {
  std::vector<const Range*> all;
  for (const auto& set : sets) {
    for (const auto& r : set.ranges) {
      for (const Range* other : all) {
        if (overlaps(*other, r)) {
          return Error(kInvalid, r.where + " overlaps with " + other->where + " (" + r.start.str() +
                                     "-" + r.end.str() + " and " + other->start.str() + "-" +
                                     other->end.str() + ")");
        }
      }
      all.push_back(&r);
    }
  }
  return ok_status();
}

Status parse_exclude(Fields& f, std::vector<Prefix>* out) {
  std::vector<std::string> exclude;
  TRY(f.string_list("exclude", &exclude).status());
  for (size_t n = 0; n < exclude.size(); ++n) {
    auto p = parse_ip_or_prefix(exclude[n]);
    if (!p) {
      return Error(kInvalid, "ipam.exclude[" + std::to_string(n) +
                                 "] is not a valid CIDR or address: \"" + exclude[n] + "\"");
    }
    out->push_back(*p);
  }
  return ok_status();
}

}  // namespace

std::string RangeSet::describe() const {
  std::string out;
  for (const auto& r : ranges) {
    out += (out.empty() ? "" : ",") + r.start.str() + "-" + r.end.str();
  }
  return out;
}

Expected<IpamConfig> parse_ipam_config(const json& ipam) {
  IpamConfig config;
  Fields f(ipam, "ipam", kInvalid);
  TRY(f.string("dataDir", &config.data_dir).status());
  if (config.data_dir.empty()) {
    config.data_dir = kDefaultDataDir;
  }
  if (config.data_dir.front() != '/') {
    return f.error("dataDir", "must be an absolute path, not \"" + config.data_dir + "\"");
  }
  TRY_ASSIGN(config.range_sets, parse_range_sets(f, ipam));
  TRY(check_no_overlap(config.range_sets));
  TRY(parse_exclude(f, &config.exclude));
  TRY(parse_routes(f, &config.routes));
  json dns;
  TRY(f.object("dns", &dns).status());
  if (!dns.is_null()) {
    auto decoded = cni::decode_dns(dns, "ipam.dns");
    if (!decoded) {
      return Error(kInvalid, decoded.error().msg());
    }
    config.dns = std::move(*decoded);
  }
  json cluster;
  TRY(f.object("cluster", &cluster).status());
  if (!cluster.is_null()) {
    TRY_ASSIGN(config.cluster, parse_cluster(cluster, config.range_sets));
  }
  return config;
}

}  // namespace rdmanet::ipam
