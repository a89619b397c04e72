// Bringing a moved netdev home (bring_netdev_home's parts): what DEL knows of the device,
// finding it by its identity, sending it home from the pod netns and giving its host
// settings back (netdev_move.cc); and, when it is neither in the pod netns nor in the host,
// deciding where it is or that it is gone, which only the kernel can prove
// (netdev_search.cc).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "netns/link.h"
#include "netns/netns.h"
#include "netns/rtnl.h"
#include "plugin/steps/netdev_move.h"

namespace rdmanet::plugin {

class Attachment;

// The recorded device, as DEL looks for it.
struct HostSettings : NetdevMoveRecord {
  bool peer_in_host = true;  // see netns::Vantage
  std::string pod_name;      // CNI_IFNAME
  std::string pod_mac;       // the MAC ADD gave it in the pod, if any

  // For a weak identity: the names and MACs the device can have had.
  std::vector<std::string> names() const {
    return {host_name, pod_name, "rdmanet" + std::to_string(index), "dev" + std::to_string(index)};
  }
  std::vector<std::string> macs() const { return {mac, pod_mac}; }
  // The name it comes home under when its own is taken in the host.
  std::string fallback_name() const { return "rdmanet" + std::to_string(index); }
};

// Our device among the links of the socket's netns `here`: the one link with its identity.
Expected<std::optional<netns::LinkInfo>> find_device(netns::Rtnl& rtnl, const netns::Netns& here,
                                                     const netns::Netns& host,
                                                     const HostSettings& h);

using FindDevice = std::function<Expected<std::optional<netns::LinkInfo>>(netns::Rtnl& rtnl)>;
// Sends the device (found in the pod by `find` through the pod's socket) to the host, under
// its host name, else under fallback_name().
Status send_home(netns::Rtnl& rtnl, const netns::Netns& host, const HostSettings& h,
                 const FindDevice& find);

// In the host: name, MTU, MAC, alias, altnames and admin state as they were before ADD, one
// request each, and only those that differ.
Status restore_host_settings(netns::Rtnl& rtnl, netns::LinkInfo link, const HostSettings& h);

// The device is neither in the pod netns nor in the host. That it no longer exists is
// accepted only where the kernel says so; otherwise kTryAgainLater keeps the record for the
// next DEL.
Status device_missing(const Attachment& a, netns::Rtnl& host_rtnl, const HostSettings& h);

// A veth whose peer is in a third netns: the peer, out of the pod's reach, tells the host
// where the device is and under which index, whatever the pod renamed or readdressed.
Status bring_far_veth_home(const Attachment& a, const HostSettings& h);

}  // namespace rdmanet::plugin
