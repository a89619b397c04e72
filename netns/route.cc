#include "netns/route.h"

#include <netlink/attr.h>
#include <netlink/msg.h>

#include <cstring>

namespace rdmanet::netns {
namespace {

NlRequest route_request(int type, int flags, const Route& route) {
  rtmsg rtm{};
  rtm.rtm_family = static_cast<uint8_t>(route.dst.addr.family());
  rtm.rtm_dst_len = static_cast<uint8_t>(route.dst.len);
  // The 8-bit field cannot hold tables above 255; RTA_TABLE below carries the real one.
  rtm.rtm_table = static_cast<uint8_t>(route.table < 256 ? route.table : RT_TABLE_UNSPEC);
  rtm.rtm_protocol = RTPROT_BOOT;
  rtm.rtm_type = RTN_UNICAST;
  if (route.scope) {
    rtm.rtm_scope = *route.scope;
  } else if (type == RTM_DELROUTE) {
    rtm.rtm_scope = RT_SCOPE_NOWHERE;  // matches any scope
  } else {
    bool link_scope = route.dst.addr.is_v4() && !route.gateway;
    rtm.rtm_scope = link_scope ? RT_SCOPE_LINK : RT_SCOPE_UNIVERSE;
  }
  NlRequest req(type, flags, &rtm, sizeof rtm);
  IpAddress dst = route.dst.network().addr;
  req.put(RTA_DST, dst.data(), dst.size());
  req.put_u32(RTA_TABLE, route.table);
  if (route.gateway) {
    req.put(RTA_GATEWAY, route.gateway->data(), route.gateway->size());
  }
  if (route.src) {
    req.put(RTA_PREFSRC, route.src->data(), route.src->size());
  }
  if (route.ifindex != 0) {
    req.put_u32(RTA_OIF, static_cast<uint32_t>(route.ifindex));
  }
  if (route.metric) {
    req.put_u32(RTA_PRIORITY, *route.metric);
  }
  if (route.mtu) {
    void* metrics = req.begin_nest(RTA_METRICS);
    req.put_u32(RTAX_MTU, *route.mtu);
    req.end_nest(metrics);
  }
  return req;
}

bool is_ip_attr(const nlattr* attr, size_t len) {
  return attr != nullptr && nla_len(attr) == static_cast<int>(len);
}

}  // namespace

std::string Route::str() const {
  std::string out = dst.network().str();
  if (gateway) {
    out += " via " + gateway->str();
  }
  if (src) {
    out += " src " + src->str();
  }
  if (ifindex != 0) {
    out += " dev index " + std::to_string(ifindex);
  }
  if (metric) {
    out += " metric " + std::to_string(*metric);
  }
  if (mtu) {
    out += " mtu " + std::to_string(*mtu);
  }
  if (table != RT_TABLE_MAIN) {
    out += " table " + std::to_string(table);
  }
  return out;
}

Status add_route(Rtnl& rtnl, const Route& route) {
  if (route.gateway && route.gateway->family() != route.dst.addr.family()) {
    return Error(ErrorKind::kInvalidConfig,
                 "add route " + route.str() + ": gateway and destination differ in family");
  }
  auto req = route_request(RTM_NEWROUTE, NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL, route);
  return rtnl.request(req, "add route " + route.str());
}

Status delete_route(Rtnl& rtnl, const Route& route) {
  auto req = route_request(RTM_DELROUTE, NLM_F_REQUEST, route);
  return rtnl.request(req, "delete route " + route.str());
}

Expected<std::vector<Route>> list_routes(Rtnl& rtnl, int family, uint32_t table) {
  rtmsg rtm{};
  rtm.rtm_family = static_cast<uint8_t>(family);
  NlRequest req(RTM_GETROUTE, NLM_F_REQUEST | NLM_F_DUMP, &rtm, sizeof rtm);
  std::vector<Route> out;
  TRY(rtnl.query(req, "list routes", [&](const nlmsghdr* hdr) {
    const auto* msg = static_cast<const rtmsg*>(nlmsg_data(hdr));
    if (msg->rtm_type != RTN_UNICAST || msg->rtm_family != family) {
      return;
    }
    nlattr* tb[RTA_MAX + 1] = {};
    nlmsg_parse(const_cast<nlmsghdr*>(hdr), sizeof(rtmsg), tb, RTA_MAX, nullptr);
    uint32_t route_table = tb[RTA_TABLE] != nullptr ? attr_u32(tb[RTA_TABLE]) : msg->rtm_table;
    if (route_table != table) {
      return;
    }
    Route route;
    route.table = route_table;
    route.scope = msg->rtm_scope;
    uint8_t zero[16] = {};
    size_t len = family == AF_INET ? 4 : 16;
    route.dst.addr = is_ip_attr(tb[RTA_DST], len)
                         ? IpAddress::from_bytes(nla_data(tb[RTA_DST]), len)
                         : IpAddress::from_bytes(zero, len);
    route.dst.len = msg->rtm_dst_len;
    if (is_ip_attr(tb[RTA_GATEWAY], len)) {
      route.gateway = IpAddress::from_bytes(nla_data(tb[RTA_GATEWAY]), len);
    }
    if (is_ip_attr(tb[RTA_PREFSRC], len)) {
      route.src = IpAddress::from_bytes(nla_data(tb[RTA_PREFSRC]), len);
    }
    if (tb[RTA_OIF] != nullptr) {
      route.ifindex = static_cast<int>(attr_u32(tb[RTA_OIF]));
    }
    if (tb[RTA_PRIORITY] != nullptr) {
      route.metric = attr_u32(tb[RTA_PRIORITY]);
    }
    if (tb[RTA_METRICS] != nullptr) {
      nlattr* metrics[RTAX_MAX + 1] = {};
      nla_parse_nested(metrics, RTAX_MAX, tb[RTA_METRICS], nullptr);
      if (metrics[RTAX_MTU] != nullptr) {
        route.mtu = attr_u32(metrics[RTAX_MTU]);
      }
    }
    out.push_back(route);
  }));
  return out;
}

}  // namespace rdmanet::netns
