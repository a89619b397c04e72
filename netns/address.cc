#include "netns/address.h"

#include <linux/if_addr.h>
#include <linux/rtnetlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>

namespace rdmanet::netns {
namespace {

NlRequest address_request(int type, int flags, const LinkInfo& link, const IpPrefix& prefix,
                          uint32_t ifa_flags) {
  ifaddrmsg ifa{};
  ifa.ifa_family = static_cast<uint8_t>(prefix.addr.family());
  ifa.ifa_prefixlen = static_cast<uint8_t>(prefix.len);
  ifa.ifa_scope = RT_SCOPE_UNIVERSE;
  ifa.ifa_index = static_cast<uint32_t>(link.index);
  NlRequest req(type, flags, &ifa, sizeof ifa);
  // Without a peer, local and address are the same (what `ip addr add` sends).
  req.put(IFA_LOCAL, prefix.addr.data(), prefix.addr.size());
  req.put(IFA_ADDRESS, prefix.addr.data(), prefix.addr.size());
  if (ifa_flags != 0) {
    req.put_u32(IFA_FLAGS, ifa_flags);
  }
  return req;
}

std::string on_link(const LinkInfo& link) { return " on link \"" + link.name + "\""; }

}  // namespace

Status add_address(Rtnl& rtnl, const LinkInfo& link, const IpPrefix& prefix,
                   const AddressOptions& options) {
  uint32_t flags = options.no_dad && !prefix.addr.is_v4() ? IFA_F_NODAD : 0;
  auto req =
      address_request(RTM_NEWADDR, NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL, link, prefix, flags);
  return rtnl.request(req, "add address " + prefix.str() + on_link(link));
}

Status delete_address(Rtnl& rtnl, const LinkInfo& link, const IpPrefix& prefix) {
  auto req = address_request(RTM_DELADDR, NLM_F_REQUEST, link, prefix, 0);
  return rtnl.request(req, "delete address " + prefix.str() + on_link(link));
}

Expected<std::vector<IpPrefix>> list_addresses(Rtnl& rtnl, const LinkInfo& link, int family) {
  ifaddrmsg ifa{};
  ifa.ifa_family = static_cast<uint8_t>(family);
  NlRequest req(RTM_GETADDR, NLM_F_REQUEST | NLM_F_DUMP, &ifa, sizeof ifa);
  std::vector<IpPrefix> out;
  TRY(rtnl.query(req, "list addresses" + on_link(link), [&](const nlmsghdr* hdr) {
    const auto* msg = static_cast<const ifaddrmsg*>(nlmsg_data(hdr));
    if (static_cast<int>(msg->ifa_index) != link.index) {
      return;
    }
    nlattr* tb[IFA_MAX + 1] = {};
    nlmsg_parse(const_cast<nlmsghdr*>(hdr), sizeof(ifaddrmsg), tb, IFA_MAX, nullptr);
    // IPv4 puts the interface's own address in IFA_LOCAL; IPv6 only in IFA_ADDRESS.
    nlattr* addr = tb[IFA_LOCAL] != nullptr ? tb[IFA_LOCAL] : tb[IFA_ADDRESS];
    if (addr == nullptr || (nla_len(addr) != 4 && nla_len(addr) != 16)) {
      return;
    }
    out.push_back({IpAddress::from_bytes(nla_data(addr), nla_len(addr)), msg->ifa_prefixlen});
  }));
  return out;
}

}  // namespace rdmanet::netns
