// The "ipam" section of a network config, host-local compatible: range sets
// (`ranges`, or the legacy top-level `subnet`/`rangeStart`/`rangeEnd`/
// `gateway`), `routes`, `dataDir`, `dns`, plus `exclude`. Parsing checks
// everything that can be checked without the store; errors are kInvalidConfig
// and name the field ("ipam.ranges[0][1].subnet ...").
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "cni/result.h"
#include "ipam/http_client.h"
#include "ipam/ip.h"

namespace rdmanet::ipam {

inline constexpr const char* kDefaultDataDir = "/var/lib/cni/networks";
// Written by the rdmanet DaemonSet from its NODE_NAME (downward API spec.nodeName).
inline constexpr const char* kDefaultNodeNameFile = "/var/lib/rdmanet/node-name";

struct Range {
  Prefix subnet;      // host bits clear
  IpAddr start;       // first address handed out (default network+1)
  IpAddr end;         // last address handed out (default broadcast-1 / last)
  IpAddr gateway;     // default network+1; never handed out
  std::string where;  // "ipam.ranges[0][1]", for messages
};

// One address per range set per attachment; all ranges of a set share a family.
struct RangeSet {
  std::vector<Range> ranges;
  std::string where;  // "ipam.ranges[0]"
  bool v6() const { return !ranges.empty() && ranges.front().subnet.addr.v6; }
  // "10.1.0.1-10.1.0.254,10.2.0.1-10.2.0.254", for messages.
  std::string describe() const;
};

// Cluster mode ("cluster" object, see cluster.h): the node allocates inside
// address blocks it claims from etcd.
struct ClusterConfig {
  int block_len_v4 = 26;                    // blockSize: prefix length of a v4 block
  int block_len_v6 = 120;                   // blockSizeV6
  std::chrono::seconds release_after{600};  // releaseAfter: empty this long -> released
  std::string node_name_file = kDefaultNodeNameFile;
  std::vector<Endpoint> endpoints;
  std::string prefix = "/rdmanet/ipam";     // etcd key prefix
  std::chrono::milliseconds timeout{5000};  // one etcd call, every endpoint and retry included
  TlsFiles tls;
};

struct IpamConfig {
  std::vector<RangeSet> range_sets;
  std::vector<Prefix> exclude;
  std::vector<cni::Route> routes;
  cni::Dns dns;
  std::string data_dir = kDefaultDataDir;
  std::optional<ClusterConfig> cluster;
};

// Parses and validates conf.ipam.
Expected<IpamConfig> parse_ipam_config(const nlohmann::json& ipam);

}  // namespace rdmanet::ipam
