#include "plugin/device.h"

#include "base/hex.h"

namespace rdmanet::plugin {

std::string device_key(const DeviceSelector& selector) {
  switch (selector.kind) {
    case DeviceSelector::Kind::kPci:
      return "pci-" + selector.value;  // validated: hex digits, ':' and '.'
    case DeviceSelector::Kind::kAuxiliary:
      return "aux-" + hex(selector.value);
    case DeviceSelector::Kind::kName:
      return "name-" + hex(selector.value);
    case DeviceSelector::Kind::kHwaddr: {
      auto hw = netns::HwAddress::parse(selector.value);
      return "mac-" + hex(hw ? hw->str() : selector.value);
    }
  }
  return "unknown";
}

Expected<HostDevice> resolve_device(const DeviceSelector& selector, const netns::Sysfs& sysfs,
                                    netns::Rtnl& rtnl) {
  HostDevice dev;
  std::string name;
  switch (selector.kind) {
    case DeviceSelector::Kind::kPci: {
      auto netdev = sysfs.pci_netdev(selector.value);
      if (!netdev) {
        Error e = std::move(netdev).error();
        return e.context(selector.str());
      }
      name = *netdev;
      dev.pci = selector.value;
      auto vf = sysfs.pci_vf(selector.value);
      if (!vf) {
        Error e = std::move(vf).error();
        return e.context(selector.str());
      }
      if (vf->has_value()) {
        auto pf = sysfs.pci_netdev((*vf)->pf_pci);
        if (!pf) {
          Error e = std::move(pf).error();
          return e.context(selector.str() + ": PF " + (*vf)->pf_pci);
        }
        dev.vf = **vf;
        dev.pf_name = *pf;
      }
      break;
    }
    case DeviceSelector::Kind::kAuxiliary: {
      auto netdevs = sysfs.aux_netdevs(selector.value);
      if (!netdevs) {
        Error e = std::move(netdevs).error();
        return e.context(selector.str());
      }
      if (netdevs->size() != 1) {
        return Error(ErrorKind::kDeviceNotFound, selector.str() + ": auxiliary device has " +
                                                     std::to_string(netdevs->size()) +
                                                     " netdevs in the host, need exactly 1");
      }
      name = netdevs->front();
      break;
    }
    case DeviceSelector::Kind::kName:
      name = selector.value;
      break;
    case DeviceSelector::Kind::kHwaddr: {
      auto hw = netns::HwAddress::parse(selector.value);
      if (!hw) {
        return std::move(hw).error();
      }
      auto link = netns::find_link_by_hwaddr(rtnl, *hw);
      if (!link) {
        Error e = std::move(link).error();
        return e.context(selector.str());
      }
      dev.link = std::move(*link);
      return dev;
    }
  }
  auto link = netns::find_link_by_name(rtnl, name);
  if (!link) {
    Error e = std::move(link).error();
    return e.context(selector.str());
  }
  dev.link = std::move(*link);
  return dev;
}

}  // namespace rdmanet::plugin
