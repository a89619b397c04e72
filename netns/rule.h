// Policy routing rules (`ip rule`) over rtnetlink, in the namespace of the given Rtnl socket.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/error.h"
#include "netns/ip_address.h"
#include "netns/rtnl.h"

namespace rdmanet::netns {

// "from <prefix> lookup <table>" at a priority.
struct Rule {
  IpPrefix from;
  uint32_t table = 0;
  uint32_t priority = 0;

  bool operator==(const Rule&) const = default;
  std::string str() const;  // "from 10.0.0.2/32 lookup 10005 priority 1000"
};

// EEXIST (kernel error) when the very same rule is there.
Status add_rule(Rtnl& rtnl, const Rule& rule);
// ENOENT (kDeviceNotFound) when there is no such rule.
Status delete_rule(Rtnl& rtnl, const Rule& rule);
// The rules of family (AF_INET or AF_INET6) that have a source prefix and look up a table.
Expected<std::vector<Rule>> list_rules(Rtnl& rtnl, int family);

}  // namespace rdmanet::netns
