// Where a moved netdev is when it is neither in the pod netns nor in the host (bring_netdev_home's
// last resort), and when DEL may call it gone: only where the kernel says so.
#include <spdlog/spdlog.h>

#include "netns/sysfs.h"
#include "plugin/attachment.h"
#include "plugin/steps/dying_netns.h"
#include "plugin/steps/netdev_home.h"

namespace rdmanet::plugin {

using netns::in_netns;
using netns::LinkInfo;
using netns::Rtnl;

namespace {

// Whether the pod netns has a veth at `index` paired with a link outside it.
Expected<bool> paired_veth_in_pod(const Attachment& a, int index) {
  return in_netns(*a.pod(), [&]() -> Expected<bool> {
    TRY_ASSIGN(auto rtnl, Rtnl::open());
    auto link = netns::find_link_by_index(rtnl, index);
    if (!link) {
      return link.error().kind() == ErrorKind::kDeviceNotFound
                 ? Expected<bool>(false)
                 : Expected<bool>(std::move(link).error());
    }
    return link->kind == "veth" && link->link_netnsid.has_value();
  });
}

// A veth whose peer is not where it was: deleted (a veth pair dies as one), or moved by
// whoever holds its netns (the other end of a wire given to another pod). Gone, unless the
// pod netns still has a veth at the device's index paired with a link outside it: then
// nothing proves it gone, and the record stays until the netns is.
Status veth_unlocated(const Attachment& a, Rtnl& host_rtnl, const HostSettings& h,
                      const std::string& what) {
  const int index = h.identity.index;
  if (a.pod()) {
    TRY_ASSIGN(bool there, paired_veth_in_pod(a, index));
    if (there) {
      return Error(ErrorKind::kTryAgainLater,
                   what + ": its peer is not where it was, and the pod netns " + a.rec().netns +
                       " has a veth at index " + std::to_string(index) +
                       " paired outside it, which may be the device. The record stays; DEL "
                       "completes once the device is home or the netns is gone");
    }
  } else {
    TRY(wait_until_released(a, host_rtnl, index, "veth", [&] { return what; }));
  }
  spdlog::info("{} is gone with its peer", what);
  return ok_status();
}

// A device with nothing out of the pod's reach (a record of rdmanet 0.1, a virtual link
// without a peer in the host): gone only once its netns is.
Status weak_device_missing(const Attachment& a, Rtnl& host_rtnl, const HostSettings& h) {
  const std::string what = "device " + h.host_name + " (index " + std::to_string(h.index) + ")";
  if (a.pod()) {
    return Error(ErrorKind::kTryAgainLater,
                 what + " is not in the host, and no link of the pod netns " + a.rec().netns +
                     " is provably it: a renamed or readdressed device has nothing else to be "
                     "known by. The record stays; DEL completes once the netns is gone");
  }
  TRY_ASSIGN(bool alive, still_in_unpinned_netns(host_rtnl, a.rec().netns_id, h.identity.index,
                                                 h.identity.kind));
  if (alive) {
    return alive_without_pin(a, what);
  }
  spdlog::info("{} went with the pod netns", what);
  return ok_status();
}

// A veth whose host end (its peer) is still paired with a link in another netns: the device
// lives there. A host end gone or no longer paired: see veth_unlocated. A dying pod netns
// unpairs it in a while (wait_while_dying); with the pod netns alive, one look. True when
// veth_unlocated answered (`*answer`).
Expected<bool> peer_unpaired(const Attachment& a, Rtnl& host_rtnl, const HostSettings& h,
                             Status* answer) {
  const netns::LinkIdentity& id = h.identity;
  auto unpaired = [&]() -> Expected<bool> {
    auto peer = netns::find_link_by_index(host_rtnl, id.host_peer);
    if (!peer && peer.error().kind() != ErrorKind::kDeviceNotFound) {
      return std::move(peer).error();
    }
    if (peer && peer->kind == "veth" && peer->link_netnsid && h.peer_in_host) {
      return false;
    }
    *answer =
        veth_unlocated(a, host_rtnl, h,
                       "device " + h.host_name + " (a veth whose peer in the host was index " +
                           std::to_string(id.host_peer) + ")");
    return true;
  };
  return a.pod() ? unpaired() : wait_while_dying(unpaired);
}

}  // namespace

Status device_missing(const Attachment& a, Rtnl& host_rtnl, const HostSettings& h) {
  const netns::LinkIdentity& id = h.identity;
  if (!id.strong()) {
    return weak_device_missing(a, host_rtnl, h);
  }
  std::string what =
      "device " + h.host_name +
      (id.parent_dev.empty() ? "" : " (" + id.parent_bus + " " + id.parent_dev + ")");
  if (id.host_peer != 0) {
    Status answer = ok_status();
    TRY_ASSIGN(bool unpaired, peer_unpaired(a, host_rtnl, h, &answer));
    if (unpaired) {
      return answer;
    }
    what += " (its veth peer " + std::to_string(id.host_peer) + " in the host is still paired)";
  } else if (!id.kind.empty() && !a.pod()) {
    // A virtual device (not a veth) is deleted with the netns it was in, once that is gone.
    TRY_ASSIGN(bool alive, still_in_unpinned_netns(host_rtnl, a.rec().netns_id, id.index, id.kind));
    if (alive) {
      return alive_without_pin(a, what);
    }
    spdlog::info("device {} ({}) went with the pod netns", h.host_name, id.kind);
    return ok_status();
  }
  if (id.parent_bus == "pci" && netns::is_pci_address(id.parent_dev)) {
    // Its PCI function is gone (VFs removed through the PF's sriov_numvfs, a PF unplugged):
    // so is the netdev, wherever it was. The host's sysfs lists PCI devices of every netns.
    TRY_ASSIGN(bool exists, netns::Sysfs().pci_device_exists(id.parent_dev));
    if (!exists) {
      spdlog::info("device {} is gone with its PCI function {}", h.host_name, id.parent_dev);
      return ok_status();
    }
  }
  if (a.pod()) {
    return Error(ErrorKind::kTryAgainLater,
                 what + " is neither in the pod netns " + a.rec().netns +
                     " nor in the host: the pod moved it into a netns of its own. The record "
                     "stays; DEL brings it home once that netns is gone");
  }
  if (id.kind.empty()) {
    return Error(ErrorKind::kTryAgainLater,
                 what + " has not come back to the host from the pod netns " + a.rec().netns +
                     " yet (the kernel returns physical devices when the netns is freed; a "
                     "process may still hold it); the record stays for the next DEL");
  }
  return alive_without_pin(a, what);
}

namespace {

// A veth whose peer is in a third netns, at `index` in the socket's netns: still a veth
// paired with that peer, or not ours.
Expected<std::optional<LinkInfo>> far_veth_at(Rtnl& rtnl, const netns::LinkIdentity& id,
                                              int index) {
  auto link = netns::find_link_by_index(rtnl, index);
  if (!link) {
    if (link.error().kind() == ErrorKind::kDeviceNotFound) {
      return std::optional<LinkInfo>();
    }
    return std::move(link).error();
  }
  if (link->kind != "veth" || link->parent_index != id.far_peer || !link->link_netnsid) {
    return std::optional<LinkInfo>();
  }
  return std::optional<LinkInfo>(std::move(*link));
}

Expected<int> pod_netns_id(Rtnl& rtnl, const Attachment& a) {
  if (!a.pod()) {
    return -1;
  }
  return netns::netns_id(rtnl, *a.pod());
}

}  // namespace

Status bring_far_veth_home(const Attachment& a, const HostSettings& h) {
  const netns::LinkIdentity& id = h.identity;
  const std::string what = "device " + h.host_name + " (a veth whose peer is index " +
                           std::to_string(id.far_peer) + " in netns id " +
                           std::to_string(id.far_netnsid) + ")";
  TRY_ASSIGN(auto rtnl, Rtnl::open());
  bool sent = false;
  bool in_pod = false;
  netns::FarPeerView view;
  Status answer = ok_status();
  // Where the far peer says the device is, and what that settles. A device the pod netns
  // still has is sent home once, and looked for again at once.
  auto look = [&]() -> Expected<bool> {
    for (;;) {
      TRY_ASSIGN(view, netns::locate_by_far_peer(rtnl, id));
      if (!view.paired) {
        answer = veth_unlocated(a, rtnl, h, what);
        return true;
      }
      if (view.device_netnsid < 0) {
        return false;  // its netns is dying: the kernel drops a netns's ids before its links
      }
      // The answer gave the device's netns an id in the host, the host's own included.
      TRY_ASSIGN(int host_id, netns::netns_id(rtnl, a.host()));
      if (view.device_netnsid == host_id) {
        TRY_ASSIGN(auto link, far_veth_at(rtnl, id, view.device_index));
        answer = link ? restore_host_settings(rtnl, std::move(*link), h)
                      : Status(Error(ErrorKind::kState, what + ": its peer names index " +
                                                            std::to_string(view.device_index) +
                                                            " in the host, which is not it"));
        return true;
      }
      TRY_ASSIGN(int pod_id, pod_netns_id(rtnl, a));
      in_pod = view.device_netnsid == pod_id;
      if (!in_pod || sent) {
        break;
      }
      TRY(in_netns(*a.pod(), [&]() -> Status {
        TRY_ASSIGN(auto pod_rtnl, Rtnl::open());
        return send_home(pod_rtnl, a.host(), h,
                         [&](Rtnl& r) { return far_veth_at(r, id, view.device_index); });
      }));
      sent = true;
    }
    if (!a.pod()) {
      return false;  // in a netns of its own, which may be dying with the pod's
    }
    answer = Error(ErrorKind::kTryAgainLater,
                   what + " is " +
                       (in_pod ? "still in the pod netns " + a.rec().netns + " after its move home"
                               : "neither in the pod netns " + a.rec().netns +
                                     " nor in the host: the pod moved it into a "
                                     "netns of its own") +
                       ". The record stays for the next DEL");
    return true;
  };
  TRY_ASSIGN(bool settled, wait_while_dying(look));
  if (settled) {
    return answer;
  }
  if (view.device_netnsid < 0) {
    return Error(ErrorKind::kTryAgainLater,
                 what + " is in a netns without an id (dying?); the record stays");
  }
  return alive_without_pin(a, what);
}

}  // namespace rdmanet::plugin
