// rdmanet: attaches an RDMA netdev, SR-IOV VF or a macvlan child of an RDMA NIC to a pod's
// network namespace (the CNI plugin, plugin/), with rdmanet-ipam linked in and run in process
// for networks whose IPAM type it is. Its subcommands: `validate FILE...` checks configs;
// `rdma-netns-mode [shared|exclusive]` shows or sets the node's RDMA netns mode (for
// operators and node preparation); `state list|forget` shows attachment records and drops
// those DEL cannot finish; `topology` lists the node's RDMA NICs with the GPUs nearest to
// each; `node-agent` tears down what missed its DEL and serves metrics (agent/node_agent.h).
// This main is in the top layer because it puts the others together.
#include <iostream>
#include <string>
#include <vector>

#include "agent/node_agent.h"
#include "cni/skel.h"
#include "cni/subcommand.h"
#include "cni/validate.h"
#include "ipam/commands.h"
#include "plugin/commands.h"
#include "plugin/conf.h"
#include "plugin/state_command.h"
#include "plugin/topology_command.h"
#include "rdma/nldev.h"

namespace {

// The IPAM plugins this binary runs in process: one exec less per ADD and DEL.
const rdmanet::cni::Plugin* const kLinkedIpam[] = {&rdmanet::ipam::cni_plugin()};

// A NetworkAttachmentDefinition usually names no device: the device plugin
// picks one per pod and Multus passes it as runtimeConfig.deviceID.
rdmanet::Status check_conf(const rdmanet::cni::NetConf& net) {
  rdmanet::cni::NetConf conf = net;
  auto loaded = rdmanet::plugin::load_conf(conf, {});
  if (!loaded && net.runtime.device_id.empty() &&
      loaded.error().msg().rfind("no device selected", 0) == 0) {
    conf.runtime.device_id = "0000:00:00.0";
    loaded = rdmanet::plugin::load_conf(conf, {});
  }
  return loaded ? rdmanet::ok_status() : rdmanet::Status(std::move(loaded).error());
}

int rdma_netns_mode(const std::vector<std::string>& args) {
  using rdmanet::rdma::kNetnsModeNames;
  using rdmanet::rdma::NetnsMode;
  std::optional<NetnsMode> want;
  if (args.size() == 1) {
    want = rdmanet::value_of(kNetnsModeNames, args[0]);
  }
  if (args.size() > 1 || (args.size() == 1 && !want)) {
    std::cerr << "usage: rdmanet rdma-netns-mode [shared|exclusive]\n";
    return 2;
  }
  auto nl = rdmanet::rdma::Nldev::open();
  if (nl && want) {
    if (auto s = nl->set_netns_mode(*want); !s) {
      std::cerr << "rdmanet: " << s.error().msg() << "\n";
      return 1;
    }
  }
  auto mode = nl ? nl->netns_mode() : rdmanet::Expected<NetnsMode>(std::move(nl).error());
  if (!mode) {
    std::cerr << "rdmanet: " << mode.error().msg() << "\n";
    return 1;
  }
  std::cout << rdmanet::rdma::netns_mode_name(*mode) << "\n";
  return 0;
}

int validate(const std::vector<std::string>& files) {
  rdmanet::cni::Validator validator{"rdmanet", rdmanet::cni::ValidateWhat::kPluginType, check_conf};
  return rdmanet::cni::validate_main(validator, files, std::cout);
}

const rdmanet::cni::Subcommand kSubcommands[] = {
    {"validate", "FILE...", "check NetworkAttachmentDefinitions and CNI configs", validate},
    {"rdma-netns-mode", "[shared|exclusive]", "show or set the node's RDMA netns mode",
     rdma_netns_mode},
    {"state", "list|forget ...", "the attachment records DEL reads",
     [](const auto& args) { return rdmanet::plugin::state_main(args, std::cout, std::cerr); }},
    {"topology", "[--json] [--sysfs-root DIR]", "the node's RDMA NICs, GPUs nearest to each",
     [](const auto& args) { return rdmanet::plugin::topology_main(args, std::cout, std::cerr); }},
    {"node-agent", "[OPTIONS]", "tear down what missed its DEL, serve metrics",
     [](const auto& args) { return rdmanet::agent::node_agent_main(args, kLinkedIpam); }},
};

}  // namespace

int main(int argc, char** argv) {
  if (auto status = rdmanet::cni::run_subcommand("rdmanet", kSubcommands, {argv, argv + argc},
                                                 std::cout, std::cerr)) {
    return *status;
  }
  return rdmanet::cni::plugin_main(rdmanet::plugin::cni_plugin(kLinkedIpam),
                                   rdmanet::cni::process_getenv(), std::cin, std::cout);
}
