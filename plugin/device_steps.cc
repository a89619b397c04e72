// The device's own steps: claiming it, holding it, and handing it to the pod (the netdev
// itself, or a macvlan child of it).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <functional>
#include <thread>

#include "base/json_fields.h"
#include "netns/link.h"
#include "netns/link_identity.h"
#include "netns/netns.h"
#include "netns/sysfs.h"
#include "plugin/steps.h"

namespace rdmanet::plugin {

using netns::in_netns;
using netns::LinkInfo;
using netns::Netns;
using netns::Rtnl;
using nlohmann::json;

Status undo_earlier_add(Attachment& a) {
  TRY_ASSIGN(auto earlier, a.store().load(a.rec().id()));
  if (!earlier) {
    return ok_status();
  }
  spdlog::warn("attachment exists (phase {}); undoing it before the new ADD",
               name_of(kPhaseNames, earlier->phase));
  TRY_ASSIGN(auto old, Attachment::for_undo(a.store().root(), std::move(*earlier), a.env(),
                                            a.ipam_timeout_seconds()));
  return old.undo();
}

namespace {

// The holder's device as a user knows it: its host name, and its PCI address when the
// record of its move has one (a VF or PF selected by name or MAC).
std::string held_device_label(const AttachmentRecord& holder) {
  std::string label = holder.device_name;
  const StepRecord* move = holder.step(StepKind::kNetdevMove);
  if (move == nullptr || !move->data.is_object()) {
    return label;
  }
  auto it = move->data.find("identity");
  if (it == move->data.end() || !it->is_object()) {
    return label;
  }
  auto field = [&](const char* key) {
    auto f = it->find(key);
    return f != it->end() && f->is_string() ? f->get<std::string>() : std::string();
  };
  std::string pci = field("parentDev");
  bool looks_like_pci = !pci.empty() && pci.size() <= 16 &&
                        pci.find_first_not_of("0123456789abcdef:.") == std::string::npos;
  if (field("parentBus") == "pci" && looks_like_pci) {
    label += " at PCI " + pci;
  }
  return label;
}

}  // namespace

Status claim_device(Attachment& a) {
  if (a.rec().mode != Mode::kNetdev) {
    return ok_status();  // a macvlan parent is shared by design
  }
  const std::string& key = a.rec().device_key;
  TRY_ASSIGN(auto holder, a.store().holder(key));
  if (!holder || *holder == a.rec().id()) {
    return ok_status();
  }
  TRY_ASSIGN(auto other, a.store().load(*holder));
  if (!other) {
    // The holder finished its DEL but died before dropping the hold.
    return a.store().clear_holder(key, *holder);
  }
  auto ns = open_pod_netns(*other);
  if (ns && ns->has_value()) {
    return Error(ErrorKind::kDeviceBusy, "device " + held_device_label(*other) + " (" +
                                             a.conf().device.str() + ") is held by " +
                                             other->holder() + ", whose netns is alive");
  }
  spdlog::warn("reclaiming device {} from {}: its netns {} is gone", held_device_label(*other),
               other->holder(), other->netns);
  a.set_reclaimed();
  TRY_ASSIGN(auto dead, Attachment::for_undo(a.store().root(), std::move(*other), a.env(),
                                             a.ipam_timeout_seconds()));
  return dead.undo();
}

Status find_host_device(Attachment& a) {
  TRY_ASSIGN(auto rtnl, Rtnl::open());
  netns::Sysfs sysfs(a.conf().sysfs_root);
  TRY_ASSIGN(auto dev, resolve_device(a.conf().device, sysfs, rtnl));
  a.rec().device_name = dev.link.name;
  a.set_device(std::move(dev));
  return ok_status();
}

Status hold_device(Attachment& a) {
  if (a.rec().mode != Mode::kNetdev) {
    return ok_status();
  }
  TRY(a.record(StepKind::kHoldDevice, {{"key", a.rec().device_key}}));
  return a.store().set_holder(a.rec().device_key, a.rec().id());
}

Status check_recorded_link_name(const std::string& name, const std::string& field) {
  if (auto s = netns::check_link_name(name); !s) {
    return Error(ErrorKind::kState, field + ": " + s.error().msg());
  }
  return ok_status();
}

Status release_hold(Attachment& a, const json& step) {
  std::string key;
  TRY(Fields(step, "hold-device", ErrorKind::kState).required_string("key", &key).status());
  if (key != a.rec().device_key) {
    return Error(ErrorKind::kState, "hold-device.key \"" + key +
                                        "\" is not the record's device (\"" + a.rec().device_key +
                                        "\")");
  }
  return a.store().clear_holder(key, a.rec().id());
}

namespace {

json identity_to_json(const netns::LinkIdentity& id) {
  json doc = {{"index", id.index},          {"kind", id.kind},        {"parentBus", id.parent_bus},
              {"parentDev", id.parent_dev}, {"permMac", id.perm_mac}, {"hostPeer", id.host_peer}};
  if (id.far_peer != 0) {
    doc["farPeer"] = id.far_peer;
    doc["farNetnsId"] = id.far_netnsid;
  }
  return doc;
}

Expected<netns::LinkIdentity> identity_from_json(const json& doc, const std::string& where) {
  netns::LinkIdentity id;
  Fields f(doc, where, ErrorKind::kState);
  f.integer("index", &id.index).string("kind", &id.kind).string("parentBus", &id.parent_bus);
  f.string("parentDev", &id.parent_dev).string("permMac", &id.perm_mac);
  f.integer("hostPeer", &id.host_peer).integer("farPeer", &id.far_peer);
  f.integer("farNetnsId", &id.far_netnsid);
  TRY(f.status());
  if (id.far_peer != 0 && id.far_netnsid < 0) {
    return Error(ErrorKind::kState, where + ": farPeer " + std::to_string(id.far_peer) +
                                        " without the id of its netns (farNetnsId)");
  }
  return id;
}

}  // namespace

Status move_netdev_in(Attachment& a) {
  const LinkInfo& link = a.device().link;
  TRY(a.record(StepKind::kNetdevMove, {{"hostName", link.name},
                                       {"index", link.index},
                                       {"mac", link.hwaddr.str()},
                                       {"mtu", link.mtu},
                                       {"alias", link.alias},
                                       {"altnames", link.altnames},
                                       {"wasUp", link.up()},
                                       {"pci", a.device().pci},
                                       {"identity", identity_to_json(netns::identity_of(link))}}));
  TRY_ASSIGN(auto rtnl, Rtnl::open());
  TRY(netns::set_link_down(rtnl, link));
  // Altnames travel with a link and block the move when the target has a link of that
  // name; they are the host's names anyway.
  for (const auto& altname : link.altnames) {
    TRY(netns::delete_link_altname(rtnl, link, altname));
  }
  // One request moves and renames, so the pod's names never clash with the device's host
  // name or altnames.
  return netns::move_link(rtnl, link, *a.pod(), a.rec().ifname);
}

namespace {

// What bring_netdev_home reads from the netdev-move record.
struct HostSettings {
  std::string name;  // the host name
  int index = 0;     // ifindex at ADD
  std::string mac;
  uint32_t mtu = 0;
  std::string alias;
  std::vector<std::string> altnames;
  bool was_up = false;
  netns::LinkIdentity identity;  // weak for records of rdmanet 0.1
  bool peer_in_host = true;      // see netns::Vantage
  std::string pod_name;          // CNI_IFNAME
  std::string pod_mac;           // the MAC ADD gave it in the pod, if any

  // For a weak identity: the names and MACs the device can have had.
  std::vector<std::string> names() const {
    return {name, pod_name, "rdmanet" + std::to_string(index), "dev" + std::to_string(index)};
  }
  std::vector<std::string> macs() const { return {mac, pod_mac}; }
};

Expected<HostSettings> host_settings(const AttachmentRecord& rec, const json& step) {
  HostSettings h;
  json identity;
  Fields f(step, "netdev-move", ErrorKind::kState);
  f.required_string("hostName", &h.name).integer("index", &h.index).string("mac", &h.mac);
  f.integer_in("mtu", 0, 0xffffffffLL, &h.mtu).string("alias", &h.alias);
  f.string_list("altnames", &h.altnames).boolean("wasUp", &h.was_up);
  f.object("identity", &identity);
  TRY(f.status());
  TRY(check_recorded_link_name(h.name, "netdev-move.hostName"));
  h.identity.index = h.index;
  if (identity.is_object()) {
    TRY_ASSIGN(h.identity, identity_from_json(identity, "netdev-move.identity"));
  }
  h.pod_name = rec.ifname;
  if (rec.result.is_object()) {
    for (const auto& iface : rec.result.value("interfaces", json::array())) {
      if (iface.is_object() && iface.value("name", "") == h.pod_name) {
        h.pod_mac = iface.value("mac", "");
      }
    }
  }
  return h;
}

// The name a device comes home under when its own name is taken in the host.
std::string fallback_name(const HostSettings& h) { return "rdmanet" + std::to_string(h.index); }

// Our device among the links of the socket's netns `here`: the one link with its identity.
Expected<std::optional<LinkInfo>> find_device(Rtnl& rtnl, const Netns& here, const Netns& host,
                                              const HostSettings& h) {
  if (here.same_as(host)) {
    // A device that comes home keeps its index wherever that is free, and of several links
    // with its identity the one with its index is it (below): one lookup answers, where a
    // dump would read every link of the node.
    auto link = netns::find_link_by_index(rtnl, h.identity.index);
    if (!link && link.error().kind() != ErrorKind::kDeviceNotFound) {
      return std::move(link).error();
    }
    netns::Vantage where;
    where.peer_in_host = h.peer_in_host;
    if (link && netns::is_same_link(*link, h.identity, where, h.names(), h.macs())) {
      return std::optional<LinkInfo>(std::move(*link));
    }
  }
  TRY_ASSIGN(auto found,
             netns::find_links(rtnl, here, host, h.identity, h.peer_in_host, h.names(), h.macs()));
  // Several netdevs of one parent device (an IPoIB child the pod made on an InfiniBand VF):
  // ours kept its ifindex, which no link of the pod's can take while ours is beside it.
  if (found.size() > 1) {
    auto same_index = std::find_if(found.begin(), found.end(), [&](const LinkInfo& link) {
      return link.index == h.identity.index;
    });
    if (same_index != found.end()) {
      return std::optional<LinkInfo>(std::move(*same_index));
    }
  }
  if (found.size() > 1) {
    return Error(ErrorKind::kState, "device " + h.name + ": " + std::to_string(found.size()) +
                                        " links in netns " + here.path() +
                                        " match its identity; none is moved");
  }
  if (found.empty()) {
    return std::optional<LinkInfo>();
  }
  return std::optional<LinkInfo>(std::move(found.front()));
}

using FindDevice = std::function<Expected<std::optional<LinkInfo>>(Rtnl& rtnl)>;

// Sends the device (found in the pod by `find` through the pod's socket) to the host.
Status send_home(Rtnl& rtnl, const Netns& host, const HostSettings& h, const FindDevice& find) {
  TRY_ASSIGN(auto link, find(rtnl));
  if (!link) {
    return ok_status();  // not in the pod (any more)
  }
  TRY(netns::set_link_down(rtnl, *link));
  auto moved = netns::move_link(rtnl, *link, host, h.name);
  if (moved) {
    return moved;
  }
  spdlog::warn("return {} as {}: {}", link->name, h.name, moved.error().msg());
  TRY_ASSIGN(auto still, find(rtnl));
  if (!still) {
    return ok_status();  // it moved; only the rename failed
  }
  // Both its names are taken in the host: come home under the fallback.
  return netns::move_link(rtnl, *still, host, fallback_name(h));
}

Status move_home(const HostSettings& h, const Netns& pod, const Netns& host) {
  return in_netns(pod, [&]() -> Status {
    TRY_ASSIGN(auto rtnl, Rtnl::open());
    return send_home(rtnl, host, h,
                     [&](Rtnl& pod_rtnl) { return find_device(pod_rtnl, pod, host, h); });
  });
}

// In the host: name, MTU, MAC, alias, altnames and admin state as they were before ADD, one
// request each, and only those that differ.
Status restore_host_settings(Rtnl& rtnl, LinkInfo link, const HostSettings& h) {
  if (link.up()) {
    TRY(netns::set_link_down(rtnl, link));
  }
  if (link.name != h.name) {
    if (auto s = netns::rename_link(rtnl, link, h.name); s) {
      link.name = h.name;
    } else if (s.error().sys_errno() != EEXIST) {
      return std::move(s).error();  // not "taken": a failure, for the next DEL to retry
    } else if (link.name != fallback_name(h)) {
      spdlog::warn("rename {} back to {}: {}; using {}", link.name, h.name, s.error().msg(),
                   fallback_name(h));
      if (netns::rename_link(rtnl, link, fallback_name(h))) {
        link.name = fallback_name(h);
      }
    }
  }
  if (h.mtu != 0 && link.mtu != h.mtu) {
    TRY(netns::set_link_mtu(rtnl, link, h.mtu));
  }
  if (auto mac = netns::HwAddress::parse(h.mac); mac && link.hwaddr != *mac) {
    TRY(netns::set_link_hwaddr(rtnl, link, *mac));
  }
  if (link.alias != h.alias) {
    TRY(netns::set_link_alias(rtnl, link, h.alias));
  }
  for (const auto& altname : h.altnames) {
    if (std::find(link.altnames.begin(), link.altnames.end(), altname) != link.altnames.end()) {
      continue;
    }
    if (auto s = netns::add_link_altname(rtnl, link, altname); !s) {
      if (s.error().sys_errno() != EEXIST) {
        return std::move(s).error();
      }
      // Someone took the name meanwhile; the device works without it.
      spdlog::warn("restore altname {} on {}: {}", altname, link.name, s.error().msg());
    }
  }
  return h.was_up ? netns::set_link_up(rtnl, link) : ok_status();
}

// A netns nobody can open any more (its pin is gone) may still be dying: the kernel
// deletes its virtual links in a work item after the last reference went. How many times,
// 100 ms apart, DEL looks again before it says the netns is alive.
constexpr int kDyingNetnsTries = 20;

void pause_before_looking_again() { std::this_thread::sleep_for(std::chrono::milliseconds(100)); }

// Whether the netns the host knows as `netns_id` still has a link at `index` of `kind`:
// all DEL can ask about a netns it cannot open (its pin is gone) but that the host gave an
// id at ADD. No id (a record made without one), or an id that names no netns: no.
Expected<bool> still_in_unpinned_netns(Rtnl& host_rtnl, int netns_id, int index,
                                       const std::string& kind, int parent_index = 0) {
  if (netns_id < 0) {
    return false;
  }
  TRY_ASSIGN(auto links, netns::list_links_in(host_rtnl, netns_id));
  if (!links) {
    return false;
  }
  return std::any_of(links->begin(), links->end(), [&](const LinkInfo& link) {
    return link.index == index && link.kind == kind &&
           (parent_index == 0 || link.parent_index == parent_index);
  });
}

Error alive_without_pin(const Attachment& a, const std::string& what) {
  return Error(ErrorKind::kTryAgainLater,
               what + " is still in a netns nobody can open: the pod netns " + a.rec().netns +
                   " outlived its pin (a process holds it) or the pin now holds another netns. "
                   "The record (and the address) stays until the device is home or gone");
}

// A veth whose peer is not where it was: deleted (a veth pair dies as one), or moved by
// whoever holds its netns (the other end of a wire given to another pod). Gone, unless the
// pod netns still has a veth at the device's index paired with a link outside it: then
// nothing proves it gone, and the record stays until the netns is.
Status veth_unlocated(const Attachment& a, Rtnl& host_rtnl, const HostSettings& h,
                      const std::string& what) {
  const int index = h.identity.index;
  if (a.pod()) {
    TRY_ASSIGN(bool there, in_netns(*a.pod(), [&]() -> Expected<bool> {
                 TRY_ASSIGN(auto rtnl, Rtnl::open());
                 auto link = netns::find_link_by_index(rtnl, index);
                 if (!link) {
                   return link.error().kind() == ErrorKind::kDeviceNotFound
                              ? Expected<bool>(false)
                              : Expected<bool>(std::move(link).error());
                 }
                 return link->kind == "veth" && link->link_netnsid.has_value();
               }));
    if (there) {
      return Error(ErrorKind::kTryAgainLater,
                   what + ": its peer is not where it was, and the pod netns " + a.rec().netns +
                       " has a veth at index " + std::to_string(index) +
                       " paired outside it, which may be the device. The record stays; DEL "
                       "completes once the device is home or the netns is gone");
    }
  } else {
    for (int tries = 0;; ++tries) {
      TRY_ASSIGN(bool alive, still_in_unpinned_netns(host_rtnl, a.rec().netns_id, index, "veth"));
      if (!alive) {
        break;
      }
      if (tries == kDyingNetnsTries) {
        return alive_without_pin(a, what);
      }
      pause_before_looking_again();
    }
  }
  spdlog::info("{} is gone with its peer", what);
  return ok_status();
}

// A device with nothing out of the pod's reach (a record of rdmanet 0.1, a virtual link
// without a peer in the host): gone only once its netns is.
Status weak_device_missing(const Attachment& a, Rtnl& host_rtnl, const HostSettings& h) {
  const std::string what = "device " + h.name + " (index " + std::to_string(h.index) + ")";
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

// The device is neither in the pod netns nor in the host. That it no longer exists is
// accepted only where the kernel says so; otherwise the record stays for the next DEL.
Status device_missing(const Attachment& a, Rtnl& host_rtnl, const HostSettings& h) {
  const netns::LinkIdentity& id = h.identity;
  if (!id.strong()) {
    return weak_device_missing(a, host_rtnl, h);
  }
  std::string what =
      "device " + h.name +
      (id.parent_dev.empty() ? "" : " (" + id.parent_bus + " " + id.parent_dev + ")");
  if (id.host_peer != 0) {
    // A host end still paired with a link in another netns: the device lives there. A host
    // end gone or no longer paired: see veth_unlocated.
    for (int tries = 0;; ++tries) {
      auto peer = netns::find_link_by_index(host_rtnl, id.host_peer);
      if (!peer && peer.error().kind() != ErrorKind::kDeviceNotFound) {
        return std::move(peer).error();
      }
      if (!peer || peer->kind != "veth" || !peer->link_netnsid || !h.peer_in_host) {
        return veth_unlocated(a, host_rtnl, h,
                              "device " + h.name + " (a veth whose peer in the host was index " +
                                  std::to_string(id.host_peer) + ")");
      }
      if (a.pod() || tries == kDyingNetnsTries) {
        break;
      }
      pause_before_looking_again();
    }
    what += " (its veth peer " + std::to_string(id.host_peer) + " in the host is still paired)";
  } else if (!id.kind.empty() && !a.pod()) {
    // A virtual device (not a veth) is deleted with the netns it was in, once that is gone.
    TRY_ASSIGN(bool alive, still_in_unpinned_netns(host_rtnl, a.rec().netns_id, id.index, id.kind));
    if (alive) {
      return alive_without_pin(a, what);
    }
    spdlog::info("device {} ({}) went with the pod netns", h.name, id.kind);
    return ok_status();
  }
  if (id.parent_bus == "pci" && netns::is_pci_address(id.parent_dev)) {
    // Its PCI function is gone (VFs removed through the PF's sriov_numvfs, a PF unplugged):
    // so is the netdev, wherever it was. The host's sysfs lists PCI devices of every netns.
    TRY_ASSIGN(bool exists, netns::Sysfs().pci_device_exists(id.parent_dev));
    if (!exists) {
      spdlog::info("device {} is gone with its PCI function {}", h.name, id.parent_dev);
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

// A veth whose peer is in a third netns: the peer, out of the pod's reach, tells the host
// where the device is and under which index, whatever the pod renamed or readdressed.
Status bring_far_veth_home(const Attachment& a, const HostSettings& h) {
  const netns::LinkIdentity& id = h.identity;
  const std::string what = "device " + h.name + " (a veth whose peer is index " +
                           std::to_string(id.far_peer) + " in netns id " +
                           std::to_string(id.far_netnsid) + ")";
  TRY_ASSIGN(auto rtnl, Rtnl::open());
  bool sent = false;
  for (int tries = 0;; ++tries) {
    TRY_ASSIGN(auto view, netns::locate_by_far_peer(rtnl, id));
    if (!view.paired) {
      return veth_unlocated(a, rtnl, h, what);
    }
    if (view.device_netnsid < 0) {
      // The device's netns is dying: the kernel drops its ids before its links.
      if (tries == kDyingNetnsTries) {
        return Error(ErrorKind::kTryAgainLater,
                     what + " is in a netns without an id (dying?); the record stays");
      }
      pause_before_looking_again();
      continue;
    }
    // The answer gave the device's netns an id in the host, the host's own included.
    TRY_ASSIGN(int host_id, netns::netns_id(rtnl, a.host()));
    if (view.device_netnsid == host_id) {
      TRY_ASSIGN(auto link, far_veth_at(rtnl, id, view.device_index));
      if (!link) {
        return Error(ErrorKind::kState, what + ": its peer names index " +
                                            std::to_string(view.device_index) +
                                            " in the host, which is not it");
      }
      return restore_host_settings(rtnl, std::move(*link), h);
    }
    int pod_id = -1;
    if (a.pod()) {
      TRY_ASSIGN(pod_id, netns::netns_id(rtnl, *a.pod()));
    }
    if (a.pod() && view.device_netnsid == pod_id && !sent) {
      TRY(in_netns(*a.pod(), [&]() -> Status {
        TRY_ASSIGN(auto pod_rtnl, Rtnl::open());
        return send_home(pod_rtnl, a.host(), h,
                         [&](Rtnl& r) { return far_veth_at(r, id, view.device_index); });
      }));
      sent = true;
      continue;
    }
    if (a.pod()) {
      return Error(ErrorKind::kTryAgainLater,
                   what + " is " + (view.device_netnsid == pod_id ? "still" : "neither") +
                       " in the pod netns " + a.rec().netns +
                       (view.device_netnsid == pod_id
                            ? " after its move home"
                            : " nor in the host: the pod moved it into a netns of its own") +
                       ". The record stays for the next DEL");
    }
    if (tries == kDyingNetnsTries) {
      return alive_without_pin(a, what);
    }
    pause_before_looking_again();
  }
}

// A physical device of a dead netns comes back to the host asynchronously, tens to hundreds
// of milliseconds after the netns is gone.
Expected<std::optional<LinkInfo>> wait_for_return(Rtnl& rtnl, const Netns& host,
                                                  const HostSettings& h, bool pod_alive) {
  const bool physical = h.identity.kind.empty() && h.identity.strong();
  for (int tries = 0;; ++tries) {
    TRY_ASSIGN(auto link, find_device(rtnl, host, host, h));
    if (link || pod_alive || !physical || tries == kDyingNetnsTries) {
      return link;
    }
    pause_before_looking_again();
  }
}

}  // namespace

Status bring_netdev_home(Attachment& a, const json& step) {
  TRY_ASSIGN(auto h, host_settings(a.rec(), step));
  if (h.identity.far_peer != 0) {
    return bring_far_veth_home(a, h);
  }
  if (h.identity.host_peer != 0) {
    TRY_ASSIGN(auto host_rtnl, Rtnl::open());
    TRY_ASSIGN(h.peer_in_host, netns::peer_still_in_host(host_rtnl, h.identity));
  }
  // A dead pod netns has handed a physical device back to the host by itself.
  if (a.pod()) {
    TRY(move_home(h, *a.pod(), a.host()));
  }
  TRY_ASSIGN(auto rtnl, Rtnl::open());
  TRY_ASSIGN(auto link, wait_for_return(rtnl, a.host(), h, a.pod().has_value()));
  if (!link) {
    return device_missing(a, rtnl, h);
  }
  return restore_host_settings(rtnl, std::move(*link), h);
}

namespace {

// A macvlan child is ours when its parent is the host device: no link a pod makes can have
// a parent in the host netns.
netns::LinkIdentity macvlan_identity(int parent_index) {
  netns::LinkIdentity id;
  id.kind = "macvlan";
  id.host_peer = parent_index;
  return id;
}

}  // namespace

Status create_macvlan(Attachment& a) {
  const PluginConf& conf = a.conf();
  const int parent = a.device().link.index;
  TRY(a.record(StepKind::kMacvlan, {{"name", a.rec().ifname}, {"parentIndex", parent}}));
  TRY_ASSIGN(auto rtnl, Rtnl::open());
  netns::MacvlanSpec spec;
  spec.name = a.rec().ifname;
  spec.parent_index = parent;
  spec.mode = conf.macvlan_mode;
  spec.target = &*a.pod();
  spec.hwaddr = conf.mac;
  spec.mtu = conf.mtu;
  TRY(netns::create_macvlan(rtnl, spec).with_context("macvlan child of " + a.device().link.name));
  // Its ifindex, kept with the record from the next write on: several children of one
  // parent in one pod (two rails on one NIC) then stay apart whatever the pod renames.
  auto index = in_netns(*a.pod(), [&]() -> Expected<int> {
    TRY_ASSIGN(auto pod_rtnl, Rtnl::open());
    TRY_ASSIGN(auto child, netns::find_link_by_name(pod_rtnl, spec.name));
    return child.index;
  });
  if (index) {
    a.rec().steps.back().data["index"] = *index;
  }
  return ok_status();
}

Status delete_macvlan(Attachment& a, const json& step) {
  std::string name;
  int parent = 0;
  int index = 0;
  Fields f(step, "macvlan", ErrorKind::kState);
  f.required_string("name", &name).integer("parentIndex", &parent).integer("index", &index);
  TRY(f.status());
  TRY(check_recorded_link_name(name, "macvlan.name"));
  if (!a.pod()) {
    // The child dies with the netns, once the netns does: not while a process holds it.
    TRY_ASSIGN(auto rtnl, Rtnl::open());
    for (int tries = 0; index != 0 && parent != 0; ++tries) {
      TRY_ASSIGN(bool alive,
                 still_in_unpinned_netns(rtnl, a.rec().netns_id, index, "macvlan", parent));
      if (!alive) {
        break;
      }
      if (tries == kDyingNetnsTries) {
        auto parent_link = netns::find_link_by_index(rtnl, parent);
        std::string of = parent_link ? " of " + parent_link->name : "";
        return alive_without_pin(a,
                                 "macvlan " + name + " (index " + std::to_string(index) + ")" + of);
      }
      pause_before_looking_again();
    }
    return ok_status();
  }
  return in_netns(*a.pod(), [&]() -> Status {
    TRY_ASSIGN(auto rtnl, Rtnl::open());
    if (parent == 0) {
      // A record of rdmanet 0.1: by name and kind, as it did.
      auto link = netns::find_link_by_name(rtnl, name);
      if (!link && link.error().kind() != ErrorKind::kDeviceNotFound) {
        return std::move(link).error();
      }
      return link && link->kind == "macvlan" ? netns::delete_link(rtnl, *link) : ok_status();
    }
    TRY_ASSIGN(auto children,
               netns::find_links(rtnl, *a.pod(), a.host(), macvlan_identity(parent)));
    const LinkInfo* ours = nullptr;
    for (const auto& child : children) {
      if ((index != 0 && child.index == index) || (index == 0 && child.name == name)) {
        ours = &child;
      }
    }
    if (ours == nullptr && children.size() == 1) {
      ours = &children.front();  // renamed by the pod; still the only child of our parent
    }
    if (ours == nullptr) {
      if (!children.empty()) {
        return Error(ErrorKind::kState, "macvlan " + name + ": " + std::to_string(children.size()) +
                                            " children of its parent in the pod, none of them "
                                            "recorded as this attachment's; none is deleted");
      }
      return ok_status();  // gone (or moved by the pod into a netns that dies with it)
    }
    return netns::delete_link(rtnl, *ours);
  });
}

}  // namespace rdmanet::plugin
