// rdmanet-ipam: node-local IPAM, host-local compatible, constant cost per
// ADD/DEL at any number of leases. See ipam/README.md.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>

#include "base/hex.h"
#include "base/json_fields.h"
#include "cni/log.h"
#include "cni/skel.h"
#include "cni/subcommand.h"
#include "cni/validate.h"
#include "ipam/allocator.h"
#include "ipam/cluster.h"
#include "ipam/cluster_admin.h"
#include "ipam/commands.h"
#include "ipam/config.h"
#include "ipam/etcd.h"
#include "ipam/node_name.h"
#include "ipam/reconcile.h"

namespace rdmanet::ipam {
namespace {

// A network config (or conflist) from a file, as a NAD carries it: its name and its
// rdmanet-ipam section. "-" reads standard input.
struct NetworkFile {
  std::string network;
  nlohmann::json ipam;
  nlohmann::json doc;  // the whole file
};

Expected<NetworkFile> read_network_file(const std::string& path) {
  // Not base read_file: an operator may well pass a symlink or a pipe, as in
  // `rdmanet-ipam cluster blocks <(kubectl get net-attach-def ...)`.
  std::stringstream text;
  if (path == "-") {
    text << std::cin.rdbuf();
  } else {
    std::ifstream in(path);
    text << in.rdbuf();
    if (!in) {
      return Error(ErrorKind::kInvalidConfig, path + ": not a readable JSON network config");
    }
  }
  auto doc = parse_json(text.str());
  if (!doc.is_object()) {
    return Error(ErrorKind::kInvalidConfig, path + ": not a readable JSON network config");
  }
  auto string_at = [](const nlohmann::json& obj, const char* key) {
    return obj.is_object() && obj.contains(key) && obj[key].is_string()
               ? obj[key].get<std::string>()
               : std::string();
  };
  NetworkFile out{string_at(doc, "name"), doc.value("ipam", nlohmann::json()), doc};
  if (doc.contains("plugins") && doc["plugins"].is_array()) {
    for (const auto& p : doc["plugins"]) {
      if (p.is_object() && p.contains("ipam") && string_at(p["ipam"], "type") == "rdmanet-ipam") {
        out.ipam = p["ipam"];
        break;
      }
    }
  }
  if (out.network.empty()) {
    return Error(ErrorKind::kInvalidConfig, path + ": has no name");
  }
  return out;
}

// The attachments in the config's "rdmanetKeep" list ([{"containerID", "ifname"}]).
std::vector<Owner> kept_attachments(const NetworkFile& file, const std::string& path) {
  std::vector<Owner> keep;
  Fields f(file.doc, path, ErrorKind::kInvalidConfig);
  std::vector<nlohmann::json> kept;
  f.object_list("rdmanetKeep", &kept);
  for (const auto& k : kept) {
    Owner o;
    Fields(k, "rdmanetKeep", ErrorKind::kInvalidConfig)
        .required_string("containerID", &o.container_id)
        .required_string("ifname", &o.ifname);
    keep.push_back(std::move(o));
  }
  return keep;
}

// The reconcile report as `rdmanet-ipam reconcile` prints it (ipam/README.md).
nlohmann::json report_json(const std::string& network, const NetworkReport& report) {
  nlohmann::json pools = nlohmann::json::array();
  for (const auto& p : report.pools) {
    pools.push_back({{"where", p.where},
                     {"ranges", p.description},
                     {"size", p.size},
                     {"used", p.used},
                     {"blocks", p.blocks}});
  }
  nlohmann::json out = {{"network", network},
                        {"cluster", report.cluster},
                        {"released", report.released},
                        {"pools", pools}};
  if (report.silent_nodes) {
    out["silentNodes"] = *report.silent_nodes;
  }
  if (!report.etcd_error.empty()) {
    out["etcdError"] = report.etcd_error;
  }
  return out;
}

// `rdmanet-ipam reconcile [--heartbeat-ttl S] [--list-silent] CONFIG`: the reclaim rule over every
// lease of the network, then each range set's usage, as one JSON object on stdout (for the node
// agent). The leases of the attachments in the config's "rdmanetKeep" list
// ([{"containerID", "ifname"}]) stay whatever the rule says: the main plugin still has
// them and releases them with its teardown, after its own grace period. In cluster mode,
// --heartbeat-ttl also puts the node's heartbeat and --list-silent lists the owners of
// the network's blocks who have none.
int reconcile_main(std::vector<std::string> args) {
  int heartbeat_ttl = 0;
  bool list_silent = false;
  while (args.size() > 1 && args[0].rfind("--", 0) == 0) {
    if (args[0] == "--heartbeat-ttl" && args.size() > 2) {
      heartbeat_ttl = std::atoi(args[1].c_str());
      args.erase(args.begin(), args.begin() + 2);
    } else if (args[0] == "--list-silent") {
      list_silent = true;
      args.erase(args.begin());
    } else {
      break;
    }
  }
  if (args.size() != 1 || heartbeat_ttl < 0) {
    std::cerr << "usage: rdmanet-ipam reconcile [--heartbeat-ttl SECONDS] [--list-silent] "
                 "CONFIG|-\n";
    return 2;
  }
  auto file = read_network_file(args[0]);
  if (!file) {
    std::cerr << file.error().msg() << "\n";
    return 1;
  }
  ReconcileRequest request{file->network, file->ipam, kept_attachments(*file, args[0]),
                           heartbeat_ttl, list_silent};
  auto done = reconcile_network(request);
  if (!done) {
    std::cerr << done.error().msg() << "\n";
    return 1;
  }
  std::cout << report_json(file->network, *done).dump() << "\n";
  return 0;
}

// `rdmanet-ipam cluster blocks|reclaim-node CONFIG [NODE]`: the operator's
// view of a cluster-mode network's blocks, and the reclaim of a node that is
// gone. CONFIG is the network config (or conflist) as the NAD carries it.
int cluster_main(const std::vector<std::string>& args) {
  auto usage = [] {
    std::cerr << "usage: rdmanet-ipam cluster blocks CONFIG\n"
                 "       rdmanet-ipam cluster reclaim-node CONFIG NODE\n";
    return 2;
  };
  if (args.size() < 2 || (args[0] == "blocks" && args.size() != 2) ||
      (args[0] == "reclaim-node" && args.size() != 3) ||
      (args[0] != "blocks" && args[0] != "reclaim-node")) {
    return usage();
  }
  auto file = read_network_file(args[1]);
  if (!file) {
    std::cerr << file.error().msg() << "\n";
    return 1;
  }
  const std::string& network = file->network;
  auto config = parse_ipam_config(file->ipam);
  if (!config || !config->cluster) {
    std::cerr << args[1] << ": "
              << (!config ? config.error().msg() : std::string("has no ipam.cluster section"))
              << "\n";
    return 1;
  }
  EtcdClient etcd = etcd_client_for(*config->cluster);
  if (args[0] == "blocks") {
    auto owners = list_block_owners(*config, network, etcd);
    if (!owners) {
      std::cerr << owners.error().msg() << "\n";
      return 1;
    }
    for (const auto& o : *owners) {
      std::cout << o.block.str() << " " << (o.node.empty() ? "?" : o.node) << " " << o.claimed_at
                << "\n";
    }
    return 0;
  }
  // Each block is printed as it goes, so a failure half way says what is done.
  auto gone = reclaim_node_blocks(*config, network, args[2], etcd, [&](const Prefix& b) {
    std::cout << "reclaimed " << b.str() << " from " << args[2] << std::endl;
  });
  if (!gone) {
    std::cerr << gone.error().msg() << "\n";
    return 1;
  }
  std::cout << gone->size() << " blocks of " << args[2] << " reclaimed\n";
  return 0;
}

}  // namespace
}  // namespace rdmanet::ipam

namespace {

// The operator's command lines: a bug (or no memory) is a message and status 1, not an
// abort. (CNI calls are guarded the same way inside plugin_main.)
template <typename Command>
int guarded(const char* what, Command command, const std::vector<std::string>& args) {
  try {
    return command(args);
  } catch (const std::exception& e) {
    std::cerr << "rdmanet-ipam " << what << ": internal error: " << e.what() << "\n";
    return 1;
  }
}

// Checks the ipam sections of type rdmanet-ipam in example and deployment configs.
int validate(const std::vector<std::string>& files) {
  rdmanet::cni::Validator validator{"rdmanet-ipam", rdmanet::cni::ValidateWhat::kIpamType,
                                    [](const rdmanet::cni::NetConf& conf) -> rdmanet::Status {
                                      TRY(rdmanet::ipam::parse_ipam_config(conf.ipam));
                                      return rdmanet::ok_status();
                                    }};
  return rdmanet::cni::validate_main(validator, files, std::cout);
}

const rdmanet::cni::Subcommand kSubcommands[] = {
    {"validate", "FILE...", "check the rdmanet-ipam sections of configs", validate},
    {"reconcile", "[--heartbeat-ttl S] [--list-silent] CONFIG",
     "reclaim stranded leases; pool usage",
     [](const auto& args) {
       rdmanet::cni::init_logging("rdmanet-ipam");  // stderr: stdout carries the report
       return guarded("reconcile", rdmanet::ipam::reconcile_main, args);
     }},
    {"cluster", "blocks|reclaim-node CONFIG ...", "cluster mode: address blocks in etcd",
     [](const auto& args) { return guarded("cluster", rdmanet::ipam::cluster_main, args); }},
};

}  // namespace

int main(int argc, char** argv) {
  if (auto status = rdmanet::cni::run_subcommand("rdmanet-ipam", kSubcommands, {argv, argv + argc},
                                                 std::cout, std::cerr)) {
    return *status;
  }
  return rdmanet::cni::plugin_main(rdmanet::ipam::cni_plugin(), rdmanet::cni::process_getenv(),
                                   std::cin, std::cout);
}
