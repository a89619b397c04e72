// rdmanet: attaches an RDMA netdev, SR-IOV VF or a macvlan child of an RDMA
// NIC to a pod's network namespace.
#include <iostream>

#include "cni/plugin/commands.h"
#include "cni/skel.h"

int main() {
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
