#include "plugin/steps/pod_interface.h"

#include <linux/rtnetlink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>

#include "base/json_fields.h"
#include "netns/address.h"
#include "netns/announce.h"
#include "netns/link.h"
#include "netns/route.h"
#include "netns/sysctl.h"
#include "plugin/attachment.h"

namespace rdmanet::plugin {

using netns::in_netns;
using netns::LinkInfo;
using netns::Rtnl;

Status add_route_unless_there(Rtnl& rtnl, const netns::Route& route, const char* whose) {
  if (auto s = netns::add_route(rtnl, route); !s) {
    if (s.error().sys_errno() != EEXIST) {
      return std::move(s).error();
    }
    spdlog::info("route {} is there already ({}): kept", route.str(), whose);
  }
  return ok_status();
}

namespace {

Status set_sysctl(const std::string& ifname, const char* setting, const char* value) {
  TRY_ASSIGN(auto key, netns::ipv4_conf_key(ifname, setting));
  TRY(netns::write_sysctl(key, value));
  return ok_status();
}

// Several rails of one pod share a subnet: answer ARP only for the interface's own
// addresses, source ARP from the right interface, and accept replies arriving on another
// rail (loose reverse-path filter). Set by ADD, compared by CHECK.
struct Sysctl {
  const char* setting;
  const char* value;
};
constexpr Sysctl kMultiRailSysctls[] = {
    {"arp_ignore", "1"}, {"arp_announce", "2"}, {"rp_filter", "2"}};

Status apply_multi_rail_sysctls(const std::string& ifname) {
  for (const auto& s : kMultiRailSysctls) {
    TRY(set_sysctl(ifname, s.setting, s.value));
  }
  return ok_status();
}

// In the pod netns: each multi-rail sysctl still has the value ADD set (the pod may change
// them; so may a chained plugin such as tuning).
Status check_multi_rail_sysctls(const std::string& ifname) {
  for (const auto& s : kMultiRailSysctls) {
    TRY_ASSIGN(auto key, netns::ipv4_conf_key(ifname, s.setting));
    TRY_ASSIGN(auto value, netns::read_sysctl(key));
    while (!value.empty() && (value.back() == '\n' || value.back() == ' ')) {
      value.pop_back();
    }
    if (value != s.value) {
      return Error(ErrorKind::kKernel, "CHECK: net.ipv4.conf." + ifname + "." + s.setting + " is " +
                                           value + ", ADD set " + s.value + " (multiRailSysctls)");
    }
  }
  return ok_status();
}

// The gateway of the IPAM addresses of a family, as the reference plugins take it for a
// route without one (the last IP config of that family that has one).
std::optional<netns::IpAddress> gateway_of(const cni::Result& ipam, int family) {
  std::optional<netns::IpAddress> gateway;
  for (const auto& ip : ipam.ips) {
    auto gw = netns::IpAddress::parse(ip.gateway);
    if (!ip.gateway.empty() && gw && gw->family() == family) {
      gateway = *gw;
    }
  }
  return gateway;
}

Expected<netns::Route> parse_route(const cni::Route& r, int ifindex, const cni::Result& ipam) {
  netns::Route route;
  TRY_ASSIGN(route.dst, netns::IpPrefix::parse(r.dst).with_context("IPAM route"));
  route.ifindex = ifindex;
  if (!r.gw.empty()) {
    TRY_ASSIGN(route.gateway, netns::IpAddress::parse(r.gw).with_context("IPAM route gateway"));
  } else {
    route.gateway = gateway_of(ipam, route.dst.addr.family());
  }
  if (r.priority > 0) {
    route.metric = static_cast<uint32_t>(r.priority);
  }
  if (r.mtu > 0) {
    route.mtu = static_cast<uint32_t>(r.mtu);
  }
  if (r.table) {
    route.table = static_cast<uint32_t>(*r.table);
  }
  return route;
}

}  // namespace

Expected<netns::Route> route_of(const cni::Route& r, int ifindex, const cni::Result& ipam) {
  auto route = parse_route(r, ifindex, ipam);
  if (!route) {
    return Error(ErrorKind::kDelegateFailed, route.error().msg());
  }
  return route;
}

namespace {

// In the pod netns: MTU, MAC, sysctls, addresses, up, routes, announcements.
Expected<LinkInfo> configure_in_pod(const PluginConf& conf, const std::string& ifname,
                                    const cni::Result& ipam) {
  TRY_ASSIGN(auto rtnl, Rtnl::open());
  TRY_ASSIGN(auto link, netns::find_link_by_name(rtnl, ifname));
  if (conf.mtu && link.mtu != *conf.mtu) {
    TRY(netns::set_link_mtu(rtnl, link, *conf.mtu));
  }
  if (conf.mode == Mode::kNetdev && conf.mac && link.hwaddr != *conf.mac) {
    TRY(netns::set_link_hwaddr(rtnl, link, *conf.mac));
  }
  if (conf.multi_rail_sysctls) {
    TRY(apply_multi_rail_sysctls(ifname));
  }
  // IPv4 announcements come from the kernel: with arp_notify set, bringing the link up
  // sends a gratuitous ARP for every address it has. Sending one ourselves needs an
  // AF_PACKET socket, and closing one waits for an RCU grace period (synchronize_net in
  // packet_release): ~11 ms of a ~30 ms ADD here. So addresses go on while the link is
  // down (a moved or new link always is), then up, then routes (a gateway needs the link
  // up).
  const bool kernel_announces = !link.up();
  if (kernel_announces) {
    TRY(set_sysctl(ifname, "arp_notify", "1"));
  }
  std::vector<netns::IpAddress> announce;
  for (const auto& ip : ipam.ips) {
    auto prefix = netns::IpPrefix::parse(ip.address);
    if (!prefix) {
      return Error(ErrorKind::kDelegateFailed, "IPAM address: " + prefix.error().msg());
    }
    TRY(netns::add_address(rtnl, link, *prefix, {.no_dad = true}));
    if (!prefix->addr.is_v4() || !kernel_announces) {
      announce.push_back(prefix->addr);
    }
  }
  TRY(netns::set_link_up(rtnl, link));
  for (const auto& r : ipam.routes) {
    TRY_ASSIGN(auto route, route_of(r, link.index, ipam));
    // Another rail of the pod has the same route: the first one wins, as the reference
    // plugins have it (sourceRouting gives each rail its own anyway).
    TRY(add_route_unless_there(rtnl, route, "another rail's"));
  }
  TRY_ASSIGN(auto fresh, netns::find_link_by_index(rtnl, link.index));
  for (const auto& addr : announce) {
    // Best effort: a lost announcement only delays neighbours' cache updates.
    if (auto s = netns::announce_address(fresh, addr); !s) {
      spdlog::warn("announce {} on {}: {}", addr.str(), ifname, s.error().msg());
    }
  }
  return fresh;
}

}  // namespace

Status configure_pod_interface(Attachment& a) {
  TRY_ASSIGN(a.pod_link(), in_netns(*a.pod(), [&] {
               return configure_in_pod(a.conf(), a.rec().ifname, a.ipam_result());
             }));
  return ok_status();
}

cni::Result build_result(const Attachment& a) {
  const cni::NetConf& net = a.conf().net;
  const LinkInfo& pod_link = a.pod_link();
  const cni::Result& ipam = a.ipam_result();
  cni::Result result;
  if (net.prev_result) {
    result = *net.prev_result;
  }
  cni::Interface iface;
  iface.name = pod_link.name;
  iface.mac = pod_link.hwaddr.str();
  iface.mtu = static_cast<int>(pod_link.mtu);
  iface.sandbox = a.rec().netns;
  result.interfaces.push_back(iface);
  int index = static_cast<int>(result.interfaces.size()) - 1;
  for (auto ip : ipam.ips) {
    ip.interface = index;
    result.ips.push_back(ip);
  }
  for (const auto& r : ipam.routes) {
    result.routes.push_back(r);
  }
  if (!net.dns.empty()) {
    result.dns = net.dns;
  } else if (!ipam.dns.empty()) {
    result.dns = ipam.dns;
  }
  return result;
}

namespace {

// prevResult's view of our interface: its index there (-1 when absent) and its MAC.
int index_in(const cni::Result& expected, const cni::Environment& env) {
  for (size_t i = 0; i < expected.interfaces.size(); ++i) {
    const auto& iface = expected.interfaces[i];
    if (iface.name == env.ifname && iface.sandbox == env.netns) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

Status check_addresses(Rtnl& rtnl, const LinkInfo& link, const cni::Result& expected, int index,
                       const std::string& ifname) {
  TRY_ASSIGN(auto addrs, netns::list_addresses(rtnl, link));
  for (const auto& ip : expected.ips) {
    if (ip.interface != index) {
      continue;
    }
    auto want = netns::IpPrefix::parse(ip.address);
    if (!want || std::find(addrs.begin(), addrs.end(), *want) == addrs.end()) {
      return Error(ErrorKind::kKernel, "CHECK: address " + ip.address + " is missing on " + ifname);
    }
  }
  return ok_status();
}

Status check_routes(Rtnl& rtnl, const LinkInfo& link, const cni::Result& expected,
                    const std::string& ifname) {
  for (const auto& r : expected.routes) {
    auto dst = netns::IpPrefix::parse(r.dst);
    if (!dst) {
      continue;
    }
    TRY_ASSIGN(auto routes,
               netns::list_routes(rtnl, dst->addr.is_v4() ? AF_INET : AF_INET6,
                                  r.table ? static_cast<uint32_t>(*r.table) : RT_TABLE_MAIN));
    std::optional<netns::IpAddress> gw;
    if (!r.gw.empty()) {
      if (auto parsed = netns::IpAddress::parse(r.gw); parsed) {
        gw = *parsed;
      }
    }
    bool found = std::any_of(routes.begin(), routes.end(), [&](const netns::Route& have) {
      return have.dst == *dst && have.ifindex == link.index && (!gw || have.gateway == gw);
    });
    if (!found) {
      return Error(ErrorKind::kKernel, "CHECK: route to " + r.dst +
                                           (r.gw.empty() ? "" : " via " + r.gw) + " on " + ifname +
                                           " is missing");
    }
  }
  return ok_status();
}

}  // namespace

Status check_pod_interface(const cni::Call& call, const PluginConf& conf, const netns::Netns& pod) {
  const std::string& ifname = call.env.ifname;
  return in_netns(pod, [&]() -> Status {
    TRY_ASSIGN(auto rtnl, Rtnl::open());
    auto link = netns::find_link_by_name(rtnl, ifname);
    if (!link) {
      return Error(ErrorKind::kDeviceNotFound, "CHECK: " + link.error().msg());
    }
    if (!link->up()) {
      return Error(ErrorKind::kKernel, "CHECK: " + ifname + " is down");
    }
    if (conf.multi_rail_sysctls) {
      TRY(check_multi_rail_sysctls(ifname));
    }
    if (!call.conf.prev_result) {
      return ok_status();
    }
    const cni::Result& expected = *call.conf.prev_result;
    int index = index_in(expected, call.env);
    if (index < 0) {
      return Error(ErrorKind::kInvalidConfig,
                   "CHECK: prevResult has no interface " + ifname + " in " + call.env.netns);
    }
    const auto& iface = expected.interfaces[index];
    if (!iface.mac.empty() && iface.mac != link->hwaddr.str()) {
      return Error(ErrorKind::kKernel, "CHECK: " + ifname + " has MAC " + link->hwaddr.str() +
                                           ", prevResult says " + iface.mac);
    }
    if (iface.mtu > 0 && static_cast<uint32_t>(iface.mtu) != link->mtu) {
      return Error(ErrorKind::kKernel, "CHECK: " + ifname + " has MTU " +
                                           std::to_string(link->mtu) + ", prevResult says " +
                                           std::to_string(iface.mtu));
    }
    TRY(check_addresses(rtnl, *link, expected, index, ifname));
    return check_routes(rtnl, *link, expected, ifname);
  });
}

}  // namespace rdmanet::plugin
