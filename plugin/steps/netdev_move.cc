#include "plugin/steps/netdev_move.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>

#include "base/json_fields.h"
#include "netns/link.h"
#include "plugin/attachment.h"
#include "plugin/steps/dying_netns.h"
#include "plugin/steps/netdev_home.h"

namespace rdmanet::plugin {

using netns::in_netns;
using netns::LinkInfo;
using netns::Netns;
using netns::Rtnl;
using nlohmann::json;

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

json NetdevMoveRecord::to_json() const {
  return {{"hostName", host_name},
          {"index", index},
          {"mac", mac},
          {"mtu", mtu},
          {"alias", alias},
          {"altnames", altnames},
          {"wasUp", was_up},
          {"pci", pci},
          {"identity", identity_to_json(identity)}};
}

Expected<NetdevMoveRecord> NetdevMoveRecord::from_json(const json& step) {
  NetdevMoveRecord r;
  json identity;
  Fields f(step, "netdev-move", ErrorKind::kState);
  f.required_string("hostName", &r.host_name).integer("index", &r.index).string("mac", &r.mac);
  f.integer_in("mtu", 0, 0xffffffffLL, &r.mtu).string("alias", &r.alias);
  f.string_list("altnames", &r.altnames).boolean("wasUp", &r.was_up).string("pci", &r.pci);
  f.object("identity", &identity);
  TRY(f.status());
  TRY(check_recorded_link_name(r.host_name, "netdev-move.hostName"));
  r.identity.index = r.index;
  if (identity.is_object()) {
    TRY_ASSIGN(r.identity, identity_from_json(identity, "netdev-move.identity"));
  }
  return r;
}

Expected<std::optional<NetdevMoveRecord>> netdev_move_of(const AttachmentRecord& record) {
  const StepRecord* step = record.step(StepKind::kNetdevMove);
  if (step == nullptr) {
    return std::optional<NetdevMoveRecord>();
  }
  TRY_ASSIGN(auto move, NetdevMoveRecord::from_json(step->data));
  return std::optional<NetdevMoveRecord>(std::move(move));
}

Status move_netdev_in(Attachment& a) {
  if (a.rec().mode != Mode::kNetdev) {
    return ok_status();
  }
  const LinkInfo& link = a.device().link;
  NetdevMoveRecord moved;
  moved.host_name = link.name;
  moved.index = link.index;
  moved.mac = link.hwaddr.str();
  moved.mtu = link.mtu;
  moved.alias = link.alias;
  moved.altnames = link.altnames;
  moved.was_up = link.up();
  moved.pci = a.device().pci;
  moved.identity = netns::identity_of(link);
  TRY(a.record(moved));
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
    return Error(ErrorKind::kState, "device " + h.host_name + ": " + std::to_string(found.size()) +
                                        " links in netns " + here.path() +
                                        " match its identity; none is moved");
  }
  if (found.empty()) {
    return std::optional<LinkInfo>();
  }
  return std::optional<LinkInfo>(std::move(found.front()));
}

Status send_home(Rtnl& rtnl, const Netns& host, const HostSettings& h, const FindDevice& find) {
  TRY_ASSIGN(auto link, find(rtnl));
  if (!link) {
    return ok_status();  // not in the pod (any more)
  }
  TRY(netns::set_link_down(rtnl, *link));
  auto moved = netns::move_link(rtnl, *link, host, h.host_name);
  if (moved) {
    return moved;
  }
  spdlog::warn("return {} as {}: {}", link->name, h.host_name, moved.error().msg());
  TRY_ASSIGN(auto still, find(rtnl));
  if (!still) {
    return ok_status();  // it moved; only the rename failed
  }
  // Both its names are taken in the host: come home under the fallback.
  return netns::move_link(rtnl, *still, host, h.fallback_name());
}

namespace {

// The name it had in the host, else the fallback when that one is taken (EEXIST); any other
// failure is for the next DEL to retry.
Status restore_name(Rtnl& rtnl, LinkInfo& link, const HostSettings& h) {
  if (link.name == h.host_name) {
    return ok_status();
  }
  auto s = netns::rename_link(rtnl, link, h.host_name);
  if (s) {
    link.name = h.host_name;
    return ok_status();
  }
  if (s.error().sys_errno() != EEXIST) {
    return std::move(s).error();
  }
  if (link.name != h.fallback_name()) {
    spdlog::warn("rename {} back to {}: {}; using {}", link.name, h.host_name, s.error().msg(),
                 h.fallback_name());
    if (netns::rename_link(rtnl, link, h.fallback_name())) {
      link.name = h.fallback_name();
    }
  }
  return ok_status();
}

Status restore_altnames(Rtnl& rtnl, const LinkInfo& link, const HostSettings& h) {
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
  return ok_status();
}

}  // namespace

Status restore_host_settings(Rtnl& rtnl, LinkInfo link, const HostSettings& h) {
  if (link.up()) {
    TRY(netns::set_link_down(rtnl, link));
  }
  TRY(restore_name(rtnl, link, h));
  if (h.mtu != 0 && link.mtu != h.mtu) {
    TRY(netns::set_link_mtu(rtnl, link, h.mtu));
  }
  if (auto mac = netns::HwAddress::parse(h.mac); mac && link.hwaddr != *mac) {
    TRY(netns::set_link_hwaddr(rtnl, link, *mac));
  }
  if (link.alias != h.alias) {
    TRY(netns::set_link_alias(rtnl, link, h.alias));
  }
  TRY(restore_altnames(rtnl, link, h));
  return h.was_up ? netns::set_link_up(rtnl, link) : ok_status();
}

namespace {

Expected<HostSettings> host_settings(const AttachmentRecord& rec, const json& step) {
  HostSettings h;
  TRY_ASSIGN(static_cast<NetdevMoveRecord&>(h), NetdevMoveRecord::from_json(step));
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

Status move_home(const HostSettings& h, const Netns& pod, const Netns& host) {
  return in_netns(pod, [&]() -> Status {
    TRY_ASSIGN(auto rtnl, Rtnl::open());
    return send_home(rtnl, host, h,
                     [&](Rtnl& pod_rtnl) { return find_device(pod_rtnl, pod, host, h); });
  });
}

// The device in the host. A physical device of a dead netns comes back to the host by itself,
// asynchronously: then it is waited for (wait_while_dying).
Expected<std::optional<LinkInfo>> find_at_home(Rtnl& rtnl, const Netns& host, const HostSettings& h,
                                               bool pod_alive) {
  std::optional<LinkInfo> link;
  auto found = [&]() -> Expected<bool> {
    TRY_ASSIGN(link, find_device(rtnl, host, host, h));
    return link.has_value();
  };
  const bool physical = h.identity.kind.empty() && h.identity.strong();
  if (pod_alive || !physical) {
    TRY(found());
  } else {
    TRY(wait_while_dying(found));
  }
  return link;
}

}  // namespace

Status bring_netdev_home(Attachment& a, const json& recorded) {
  TRY_ASSIGN(auto h, host_settings(a.rec(), recorded));
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
  TRY_ASSIGN(auto link, find_at_home(rtnl, a.host(), h, a.pod().has_value()));
  if (!link) {
    return device_missing(a, rtnl, h);
  }
  return restore_host_settings(rtnl, std::move(*link), h);
}

}  // namespace rdmanet::plugin
