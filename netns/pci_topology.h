// Where RDMA NICs and GPUs sit on the node's PCIe tree, from sysfs: so operators can keep
// GPU k with NIC k (NCCL loses a third to a half of its bandwidth when a rail's NIC and its
// GPU meet only across the CPU's host bridge or the socket interconnect).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "netns/gpudirect.h"

namespace rdmanet::netns {

// A PCI function and the PCIe path to it: the bridges from the root complex down, as in
// /sys/devices/pci0000:17/0000:17:01.0/0000:18:00.0/0000:19:08.0/0000:1a:00.0.
struct PciPlace {
  std::string address;               // 0000:1a:00.0
  std::string root_complex;          // pci0000:17
  std::vector<std::string> bridges;  // 0000:17:01.0 (root port), 0000:18:00.0, ... (upstream first)
  int numa_node = -1;                // -1: the platform does not say

  // The PCIe root to align with: the root port, or the root complex for a function that
  // sits on the root bus itself (an integrated endpoint, a VM's flat bus).
  std::string root() const { return bridges.empty() ? root_complex : bridges.front(); }
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
  // Its Data Direct function (netns/data_direct.h), if it has one: then RDMA to GPU memory
  // takes that function's PCIe path, and GPUs align with it rather than with `place`.
  std::optional<PciPlace> data_direct;

  const PciPlace& alignment() const { return data_direct ? *data_direct : place; }
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

// The place of one PCI function, from <sysfs_root>/bus/pci/devices/<pci> (a path resolve:
// a few readlinks, no directory scan).
Expected<PciPlace> pci_place(const std::string& sysfs_root, const std::string& pci);

// The NUMA node sysfs gives the PCI function `pci` (<sysfs_root>/bus/pci/devices/<pci>/
// numa_node), -1 where the platform does not say; std::nullopt for an address that is not
// one, or when sysfs has no number there.
std::optional<int> pci_numa_node(const std::string& sysfs_root, const std::string& pci);

// What a rail's pod needs to keep its GPU next to its NIC: the PCIe root to align with (the
// Data Direct function's when there is one), that function, and the node's GPUDirect RDMA
// readiness. Cheap enough for every ADD: direct lookups only (see find_data_direct).
struct RailGpuFacts {
  std::string pcie_root;        // root port (or root complex) of the alignment place
  std::string data_direct_pci;  // empty when the NIC has no Data Direct function
  GpuDirectReadiness gpudirect;
};
RailGpuFacts rail_gpu_facts(const std::string& sysfs_root, const std::string& pci,
                            const std::string& kernel_release);

}  // namespace rdmanet::netns
