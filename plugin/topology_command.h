// `rdmanet topology`: each RDMA NIC of the node with its place on the PCIe tree, the PCIe
// root to align GPUs with (its Data Direct function's, when it has one) and the GPUs
// nearest to that place, plus the node's GPUDirect RDMA readiness, so operators can write
// per-rail device-plugin resources that keep GPU k with NIC k.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "netns/gpudirect.h"
#include "netns/pci_topology.h"

namespace rdmanet::plugin {

// The table: one line per NIC (PCI address, netdev, RDMA device, link layer, NUMA node,
// root port, PCIe switch, Data Direct function, the root complex and root port to align
// with) with the GPUs nearest to that root and how they are connected; then the node's
// GPUDirect RDMA readiness.
void print_topology_table(const netns::PciTopology& topology,
                          const netns::GpuDirectReadiness& gpudirect, std::ostream& out);
// The same as JSON: {"nics": [{..., "dataDirect", "alignment", "gpus": [{"pciAddress",
// "relation"}]}], "gpus": [...], "gpudirectRdma": {"mode", "reason"}}.
void print_topology_json(const netns::PciTopology& topology,
                         const netns::GpuDirectReadiness& gpudirect, std::ostream& out);

// args: what follows "topology": [--json] [--sysfs-root DIR]. Returns the exit code.
int topology_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace rdmanet::plugin
