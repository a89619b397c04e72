// The device-info file (k8snetworkplumbingwg device-info-spec 1.1.0): Multus
// passes its path as runtimeConfig.CNIDeviceInfoFile, copies the device
// plugin's file there before ADD when the network has a resourceName, reads it
// back after the chain and publishes it as "device-info" in the pod's
// network-status; on DEL it removes the file itself.
//
// Only the spec's keys go into the document. Multus decodes the file into the
// fixed Go type of network-attachment-definition-client (v1.DeviceInfo), so
// any other key, under "pci" or at the top level, is silently dropped before
// it reaches network-status, and the spec defines no extension point. RoCE
// facts (GID index, GIDs) therefore have no place here and are reported with
// the attachment (log, state); the netdev name is already the CNI result's
// interface name.
#pragma once

#include <string>

#include "base/error.h"

namespace rdmanet::cni {

// The spec's "pci" keys that rdmanet knows. Empty optional fields leave
// whatever the file already holds (e.g. from the device plugin).
struct DeviceInfo {
  std::string pci_address;         // "pci-address" (required): the attached function, dddd:BB:DD.f
  std::string pf_pci_address;      // "pf-pci-address": the PF of a VF
  std::string rdma_device;         // "rdma-device": the RDMA device, e.g. "mlx5_3"
  std::string representor_device;  // "representor-device": the VF's representor netdev
};

// For ADD: writes `info` as a type "pci" document to `path`, merged into the
// file already there: keys rdmanet does not set are kept, ours are set, the
// version becomes "1.1.0" unless the file declares a newer 1.x. A file that
// is there but is not a device-info object of type "pci" is never replaced
// (kIo naming it): the path comes from the runtime. Missing directories are
// created 0700; the file (0444) is replaced atomically. A relative path is
// kInvalidConfig, a missing pci_address kInternal, anything else kIo. (The
// plugin logs a failure and goes on: Multus reads the file best effort.)
Status write_device_info(const std::string& path, const DeviceInfo& info);

// For DEL: removes the file if it still is a device-info document naming
// `pci_address` (any, when empty); a file that is not there is success. A relative
// path is kInvalidConfig; a file that is not the one written is kIo, and stays.
Status remove_device_info(const std::string& path, const std::string& pci_address = {});

}  // namespace rdmanet::cni
