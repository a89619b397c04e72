#include "plugin/steps/source_routing.h"

#include <cerrno>

#include "base/json_fields.h"
#include "netns/route.h"
#include "netns/rule.h"
#include "plugin/attachment.h"
#include "plugin/steps/pod_interface.h"

namespace rdmanet::plugin {

using netns::Rtnl;
using nlohmann::json;

namespace {

// A rail's own routing table: numbered after the pod interface's ifindex, which no other
// link of the pod netns has; its rules come before the main table's (32766).
constexpr uint32_t kRailTableBase = 10000;
constexpr uint32_t kRailRulePriority = 3000;

// What the source-routing step records: the rail's table and its "from" rules.
struct SourceRoutingRecord {
  static constexpr StepKind kKind = StepKind::kSourceRouting;
  uint32_t table = 0;
  std::vector<netns::Rule> rules;

  json to_json() const {
    json doc = json::array();
    for (const auto& rule : rules) {
      doc.push_back({{"from", rule.from.str()}, {"priority", rule.priority}});
    }
    return {{"table", table}, {"rules", doc}};
  }
  static Expected<SourceRoutingRecord> from_json(const json& step) {
    SourceRoutingRecord r;
    std::vector<json> rules;
    Fields f(step, "source-routing", ErrorKind::kState);
    f.integer_in("table", 1, 0xffffffffLL, &r.table).object_list("rules", &rules);
    TRY(f.status());
    for (const auto& doc : rules) {
      std::string from;
      uint32_t priority = 0;
      Fields rf(doc, "source-routing.rules[]", ErrorKind::kState);
      rf.required_string("from", &from).integer_in("priority", 0, 0xffffffffLL, &priority);
      TRY(rf.status());
      auto prefix = netns::IpPrefix::parse(from);
      if (!prefix) {
        return Error(ErrorKind::kState, "source-routing.rules[].from: " + prefix.error().msg());
      }
      r.rules.push_back({*prefix, r.table, priority});
    }
    return r;
  }
};

// In the pod netns: the table's connected routes (each address's subnet, from that address),
// the IPAM routes through the rail, then the rules.
Status add_table_and_rules(const Attachment& a, const SourceRoutingRecord& r,
                           const std::vector<netns::IpPrefix>& addresses) {
  const int ifindex = a.pod_link().index;
  TRY_ASSIGN(auto rtnl, Rtnl::open());
  for (const auto& prefix : addresses) {
    netns::Route connected;
    connected.dst = prefix.network();
    connected.ifindex = ifindex;
    connected.src = prefix.addr;
    connected.table = r.table;
    TRY(netns::add_route(rtnl, connected));
  }
  for (const auto& ipam_route : a.ipam_result().routes) {
    TRY_ASSIGN(auto route, route_of(ipam_route, ifindex, a.ipam_result()));
    route.table = r.table;
    // IPAM's route for the rail's own subnet is the connected route just added; a route
    // IPAM lists twice is one route.
    TRY(add_route_unless_there(rtnl, route, "the rail's connected route, or listed twice"));
  }
  for (const auto& rule : r.rules) {
    TRY(netns::add_rule(rtnl, rule));
  }
  return ok_status();
}

}  // namespace

Status add_source_routing(Attachment& a) {
  const cni::Result& ipam = a.ipam_result();
  if (!a.conf().source_routing || ipam.ips.empty()) {
    return ok_status();
  }
  SourceRoutingRecord r;
  r.table = kRailTableBase + static_cast<uint32_t>(a.pod_link().index);
  std::vector<netns::IpPrefix> addresses;
  for (const auto& ip : ipam.ips) {
    auto prefix = netns::IpPrefix::parse(ip.address);
    if (!prefix) {
      return Error(ErrorKind::kDelegateFailed, "IPAM address: " + prefix.error().msg());
    }
    addresses.push_back(*prefix);
    const int host_len = prefix->addr.is_v4() ? 32 : 128;
    r.rules.push_back({{prefix->addr, host_len}, r.table, kRailRulePriority});
  }
  TRY(a.record(r));
  return netns::in_netns(*a.pod(), [&] { return add_table_and_rules(a, r, addresses); });
}

Status remove_source_routing(Attachment& a, const json& recorded) {
  if (!a.pod()) {
    return ok_status();  // the rules went with the netns
  }
  TRY_ASSIGN(SourceRoutingRecord r, SourceRoutingRecord::from_json(recorded));
  return netns::in_netns(*a.pod(), [&]() -> Status {
    TRY_ASSIGN(auto rtnl, Rtnl::open());
    for (const auto& rule : r.rules) {
      if (auto s = netns::delete_rule(rtnl, rule);
          !s && s.error().sys_errno() != ENOENT) {  // already gone: fine
        return s;
      }
    }
    return ok_status();
  });
}

}  // namespace rdmanet::plugin
