#include "netns/link.h"

#include <linux/if.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>

#include <cctype>
#include <cerrno>
#include <cstring>

namespace rdmanet::netns {
namespace {

std::string attr_string(const nlattr* attr) {
  const char* text = static_cast<const char*>(nla_data(attr));
  return {text, strnlen(text, nla_len(attr))};
}

HwAddress attr_hwaddr(const nlattr* attr) {
  const auto* bytes = static_cast<const uint8_t*>(nla_data(attr));
  return HwAddress(std::vector<uint8_t>(bytes, bytes + nla_len(attr)));
}

LinkInfo parse_link_unchecked(const nlmsghdr* hdr) {
  const auto* ifi = static_cast<const ifinfomsg*>(nlmsg_data(hdr));
  LinkInfo link;
  link.index = ifi->ifi_index;
  link.flags = ifi->ifi_flags;
  link.type = ifi->ifi_type;
  nlattr* tb[IFLA_MAX + 1] = {};
  nlmsg_parse(const_cast<nlmsghdr*>(hdr), sizeof(ifinfomsg), tb, IFLA_MAX, nullptr);
  if (tb[IFLA_IFNAME] != nullptr) {
    link.name = attr_string(tb[IFLA_IFNAME]);
  }
  if (tb[IFLA_MTU] != nullptr) {
    link.mtu = attr_u32(tb[IFLA_MTU]);
  }
  if (tb[IFLA_ADDRESS] != nullptr) {
    link.hwaddr = attr_hwaddr(tb[IFLA_ADDRESS]);
  }
  if (tb[IFLA_BROADCAST] != nullptr) {
    link.broadcast = attr_hwaddr(tb[IFLA_BROADCAST]);
  }
  if (tb[IFLA_PERM_ADDRESS] != nullptr) {
    link.perm_hwaddr = attr_hwaddr(tb[IFLA_PERM_ADDRESS]);
  }
  if (tb[IFLA_IFALIAS] != nullptr) {
    link.alias = attr_string(tb[IFLA_IFALIAS]);
  }
  if (tb[IFLA_LINK] != nullptr) {
    link.parent_index = static_cast<int>(attr_u32(tb[IFLA_LINK]));
  }
  if (tb[IFLA_LINK_NETNSID] != nullptr && nla_len(tb[IFLA_LINK_NETNSID]) >= 4) {
    link.link_netnsid = static_cast<int>(attr_u32(tb[IFLA_LINK_NETNSID]));
  }
  if (tb[IFLA_PARENT_DEV_NAME] != nullptr) {
    link.parent_dev = attr_string(tb[IFLA_PARENT_DEV_NAME]);
  }
  if (tb[IFLA_PARENT_DEV_BUS_NAME] != nullptr) {
    link.parent_bus = attr_string(tb[IFLA_PARENT_DEV_BUS_NAME]);
  }
  if (tb[IFLA_PROP_LIST] != nullptr) {
    nlattr* prop = nullptr;
    int rem = 0;
    nla_for_each_nested(prop, tb[IFLA_PROP_LIST], rem) {
      if (nla_type(prop) == IFLA_ALT_IFNAME) {
        link.altnames.push_back(attr_string(prop));
      }
    }
  }
  if (tb[IFLA_LINKINFO] != nullptr) {
    nlattr* info[IFLA_INFO_MAX + 1] = {};
    nla_parse_nested(info, IFLA_INFO_MAX, tb[IFLA_LINKINFO], nullptr);
    if (info[IFLA_INFO_KIND] != nullptr) {
      link.kind = attr_string(info[IFLA_INFO_KIND]);
    }
  }
  return link;
}

ifinfomsg link_header(int index) {
  ifinfomsg ifi{};
  ifi.ifi_family = AF_UNSPEC;
  ifi.ifi_index = index;
  return ifi;
}

// A request that changes attributes of an existing link.
NlRequest setlink(const LinkInfo& link) {
  ifinfomsg ifi = link_header(link.index);
  return {RTM_SETLINK, NLM_F_REQUEST, &ifi, sizeof ifi};
}

// The netns a request asks about: the socket's own, or the one with this id in it.
constexpr int kOwnNetns = -1;

// IFLA_TARGET_NETNSID answers EINVAL for an id that names no netns.
Error netns_id_gone(int netnsid, const std::string& what) {
  return Error(ErrorKind::kDeviceNotFound,
               what + ": no netns has the id " + std::to_string(netnsid) + " (any more)");
}

Expected<LinkInfo> get_link(Rtnl& rtnl, int index, const std::string& name, const std::string& what,
                            int netnsid = kOwnNetns) {
  ifinfomsg ifi = link_header(index);
  NlRequest req(RTM_GETLINK, NLM_F_REQUEST, &ifi, sizeof ifi);
  if (!name.empty()) {
    // Also matches alternative names; the result carries the primary name.
    req.put_string(IFLA_IFNAME, name);
  }
  req.put_u32(IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
  if (netnsid != kOwnNetns) {
    req.put_u32(IFLA_TARGET_NETNSID, static_cast<uint32_t>(netnsid));
  }
  std::optional<LinkInfo> found;
  auto asked = rtnl.query(req, what, [&](const nlmsghdr* hdr) {
    if (auto link = decode_link(hdr)) {
      found = std::move(link);
    }
  });
  if (!asked && netnsid != kOwnNetns && asked.error().sys_errno() == EINVAL) {
    return netns_id_gone(netnsid, what);
  }
  TRY(std::move(asked));
  if (!found) {
    return Error(ErrorKind::kDeviceNotFound, what + ": no such device");
  }
  return std::move(*found);
}

uint32_t mode_value(MacvlanMode mode) {
  switch (mode) {
    case MacvlanMode::kPrivate:
      return MACVLAN_MODE_PRIVATE;
    case MacvlanMode::kVepa:
      return MACVLAN_MODE_VEPA;
    case MacvlanMode::kBridge:
      return MACVLAN_MODE_BRIDGE;
    case MacvlanMode::kPassthru:
      return MACVLAN_MODE_PASSTHRU;
  }
  return MACVLAN_MODE_BRIDGE;
}

}  // namespace

std::optional<LinkInfo> decode_link(const nlmsghdr* hdr) {
  if (hdr->nlmsg_len < NLMSG_LENGTH(sizeof(ifinfomsg))) {
    return std::nullopt;
  }
  return parse_link_unchecked(hdr);
}

bool LinkInfo::up() const { return (flags & IFF_UP) != 0; }

Status check_link_name(const std::string& name) {
  const char* why = nullptr;
  if (name.empty() || name.size() >= IFNAMSIZ) {
    why = "must be 1 to 15 bytes";
  } else if (name == "." || name == "..") {
    why = "is reserved";
  } else {
    for (char c : name) {
      // The kernel's isspace() also holds for the byte 0xA0.
      if (c == '/' || c == ':' || c == '\0' || std::isspace(static_cast<unsigned char>(c)) ||
          static_cast<unsigned char>(c) == 0xA0) {
        why = "must not contain '/', ':', NUL or whitespace";
      } else if (c == '%') {
        why = "must not contain '%' (the kernel would replace it with a number)";
      }
    }
  }
  if (why != nullptr) {
    return Error(ErrorKind::kInvalidConfig,
                 "invalid interface name " + in_quotes(name) + ": " + why);
  }
  return ok_status();
}

Expected<LinkInfo> find_link_by_name(Rtnl& rtnl, const std::string& name) {
  TRY(check_link_name(name));
  return get_link(rtnl, 0, name, "find link " + in_quotes(name));
}

Expected<LinkInfo> find_link_by_index(Rtnl& rtnl, int index) {
  return get_link(rtnl, index, "", "find link with index " + std::to_string(index));
}

Expected<LinkInfo> find_link_by_index_in(Rtnl& rtnl, int netnsid, int index) {
  if (netnsid < 0) {
    // The kernel would take it for "the socket's own netns", which is not what was asked.
    return Error(ErrorKind::kInternal,
                 "find link in netns id " + std::to_string(netnsid) + ": not a netns id");
  }
  return get_link(
      rtnl, index, "",
      "find link with index " + std::to_string(index) + " in netns id " + std::to_string(netnsid),
      netnsid);
}

namespace {

Expected<std::vector<LinkInfo>> dump_links(Rtnl& rtnl, int netnsid, const std::string& what) {
  ifinfomsg ifi = link_header(0);
  NlRequest req(RTM_GETLINK, NLM_F_REQUEST | NLM_F_DUMP, &ifi, sizeof ifi);
  req.put_u32(IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
  if (netnsid != kOwnNetns) {
    req.put_u32(IFLA_TARGET_NETNSID, static_cast<uint32_t>(netnsid));
  }
  std::vector<LinkInfo> links;
  auto dumped = rtnl.dump(
      req, what,
      [&](const nlmsghdr* hdr) {
        if (auto link = decode_link(hdr)) {
          links.push_back(std::move(*link));
        }
      },
      [&] { links.clear(); });
  if (!dumped && netnsid != kOwnNetns && dumped.error().sys_errno() == EINVAL) {
    return netns_id_gone(netnsid, what);
  }
  TRY(std::move(dumped));
  return links;
}

}  // namespace

Expected<std::vector<LinkInfo>> list_links(Rtnl& rtnl) {
  return dump_links(rtnl, kOwnNetns, "list links");
}

Expected<std::optional<std::vector<LinkInfo>>> list_links_in(Rtnl& rtnl, int netnsid) {
  if (netnsid < 0) {
    return Error(ErrorKind::kInternal,
                 "list links in netns id " + std::to_string(netnsid) + ": not a netns id");
  }
  auto links = dump_links(rtnl, netnsid, "list links in netns id " + std::to_string(netnsid));
  if (!links) {
    if (links.error().kind() == ErrorKind::kDeviceNotFound) {
      return std::optional<std::vector<LinkInfo>>();
    }
    return std::move(links).error();
  }
  return std::optional<std::vector<LinkInfo>>(std::move(*links));
}

Expected<LinkInfo> find_link_by_hwaddr(Rtnl& rtnl, const HwAddress& hwaddr) {
  TRY_ASSIGN(std::vector<LinkInfo> links, list_links(rtnl));
  std::vector<LinkInfo> matches;
  for (auto& link : links) {
    if (link.hwaddr == hwaddr) {
      matches.push_back(std::move(link));
    }
  }
  if (matches.empty()) {
    return Error(ErrorKind::kDeviceNotFound, "find link with hwaddr " + hwaddr.str() + ": none");
  }
  if (matches.size() > 1) {
    std::string names;
    for (const auto& link : matches) {
      names += (names.empty() ? "" : ", ") + link.name;
    }
    return Error(ErrorKind::kInvalidConfig, "find link with hwaddr " + hwaddr.str() +
                                                ": several links have it (" + names +
                                                "); name the device instead");
  }
  return std::move(matches.front());
}

Status set_link_up(Rtnl& rtnl, const LinkInfo& link) {
  ifinfomsg ifi = link_header(link.index);
  ifi.ifi_flags = IFF_UP;
  ifi.ifi_change = IFF_UP;
  NlRequest req(RTM_SETLINK, NLM_F_REQUEST, &ifi, sizeof ifi);
  return rtnl.request(req, "set link " + in_quotes(link.name) + " up");
}

Status set_link_down(Rtnl& rtnl, const LinkInfo& link) {
  ifinfomsg ifi = link_header(link.index);
  ifi.ifi_change = IFF_UP;
  NlRequest req(RTM_SETLINK, NLM_F_REQUEST, &ifi, sizeof ifi);
  return rtnl.request(req, "set link " + in_quotes(link.name) + " down");
}

Status rename_link(Rtnl& rtnl, const LinkInfo& link, const std::string& new_name) {
  std::string what = "rename link " + in_quotes(link.name) + " to " + in_quotes(new_name);
  TRY(check_link_name(new_name).with_context(what));
  auto req = setlink(link);
  req.put_string(IFLA_IFNAME, new_name);
  return rtnl.request(req, what);
}

Status set_link_mtu(Rtnl& rtnl, const LinkInfo& link, uint32_t mtu) {
  auto req = setlink(link);
  req.put_u32(IFLA_MTU, mtu);
  return rtnl.request(req, "set mtu " + std::to_string(mtu) + " on link " + in_quotes(link.name));
}

Status set_link_hwaddr(Rtnl& rtnl, const LinkInfo& link, const HwAddress& hwaddr) {
  auto req = setlink(link);
  req.put(IFLA_ADDRESS, hwaddr.bytes().data(), hwaddr.bytes().size());
  return rtnl.request(req, "set hwaddr " + hwaddr.str() + " on link " + in_quotes(link.name));
}

Status set_link_alias(Rtnl& rtnl, const LinkInfo& link, const std::string& alias) {
  auto req = setlink(link);
  // The kernel clears the alias when given an empty attribute, not an empty string.
  if (alias.empty()) {
    req.put(IFLA_IFALIAS, nullptr, 0);
  } else {
    req.put(IFLA_IFALIAS, alias.data(), alias.size());
  }
  return rtnl.request(req, "set alias " + in_quotes(alias) + " on link " + in_quotes(link.name));
}

Status delete_link(Rtnl& rtnl, const LinkInfo& link) {
  ifinfomsg ifi = link_header(link.index);
  NlRequest req(RTM_DELLINK, NLM_F_REQUEST, &ifi, sizeof ifi);
  return rtnl.request(req, "delete link " + in_quotes(link.name));
}

namespace {

Status change_altname(Rtnl& rtnl, int type, const LinkInfo& link, const std::string& altname,
                      const std::string& what) {
  // ALTIFNAMSIZ includes the NUL; '/' and NUL would make names the kernel rejects anyway.
  if (altname.empty() || altname.size() >= ALTIFNAMSIZ ||
      altname.find_first_of(std::string("/\0", 2)) != std::string::npos) {
    return Error(ErrorKind::kInvalidConfig, what + ": invalid name");
  }
  ifinfomsg ifi = link_header(link.index);
  NlRequest req(type, NLM_F_REQUEST, &ifi, sizeof ifi);
  void* props = req.begin_nest(IFLA_PROP_LIST);
  req.put_string(IFLA_ALT_IFNAME, altname);
  req.end_nest(props);
  return rtnl.request(req, what);
}

}  // namespace

Status add_link_altname(Rtnl& rtnl, const LinkInfo& link, const std::string& altname) {
  return change_altname(rtnl, RTM_NEWLINKPROP, link, altname,
                        "add altname " + in_quotes(altname) + " to link " + in_quotes(link.name));
}

Status delete_link_altname(Rtnl& rtnl, const LinkInfo& link, const std::string& altname) {
  return change_altname(
      rtnl, RTM_DELLINKPROP, link, altname,
      "delete altname " + in_quotes(altname) + " of link " + in_quotes(link.name));
}

Status move_link(Rtnl& rtnl, const LinkInfo& link, const Netns& target,
                 const std::optional<std::string>& new_name) {
  std::string what = "move link " + in_quotes(link.name);
  if (new_name) {
    what += " as " + in_quotes(*new_name);
  }
  what += " to netns " + target.path();
  auto req = setlink(link);
  if (new_name) {
    TRY(check_link_name(*new_name).with_context(what));
    // In one request the kernel takes the new name while moving, so the old name is never
    // needed in target (where a link may already own it).
    req.put_string(IFLA_IFNAME, *new_name);
  }
  req.put_u32(IFLA_NET_NS_FD, static_cast<uint32_t>(target.fd()));
  return rtnl.request(req, what);
}

Status create_macvlan(Rtnl& rtnl, const MacvlanSpec& spec) {
  std::string what = "create macvlan " + in_quotes(spec.name) + " (mode " +
                     std::string(name_of(kMacvlanModeNames, spec.mode)) + ") on parent index " +
                     std::to_string(spec.parent_index);
  if (spec.target != nullptr) {
    what += " in netns " + spec.target->path();
  }
  TRY(check_link_name(spec.name).with_context(what));
  ifinfomsg ifi = link_header(0);
  NlRequest req(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL, &ifi, sizeof ifi);
  req.put_string(IFLA_IFNAME, spec.name);
  // IFLA_LINK is resolved in the socket's namespace even when the link is created in target.
  req.put_u32(IFLA_LINK, static_cast<uint32_t>(spec.parent_index));
  if (spec.target != nullptr) {
    req.put_u32(IFLA_NET_NS_FD, static_cast<uint32_t>(spec.target->fd()));
  }
  if (spec.hwaddr) {
    req.put(IFLA_ADDRESS, spec.hwaddr->bytes().data(), spec.hwaddr->bytes().size());
  }
  if (spec.mtu) {
    req.put_u32(IFLA_MTU, *spec.mtu);
  }
  void* linkinfo = req.begin_nest(IFLA_LINKINFO);
  req.put_string(IFLA_INFO_KIND, "macvlan");
  void* data = req.begin_nest(IFLA_INFO_DATA);
  req.put_u32(IFLA_MACVLAN_MODE, mode_value(spec.mode));
  req.end_nest(data);
  req.end_nest(linkinfo);
  return rtnl.request(req, what);
}

}  // namespace rdmanet::netns
