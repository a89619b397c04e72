// NVIDIA Data Direct: a ConnectX-8 may expose a DMA engine as a separate PCI function
// (15b3:2100) that sits under a different PCIe tree than its NIC function. With it, RDMA
// to GPU memory travels the Data Direct function's PCIe path, so that function's root is
// the one a GPU must share.
//
// What the kernel exposes (drivers/infiniband/hw/mlx5/data_direct.c, Linux 6.12+): the
// function is bound to the PCI driver "mlx5_ib" (the module's own name; NIC functions are
// bound to mlx5_core), which reads its VUID from the function's Vital Product Data (VPD
// keyword "VU"); the mlx5 RDMA device asks the firmware for the VUID of its Data Direct
// device (QUERY_VUID) and pairs with the function whose VPD matches. That pairing is
// published only through the uverbs ioctl behind rdma-core's
// mlx5dv_get_data_direct_sysfs_path() (and the firmware, through fwctl): no sysfs file
// names it. So rdmanet pairs them by a sysfs-only heuristic, see find_data_direct.
#pragma once

#include <string>
#include <string_view>

namespace rdmanet::netns {

// The PCI driver a Data Direct function is bound to, and its PCI ids.
inline constexpr const char* kDataDirectDriver = "mlx5_ib";
inline constexpr const char* kDataDirectVendor = "0x15b3";
inline constexpr const char* kDataDirectDevice = "0x2100";

// The value of a read-only keyword ("SN", "VU", ...) in PCI Vital Product Data as
// <function>/vpd gives it (PCI Local Bus 3.0 §6.28: an identifier string, a VPD-R and a
// VPD-W resource, an end tag); empty when the data holds no such keyword or is malformed.
std::string vpd_keyword(std::string_view vpd, std::string_view keyword);

// The PCI address of the Data Direct function that serves the NIC function `pci` (a PF,
// or a VF through its PF), empty when there is none. The heuristic: among the functions
// bound to mlx5_ib with ids 15b3:2100, the one whose VPD serial number (keyword "SN", the
// board's) is the NIC function's; one card, one Data Direct function. None when no serial
// can be read (VPD is readable by root only) or when more than one function matches.
// Cost: one directory listing of the driver's few bound functions, then two VPD reads per
// bound function at most; nothing when no Data Direct function is bound.
std::string find_data_direct(const std::string& sysfs_root, const std::string& pci);

}  // namespace rdmanet::netns
