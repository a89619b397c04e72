// rdmanet: attaches an RDMA netdev, SR-IOV VF or a macvlan child of an RDMA
// NIC to a pod's network namespace. `rdmanet validate FILE...` checks configs;
// `rdmanet rdma-netns-mode [shared|exclusive]` shows or sets the node's RDMA
// netns mode (for operators and node preparation); `rdmanet state list|forget`
// shows attachment records and drops those DEL cannot finish; `rdmanet topology` lists the
// node's RDMA NICs with the GPUs nearest to each; `rdmanet node-agent` tears down what missed
// its DEL and serves metrics (plugin/node_agent.h).
#include <iostream>
#include <string>

#include "cni/skel.h"
#include "cni/validate.h"
#include "plugin/commands.h"
#include "plugin/conf.h"
#include "plugin/node_agent.h"
#include "plugin/state_command.h"
#include "plugin/topology_command.h"
#include "rdma/nldev.h"

namespace {

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

int rdma_netns_mode(int argc, char** argv) {
  using rdmanet::rdma::kNetnsModeNames;
  using rdmanet::rdma::NetnsMode;
  std::optional<NetnsMode> want;
  if (argc == 3) {
    want = rdmanet::value_of(kNetnsModeNames, argv[2]);
  }
  if (argc > 3 || (argc == 3 && !want)) {
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

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "validate") {
    rdmanet::cni::Validator validator{"rdmanet", rdmanet::cni::ValidateWhat::kPluginType,
                                      check_conf};
    return rdmanet::cni::validate_main(validator, {argv + 2, argv + argc}, std::cout);
  }
  if (argc >= 2 && std::string(argv[1]) == "rdma-netns-mode") {
    return rdma_netns_mode(argc, argv);
  }
  if (argc >= 2 && std::string(argv[1]) == "topology") {
    return rdmanet::plugin::topology_main({argv + 2, argv + argc}, std::cout, std::cerr);
  }
  if (argc >= 2 && std::string(argv[1]) == "node-agent") {
    return rdmanet::plugin::node_agent_main({argv + 2, argv + argc});
  }
  if (argc >= 2 && std::string(argv[1]) == "state") {
    return rdmanet::plugin::state_main({argv + 2, argv + argc}, std::cout, std::cerr);
  }
  rdmanet::cni::Plugin plugin;
  plugin.name = "rdmanet";
  plugin.known_args = {"MAC", "IP"};
  plugin.add = rdmanet::plugin::cmd_add;
  plugin.del = rdmanet::plugin::cmd_del;
  plugin.check = rdmanet::plugin::cmd_check;
  plugin.status = rdmanet::plugin::cmd_status;
  plugin.gc = rdmanet::plugin::cmd_gc;
  return rdmanet::cni::plugin_main(plugin, rdmanet::cni::process_getenv(), std::cin, std::cout);
}
