// Device lookups in sysfs (PCI and auxiliary devices to netdevs, VFs to PFs). Every path goes
// through one root so tests can point it at a fake tree. Names are sysfs's own, so these see
// the host's view regardless of the calling thread's network namespace.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace rdmanet::netns {

// "0000:3b:00.2": hex domain (4 to 8 digits), bus, device (00-1f) and function (0-7).
bool is_pci_address(std::string_view text);

// A sysfs attribute's content without the trailing newline and padding (spaces, NULs);
// empty when it is missing, unreadable or larger than max_size.
std::string read_attribute(const std::string& path, size_t max_size = 4096);

struct VfInfo {
  std::string pf_pci;  // the PF's PCI address
  int index = 0;       // N in the PF's virtfnN
};

class Sysfs {
 public:
  explicit Sysfs(std::string root = "/sys") : root_(std::move(root)) {}

  // The netdev names under <pci>/net, sorted; empty when the device has none (e.g. bound to
  // vfio-pci). kInvalidConfig for a malformed address, kDeviceNotFound for an absent one.
  Expected<std::vector<std::string>> pci_netdevs(const std::string& pci) const;
  // The single netdev of a PCI function; errors say why there is none (driver or no driver)
  // or that there are several.
  Expected<std::string> pci_netdev(const std::string& pci) const;
  // Whether the PCI function exists (a VF is gone once its PF's sriov_numvfs drops below it).
  // A lookup that fails otherwise than "no such file" is an error, not "absent".
  Expected<bool> pci_device_exists(const std::string& pci) const;
  // The bound driver's name; std::nullopt when no driver is bound.
  Expected<std::optional<std::string>> pci_driver(const std::string& pci) const;
  // Unbinds a PCI function from its driver and binds it to that driver again, which probes
  // it anew (mlx5 takes a VF's new GUIDs only then). Its netdev and RDMA device are
  // recreated, possibly under other names. kDeviceNotFound when no driver is bound.
  Status rebind_pci_driver(const std::string& pci) const;
  // PF and VF index when pci is a VF; std::nullopt for a PF or a plain function.
  Expected<std::optional<VfInfo>> pci_vf(const std::string& pci) const;
  // The single netdev of an RDMA device's parent device (<root>/class/infiniband/<dev>/device/
  // net/), the PCI function (or auxiliary device) it belongs to; kDeviceNotFound when there
  // is no such RDMA device, none (soft-RoCE has no parent device) or several.
  Expected<std::string> rdma_netdev(const std::string& rdma_device) const;
  // The driver of an RDMA device: its parent device's driver ("mlx5_ib" on an mlx5
  // auxiliary device, "mlx5_core", "irdma", "bnxt_en" on a PCI function), "rxe" for
  // soft-RoCE (no parent device, a "parent" attribute), std::nullopt for another software
  // device. kDeviceNotFound when there is no such RDMA device.
  Expected<std::optional<std::string>> rdma_driver(const std::string& rdma_device) const;
  // The netdev names of an auxiliary device such as "mlx5_core.sf.2", sorted.
  Expected<std::vector<std::string>> aux_netdevs(const std::string& id) const;
  // The RDMA device names of a PCI function or auxiliary device, from its infiniband/
  // directory, or from a child device's (mlx5 registers its RDMA device on an auxiliary
  // child such as mlx5_core.rdma.0). Names can change: resolve again before each use.
  Expected<std::vector<std::string>> pci_rdma_devices(const std::string& pci) const;
  Expected<std::vector<std::string>> aux_rdma_devices(const std::string& id) const;

 private:
  Expected<std::string> pci_dir(const std::string& pci) const;
  // <root>/class/infiniband/<rdma_device>, which must exist.
  Expected<std::string> rdma_device_dir(const std::string& rdma_device) const;

  std::string root_;
};

}  // namespace rdmanet::netns
