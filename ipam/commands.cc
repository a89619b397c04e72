#include "ipam/commands.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "base/hex.h"
#include "base/json_fields.h"
#include "ipam/allocator.h"
#include "ipam/cluster.h"
#include "ipam/config.h"
#include "ipam/node_name.h"

namespace rdmanet::ipam {

EtcdClient etcd_client_for(const ClusterConfig& c) { return {c.endpoints, c.tls, c.timeout}; }

Expected<Network> allocator_for(const cni::Call& call, bool adding) {
  TRY_ASSIGN(IpamConfig config, parse_ipam_config(call.conf.ipam));
  Network net;
  if (config.cluster) {
    auto node = read_node_name(config.cluster->node_name_file);
    if (node) {
      net.etcd = std::make_unique<EtcdClient>(etcd_client_for(*config.cluster));
      net.blocks =
          std::make_unique<ClusterBlocks>(config, call.conf.name, *node, *net.etcd, !adding);
    } else if (adding) {
      return std::move(node).error();
    } else {
      spdlog::warn("{}; leases only, no block released", node.error().msg());
    }
  }
  std::string dir = config.data_dir + "/" + bounded_name(call.conf.name, 255);
  net.allocator =
      std::make_unique<Allocator>(std::move(config), std::move(dir), nullptr, net.blocks.get());
  return net;
}

namespace {

// Requested addresses from runtimeConfig.ips, args.cni.ips and CNI_ARGS IP=
// ("a,b"); "10.1.2.3/16" is accepted and its prefix ignored, as host-local does.
Expected<std::vector<IpAddr>> requested_ips(const cni::Call& call) {
  std::vector<std::pair<std::string, std::string>> texts;  // (where, text)
  for (size_t n = 0; n < call.conf.runtime.ips.size(); ++n) {
    texts.emplace_back("runtimeConfig.ips[" + std::to_string(n) + "]", call.conf.runtime.ips[n]);
  }
  std::vector<std::string> args_ips;
  Fields args(call.conf.args_cni, "args.cni", ErrorKind::kInvalidConfig);
  TRY(args.string_list("ips", &args_ips).status());
  for (size_t n = 0; n < args_ips.size(); ++n) {
    texts.emplace_back("args.cni.ips[" + std::to_string(n) + "]", args_ips[n]);
  }
  std::string env_ips = call.args.get("IP");
  for (size_t pos = 0; !env_ips.empty() && pos <= env_ips.size();) {
    size_t comma = std::min(env_ips.find(',', pos), env_ips.size());
    texts.emplace_back("CNI_ARGS IP", env_ips.substr(pos, comma - pos));
    pos = comma + 1;
  }
  std::vector<IpAddr> out;
  for (const auto& [where, text] : texts) {
    auto ip = parse_ip(text.substr(0, text.find('/')));
    if (!ip) {
      return Error(ErrorKind::kInvalidConfig,
                   where + " is not a valid IP address: \"" + text + "\"");
    }
    if (std::find(out.begin(), out.end(), *ip) == out.end()) {
      out.push_back(*ip);
    }
  }
  return out;
}

Owner owner_of(const cni::Call& call) { return {call.env.container_id, call.env.ifname}; }

Expected<cni::Result> cmd_add(const cni::Call& call) {
  TRY_ASSIGN(Network net, allocator_for(call, true));
  TRY_ASSIGN(auto requested, requested_ips(call));
  Attachment who{owner_of(call), call.env.netns, call.args.k8s_pod_namespace,
                 call.args.k8s_pod_name, call.args.k8s_pod_uid};
  TRY_ASSIGN(auto allocations, net->add(who, requested));
  TRY_ASSIGN(IpamConfig config, parse_ipam_config(call.conf.ipam));
  return to_result(config, allocations);
}

Status cmd_del(const cni::Call& call) {
  TRY_ASSIGN(Network net, allocator_for(call));
  return net->del(owner_of(call));
}

Status cmd_check(const cni::Call& call) {
  TRY_ASSIGN(Network net, allocator_for(call));
  return net->check(owner_of(call));
}

Status cmd_gc(const cni::Call& call) {
  TRY_ASSIGN(Network net, allocator_for(call));
  std::vector<Owner> valid;
  for (const auto& ref : call.conf.valid_attachments) {
    valid.push_back({ref.container_id, ref.ifname});
  }
  return net->gc(valid);
}

Status cmd_status(const cni::Call& call) {
  TRY_ASSIGN(Network net, allocator_for(call));
  return net->status();
}

}  // namespace

const cni::Plugin& cni_plugin() {
  static const cni::Plugin plugin = [] {
    cni::Plugin p;
    p.name = "rdmanet-ipam";
    p.known_args = {"IP"};
    p.add = cmd_add;
    p.del = cmd_del;
    p.check = cmd_check;
    p.gc = cmd_gc;
    p.status = cmd_status;
    return p;
  }();
  return plugin;
}

}  // namespace rdmanet::ipam
