// Routes over rtnetlink, in the namespace of the given Rtnl socket.
#pragma once

#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "base/error.h"
#include "netns/ip_address.h"
#include "netns/rtnl.h"

namespace rdmanet::netns {

struct Route {
  IpPrefix dst;                      // 0.0.0.0/0 or ::/0 for a default route
  std::optional<IpAddress> gateway;  // none: directly connected
  std::optional<IpAddress> src;      // RTA_PREFSRC: the source address it suggests
  int ifindex = 0;                   // output link; 0 lets the kernel pick from the gateway
  std::optional<uint32_t> metric;    // RTA_PRIORITY
  std::optional<uint32_t> mtu;       // RTAX_MTU
  uint32_t table = RT_TABLE_MAIN;
  // RT_SCOPE_*; unset: link scope for IPv4 routes without a gateway, universe otherwise.
  std::optional<uint8_t> scope;

  std::string str() const;  // "10.2.0.0/16 via 10.1.0.1 dev index 3 metric 100"
};

Status add_route(Rtnl& rtnl, const Route& route);
// Deletes the route matching dst, table and whatever else is set in route.
Status delete_route(Rtnl& rtnl, const Route& route);
// The unicast routes of family (AF_INET or AF_INET6) in table.
Expected<std::vector<Route>> list_routes(Rtnl& rtnl, int family, uint32_t table = RT_TABLE_MAIN);

}  // namespace rdmanet::netns
