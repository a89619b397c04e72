// The pod interface: configured inside the pod netns, reported in the result, verified by
// CHECK.
#pragma once

#include "base/error.h"
#include "cni/result.h"
#include "cni/skel.h"
#include "netns/netns.h"
#include "netns/route.h"
#include "plugin/conf.h"

namespace rdmanet::plugin {

class Attachment;

// Inside the pod netns: MTU, MAC, multi-rail sysctls, addresses, up, routes, announcements;
// the interface as it ends up goes to Attachment::pod_link(). Not recorded: addresses, routes
// and sysctls go with the interface (the kernel drops them when it leaves the pod netns, or
// deletes it with a macvlan child), and the MTU and MAC of a moved netdev are given back by
// bring_netdev_home.
Status configure_pod_interface(Attachment& a);

// The result: prevResult (in a chain) plus the pod interface and the IPAM addresses.
cni::Result build_result(const Attachment& a);

// CHECK: the pod interface is there and up, with the sysctls ADD set and prevResult's MAC,
// addresses and routes.
Status check_pod_interface(const cni::Call& call, const PluginConf& conf, const netns::Netns& pod);

// An IPAM route on the pod interface `ifindex`: without a gateway of its own, the gateway of
// the IPAM addresses of its family, as the reference plugins take it. A route IPAM gave that
// does not parse is kDelegateFailed.
Expected<netns::Route> route_of(const cni::Route& r, int ifindex, const cni::Result& ipam);

// Adds `route`; the same route there already (same destination, metric and table) is kept
// and logged (`whose` says whose it may be), as the kernel's connected route is kept when
// IPAM lists the subnet again.
Status add_route_unless_there(netns::Rtnl& rtnl, const netns::Route& route, const char* whose);

}  // namespace rdmanet::plugin
