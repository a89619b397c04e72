// The device's own steps: claiming it, holding it, and handing it to the pod (the netdev
// itself, or a macvlan child of it).
#include <spdlog/spdlog.h>

#include <algorithm>

#include "base/json_fields.h"
#include "netns/link.h"
#include "netns/netns.h"
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
    return Error(ErrorKind::kDeviceBusy,
                 "device " + key + " is held by " + holder->str() + ", netns " + other->netns);
  }
  spdlog::warn("reclaiming device {} from {}: its netns {} is gone", key, holder->str(),
               other->netns);
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

Status release_hold(Attachment& a, const json& step) {
  std::string key;
  TRY(Fields(step, "hold-device", ErrorKind::kState).required_string("key", &key).status());
  return a.store().clear_holder(key, a.rec().id());
}

Status move_netdev_in(Attachment& a) {
  const LinkInfo& link = a.device().link;
  TRY(a.record(StepKind::kNetdevMove, {{"hostName", link.name},
                                       {"index", link.index},
                                       {"mac", link.hwaddr.str()},
                                       {"mtu", link.mtu},
                                       {"alias", link.alias},
                                       {"altnames", link.altnames},
                                       {"wasUp", link.up()},
                                       {"pci", a.device().pci}}));
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
  int index = 0;     // ifindex (kept across moves unless taken in the target)
  std::string mac;
  uint32_t mtu = 0;
  std::string alias;
  std::vector<std::string> altnames;
  bool was_up = false;
  std::string pod_name;  // CNI_IFNAME
  std::string pod_mac;   // the MAC ADD gave it in the pod, if any
};

Expected<HostSettings> host_settings(const AttachmentRecord& rec, const json& step) {
  HostSettings h;
  Fields f(step, "netdev-move", ErrorKind::kState);
  f.required_string("hostName", &h.name).integer("index", &h.index).string("mac", &h.mac);
  f.integer_in("mtu", 0, 0xffffffffLL, &h.mtu).string("alias", &h.alias);
  f.string_list("altnames", &h.altnames).boolean("wasUp", &h.was_up);
  TRY(f.status());
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

bool has_our_mac(const LinkInfo& link, const HostSettings& h) {
  std::string mac = link.hwaddr.str();
  return mac == h.mac || (!h.pod_mac.empty() && mac == h.pod_mac);
}

// Our device in the pod netns. By index first, accepting only the names it can have there
// (a failed ADD may have left it under its host name); never just "whatever is called
// net1": that could be another device of the pod.
std::optional<LinkInfo> find_in_pod(Rtnl& rtnl, const HostSettings& h) {
  if (auto link = netns::find_link_by_index(rtnl, h.index);
      link && (link->name == h.pod_name || link->name == h.name)) {
    return *link;
  }
  for (const std::string& name : {h.name, h.pod_name}) {
    if (auto link = netns::find_link_by_name(rtnl, name); link && has_our_mac(*link, h)) {
      return *link;
    }
  }
  return std::nullopt;
}

// Our device in the host netns, under any name it can have come back with.
std::optional<LinkInfo> find_in_host(Rtnl& rtnl, const HostSettings& h) {
  const std::string names[] = {h.name, h.pod_name, fallback_name(h)};
  if (auto link = netns::find_link_by_index(rtnl, h.index); link) {
    bool named = std::find(std::begin(names), std::end(names), link->name) != std::end(names);
    if (named && (link->name == h.name || has_our_mac(*link, h))) {
      return *link;
    }
  }
  for (const auto& name : names) {
    if (auto link = netns::find_link_by_name(rtnl, name); link && has_our_mac(*link, h)) {
      return *link;
    }
  }
  return std::nullopt;
}

// Out of the pod, preferring the host name. The kernel moves a link under its current name
// when that is free in the target and renames it afterwards, so a failed rename can leave
// it in the host under its pod name: the caller finds it there either way.
Status move_home(const HostSettings& h, const Netns& pod, const Netns& host) {
  return in_netns(pod, [&]() -> Status {
    TRY_ASSIGN(auto rtnl, Rtnl::open());
    auto link = find_in_pod(rtnl, h);
    if (!link) {
      return ok_status();  // not in the pod (any more)
    }
    TRY(netns::set_link_down(rtnl, *link));
    auto moved = netns::move_link(rtnl, *link, host, h.name);
    if (moved) {
      return moved;
    }
    spdlog::warn("return {} as {}: {}", link->name, h.name, moved.error().msg());
    auto still = find_in_pod(rtnl, h);
    if (!still) {
      return ok_status();  // it moved; only the rename failed
    }
    // Both its names are taken in the host: come home under the fallback.
    return netns::move_link(rtnl, *still, host, fallback_name(h));
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
      // Someone took the name meanwhile; the device works without it.
      spdlog::warn("restore altname {} on {}: {}", altname, link.name, s.error().msg());
    }
  }
  return h.was_up ? netns::set_link_up(rtnl, link) : ok_status();
}

}  // namespace

Status bring_netdev_home(Attachment& a, const json& step) {
  TRY_ASSIGN(auto h, host_settings(a.rec(), step));
  // A dead pod netns has handed a physical device back to the host by itself.
  if (a.pod()) {
    TRY(move_home(h, *a.pod(), a.host()));
  }
  TRY_ASSIGN(auto rtnl, Rtnl::open());
  auto link = find_in_host(rtnl, h);
  if (!link) {
    spdlog::info("device {} (index {}) is not in the host; nothing to restore", h.name, h.index);
    return ok_status();
  }
  return restore_host_settings(rtnl, std::move(*link), h);
}

Status create_macvlan(Attachment& a) {
  const PluginConf& conf = a.conf();
  TRY(a.record(StepKind::kMacvlan, {{"name", a.rec().ifname}}));
  TRY_ASSIGN(auto rtnl, Rtnl::open());
  netns::MacvlanSpec spec;
  spec.name = a.rec().ifname;
  spec.parent_index = a.device().link.index;
  spec.mode = conf.macvlan_mode;
  spec.target = &*a.pod();
  spec.hwaddr = conf.mac;
  spec.mtu = conf.mtu;
  return netns::create_macvlan(rtnl, spec).with_context("macvlan child of " + a.device().link.name);
}

Status delete_macvlan(Attachment& a, const json& step) {
  if (!a.pod()) {
    return ok_status();  // the child died with the netns
  }
  std::string name;
  TRY(Fields(step, "macvlan", ErrorKind::kState).required_string("name", &name).status());
  return in_netns(*a.pod(), [&]() -> Status {
    TRY_ASSIGN(auto rtnl, Rtnl::open());
    auto link = netns::find_link_by_name(rtnl, name);
    if (!link || link->kind != "macvlan") {
      return ok_status();
    }
    return netns::delete_link(rtnl, *link);
  });
}

}  // namespace rdmanet::plugin
