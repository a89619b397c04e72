// Finding the host device a config selects, and the key that locks it.
#pragma once

#include <string>

#include "netns/link.h"
#include "netns/rtnl.h"
#include "netns/sysfs.h"
#include "plugin/conf.h"

namespace rdmanet::plugin {

// A file-name-safe key for the device lock and hold: "pci-0000:3b:00.2",
// "aux-<hex>", "name-<hex>" or "mac-<hex>".
std::string device_key(const DeviceSelector& selector);

struct HostDevice {
  netns::LinkInfo link;
  std::string pci;                  // empty unless selected by PCI address
  std::optional<netns::VfInfo> vf;  // set when the PCI device is an SR-IOV VF
  std::string pf_name;              // the VF's PF netdev in the host
};

// Resolves the selector in the host netns (rtnl must talk to it). Errors say
// which selector found nothing and why (no netdev because bound to vfio-pci,
// several netdevs, not present).
Expected<HostDevice> resolve_device(const DeviceSelector& selector, const netns::Sysfs& sysfs,
                                    netns::Rtnl& rtnl);

}  // namespace rdmanet::plugin
