// `rdmanet topology`: each RDMA NIC of the node with its place on the PCIe tree and the
// GPUs nearest to it, so operators can write per-rail device-plugin resources that keep GPU
// k with NIC k.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "netns/pci_topology.h"

namespace rdmanet::plugin {

// The table: one line per NIC (PCI address, netdev, RDMA device, link layer, NUMA node,
// root port, PCIe switch) with the GPUs nearest to it and how they are connected.
void print_topology_table(const netns::PciTopology& topology, std::ostream& out);
// The same as JSON: {"nics": [{..., "gpus": [{"pciAddress", "relation"}]}], "gpus": [...]}.
void print_topology_json(const netns::PciTopology& topology, std::ostream& out);

// args: what follows "topology": [--json] [--sysfs-root DIR]. Returns the exit code.
int topology_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace rdmanet::plugin
