// Where RDMA NICs and GPUs sit on the node's PCIe tree, from sysfs: so operators can keep
// GPU k with NIC k (NCCL loses a third to a half of its bandwidth when a rail's NIC and its
// GPU meet only across the CPU's host bridge or the socket interconnect).
#pragma once

#include <string>
#include <vector>

#include "base/error.h"

namespace rdmanet::netns {

// A PCI function and the PCIe path to it: the bridges from the root complex down, as in
// /sys/devices/pci0000:17/0000:17:01.0/0000:18:00.0/0000:19:08.0/0000:1a:00.0.
struct PciPlace {
  std::string address;               // 0000:1a:00.0
  std::string root_complex;          // pci0000:17
  std::vector<std::string> bridges;  // 0000:17:01.0 (root port), 0000:18:00.0, ... (upstream first)
  int numa_node = -1;                // -1: the platform does not say
};

// How close two functions are, with nvidia-smi topo's names: through one PCIe switch
// (PIX), through several bridges below one root port (PXB), through the root complex (PHB),
// within one NUMA node (NODE), across sockets (SYS).
enum class PciRelation { kPix, kPxb, kPhb, kNode, kSys };
const char* relation_name(PciRelation relation);
PciRelation relation_between(const PciPlace& a, const PciPlace& b);

struct RdmaNic {
  PciPlace place;
  std::string rdma_device;  // mlx5_0
  std::string netdev;       // its netdev in this netns, if any
  std::string link_layer;   // Ethernet, InfiniBand (port 1)
};

struct Gpu {
  PciPlace place;
  std::string vendor;  // 0x10de
};

struct PciTopology {
  std::vector<RdmaNic> nics;  // sorted by PCI address
  std::vector<Gpu> gpus;      // sorted by PCI address
};

// Scans <sysfs_root>/class/infiniband for RDMA devices with a PCI function (software ones,
// soft-RoCE, have none) and <sysfs_root>/bus/pci/devices for GPUs (display controllers of
// NVIDIA, AMD and Intel).
Expected<PciTopology> scan_pci_topology(const std::string& sysfs_root = "/sys");

}  // namespace rdmanet::netns
