#include "plugin/device.h"

#include "base/hex.h"

namespace rdmanet::plugin {

std::string device_key(const DeviceSelector& selector) {
  switch (selector.kind) {
    case DeviceSelector::Kind::kPci:
      return "pci-" + selector.value;  // validated: hex digits, ':' and '.'
    case DeviceSelector::Kind::kAuxiliary:
      return "aux-" + hex(selector.value);
    case DeviceSelector::Kind::kRdma:
      return "rdma-" + hex(selector.value);
    case DeviceSelector::Kind::kName:
      return "name-" + hex(selector.value);
    case DeviceSelector::Kind::kHwaddr: {
      auto hw = netns::HwAddress::parse(selector.value);
      return "mac-" + hex(hw ? hw->str() : selector.value);
    }
  }
  return "unknown";
}

namespace {

// The netdev name a PCI function has, and its PF when it is a VF.
Status resolve_pci(const DeviceSelector& selector, const netns::Sysfs& sysfs, HostDevice* dev,
                   std::string* name) {
  TRY_ASSIGN(*name, sysfs.pci_netdev(selector.value));
  dev->pci = selector.value;
  TRY_ASSIGN(auto vf, sysfs.pci_vf(selector.value));
  if (vf) {
    TRY_ASSIGN(dev->pf_name, sysfs.pci_netdev(vf->pf_pci).with_context("PF " + vf->pf_pci));
    dev->vf = *vf;
  }
  return ok_status();
}

Expected<std::string> aux_netdev(const DeviceSelector& selector, const netns::Sysfs& sysfs) {
  TRY_ASSIGN(auto netdevs, sysfs.aux_netdevs(selector.value));
  if (netdevs.size() != 1) {
    return Error(ErrorKind::kDeviceNotFound, "auxiliary device has " +
                                                 std::to_string(netdevs.size()) +
                                                 " netdevs in the host, need exactly 1");
  }
  return netdevs.front();
}

Expected<HostDevice> resolve(const DeviceSelector& selector, const netns::Sysfs& sysfs,
                             netns::Rtnl& rtnl) {
  HostDevice dev;
  std::string name = selector.value;
  switch (selector.kind) {
    case DeviceSelector::Kind::kPci:
      TRY(resolve_pci(selector, sysfs, &dev, &name));
      break;
    case DeviceSelector::Kind::kAuxiliary: {
      TRY_ASSIGN(name, aux_netdev(selector, sysfs));
      break;
    }
    case DeviceSelector::Kind::kRdma: {
      TRY_ASSIGN(name, sysfs.rdma_netdev(selector.value));
      break;
    }
    case DeviceSelector::Kind::kName:
      break;
    case DeviceSelector::Kind::kHwaddr: {
      TRY_ASSIGN(auto hw, netns::HwAddress::parse(selector.value));
      TRY_ASSIGN(dev.link, netns::find_link_by_hwaddr(rtnl, hw));
      return dev;
    }
  }
  TRY_ASSIGN(dev.link, netns::find_link_by_name(rtnl, name));
  return dev;
}

}  // namespace

Expected<HostDevice> resolve_device(const DeviceSelector& selector, const netns::Sysfs& sysfs,
                                    netns::Rtnl& rtnl) {
  return resolve(selector, sysfs, rtnl).with_context(selector.str());
}

}  // namespace rdmanet::plugin
