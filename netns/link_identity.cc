#include "netns/link_identity.h"

#include <linux/net_namespace.h>
#include <linux/rtnetlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

namespace rdmanet::netns {

LinkIdentity identity_of(const LinkInfo& host_link) {
  LinkIdentity id;
  id.index = host_link.index;
  id.kind = host_link.kind;
  id.parent_bus = host_link.parent_bus;
  id.parent_dev = host_link.parent_dev;
  if (!host_link.perm_hwaddr.empty() &&
      std::any_of(host_link.perm_hwaddr.bytes().begin(), host_link.perm_hwaddr.bytes().end(),
                  [](uint8_t b) { return b != 0; })) {
    id.perm_mac = host_link.perm_hwaddr.str();
  }
  // A veth's peer in the host (IFLA_LINK without a netns id: the same netns), or in a third
  // netns.
  if (host_link.parent_index != 0 && host_link.parent_index != host_link.index) {
    if (!host_link.link_netnsid) {
      id.host_peer = host_link.parent_index;
    } else if (host_link.kind == "veth" && *host_link.link_netnsid >= 0) {
      id.far_peer = host_link.parent_index;
      id.far_netnsid = *host_link.link_netnsid;
    }
  }
  return id;
}

bool is_same_link(const LinkInfo& link, const LinkIdentity& id, const Vantage& where,
                  const std::vector<std::string>& names, const std::vector<std::string>& macs) {
  if (!id.strong()) {
    auto has = [](const std::vector<std::string>& list, const std::string& value) {
      return std::find(list.begin(), list.end(), value) != list.end();
    };
    return link.index == id.index && (id.kind.empty() || link.kind == id.kind) &&
           has(names, link.name) && has(macs, link.hwaddr.str());
  }
  if (link.kind != id.kind || link.parent_bus != id.parent_bus ||
      link.parent_dev != id.parent_dev) {
    return false;
  }
  // A device with a parent bus device is known by it alone: some drivers give it a new
  // permanent address when it resets (igbvf takes the MAC the PF pinned for the VF).
  if (!id.perm_mac.empty() && id.parent_dev.empty() && link.perm_hwaddr.str() != id.perm_mac) {
    return false;
  }
  if (id.far_peer != 0) {
    // A candidate only: the peer's answer decides (locate_by_far_peer).
    return link.parent_index == id.far_peer && link.link_netnsid.has_value();
  }
  if (id.host_peer != 0) {
    if (link.parent_index != id.host_peer) {
      return false;
    }
    if (!where.peer_in_host) {
      return link.link_netnsid.has_value();  // the peer is in some other netns
    }
    // In the host the peer is in the same netns; elsewhere it must be in the host, which a
    // link the pod made cannot have.
    if (where.in_host ? link.link_netnsid.has_value()
                      : (where.host_nsid < 0 || link.link_netnsid != where.host_nsid)) {
      return false;
    }
  }
  return true;
}

Expected<int> netns_id(Rtnl& rtnl, const Netns& other) {
  rtgenmsg gen{};
  gen.rtgen_family = AF_UNSPEC;
  NlRequest req(RTM_GETNSID, NLM_F_REQUEST, &gen, sizeof gen);
  req.put_u32(NETNSA_FD, static_cast<uint32_t>(other.fd()));
  int id = NETNSA_NSID_NOT_ASSIGNED;
  TRY(rtnl.query(req, "netns id of " + other.path(), [&](const nlmsghdr* hdr) {
    if (hdr->nlmsg_type != RTM_NEWNSID || hdr->nlmsg_len < NLMSG_LENGTH(sizeof(rtgenmsg))) {
      return;
    }
    nlattr* tb[NETNSA_MAX + 1] = {};
    nlmsg_parse(const_cast<nlmsghdr*>(hdr), sizeof(rtgenmsg), tb, NETNSA_MAX, nullptr);
    if (tb[NETNSA_NSID] != nullptr && nla_len(tb[NETNSA_NSID]) >= 4) {
      int32_t value = 0;
      std::memcpy(&value, nla_data(tb[NETNSA_NSID]), sizeof value);
      id = value;
    }
  }));
  return id;
}

Expected<int> assign_netns_id(Rtnl& rtnl, const Netns& other) {
  TRY_ASSIGN(int id, netns_id(rtnl, other));
  if (id >= 0) {
    return id;
  }
  rtgenmsg gen{};
  gen.rtgen_family = AF_UNSPEC;
  NlRequest req(RTM_NEWNSID, NLM_F_REQUEST, &gen, sizeof gen);
  req.put_u32(NETNSA_FD, static_cast<uint32_t>(other.fd()));
  req.put_u32(NETNSA_NSID, static_cast<uint32_t>(NETNSA_NSID_NOT_ASSIGNED));  // any free id
  if (auto s = rtnl.request(req, "assign a netns id to " + other.path());
      !s && s.error().sys_errno() != EEXIST) {  // EEXIST: someone assigned one meanwhile
    return std::move(s).error();
  }
  return netns_id(rtnl, other);
}

namespace {

// The view a veth `peer` gives of its other end, when it is one with a peer elsewhere.
std::optional<FarPeerView> view_from(const LinkInfo& peer) {
  if (peer.kind != "veth" || peer.parent_index == 0 || !peer.link_netnsid) {
    return std::nullopt;
  }
  // The link's netns id is in the host's terms (the asking socket's), also for a link
  // asked about in another netns.
  return FarPeerView{true, peer.parent_index, *peer.link_netnsid};
}

}  // namespace

Expected<FarPeerView> locate_by_far_peer(Rtnl& host_rtnl, const LinkIdentity& id) {
  auto peer = find_link_by_index_in(host_rtnl, id.far_netnsid, id.far_peer);
  if (!peer && peer.error().kind() != ErrorKind::kDeviceNotFound) {
    return std::move(peer).error();
  }
  if (peer) {
    if (auto view = view_from(*peer)) {
      return *view;
    }
  }
  // Not there (a veth pair dies as one): or moved to the host, as rdmanet's DEL does when
  // the peer is itself a device of another pod (two ports of one wire, each given to a
  // pod). A host link is out of the pod's reach; its index and its peer's index must both
  // be the pair's, so another veth that took the index is not taken for it.
  auto in_host = find_link_by_index(host_rtnl, id.far_peer);
  if (!in_host && in_host.error().kind() != ErrorKind::kDeviceNotFound) {
    return std::move(in_host).error();
  }
  if (in_host) {
    if (auto view = view_from(*in_host); view && view->device_index == id.index) {
      return *view;
    }
  }
  return FarPeerView{};
}

Expected<bool> peer_still_in_host(Rtnl& host_rtnl, const LinkIdentity& id) {
  if (id.host_peer == 0) {
    return false;
  }
  auto peer = find_link_by_index(host_rtnl, id.host_peer);
  if (!peer) {
    if (peer.error().kind() == ErrorKind::kDeviceNotFound) {
      return false;
    }
    return std::move(peer).error();
  }
  // Still a veth, and its peer is the device: in another netns (the pod) or, home, here.
  return peer->kind == id.kind &&
         (peer->link_netnsid.has_value() || peer->parent_index == id.index);
}

Expected<std::vector<LinkInfo>> find_links(Rtnl& rtnl, const Netns& here, const Netns& host,
                                           const LinkIdentity& id, bool peer_in_host,
                                           const std::vector<std::string>& names,
                                           const std::vector<std::string>& macs) {
  // The dump first: reporting a veth whose peer is in another netns gives that netns an id
  // here, which the question after it then finds.
  TRY_ASSIGN(auto links, list_links(rtnl));
  Vantage where;
  where.peer_in_host = peer_in_host;
  if (!here.same_as(host)) {
    where.in_host = false;
    TRY_ASSIGN(where.host_nsid, netns_id(rtnl, host));
  }
  std::vector<LinkInfo> out;
  for (auto& link : links) {
    if (is_same_link(link, id, where, names, macs)) {
      out.push_back(std::move(link));
    }
  }
  return out;
}

}  // namespace rdmanet::netns
