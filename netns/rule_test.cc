#include "netns/rule.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <algorithm>

#include "netns/route.h"
#include "netns/testing/test_util.h"

namespace rdmanet::netns {
namespace {

using testing::KernelTest;
using testing::must;

class RuleTest : public KernelTest {};

bool has(const std::vector<Rule>& rules, const Rule& rule) {
  return std::find(rules.begin(), rules.end(), rule) != rules.end();
}

// Against the kernel in a throwaway netns; `ip rule` and `ip route` confirm what it holds.
TEST_F(RuleTest, RulesAreAddedListedAndDeletedInBothFamilies) {
  auto& ns = make_netns();
  Rtnl rtnl = ns.rtnl();
  Rule v4{must(IpPrefix::parse("10.9.0.2/32")), 10007, 3000};
  Rule v6{must(IpPrefix::parse("fd00:9::2/128")), 10007, 3000};
  ASSERT_OK(add_rule(rtnl, v4));
  ASSERT_OK(add_rule(rtnl, v6));
  EXPECT_TRUE(has(must(list_rules(rtnl, AF_INET)), v4));
  EXPECT_TRUE(has(must(list_rules(rtnl, AF_INET6)), v6));
  EXPECT_NE(ns.ip("rule show").find("3000:\tfrom 10.9.0.2 lookup 10007"), std::string::npos)
      << ns.ip("rule show");

  auto again = add_rule(rtnl, v4);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().sys_errno(), EEXIST);

  ASSERT_OK(delete_rule(rtnl, v4));
  EXPECT_FALSE(has(must(list_rules(rtnl, AF_INET)), v4));
  auto gone = delete_rule(rtnl, v4);
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.error().sys_errno(), ENOENT) << gone.error().msg();
  ASSERT_OK(delete_rule(rtnl, v6));
}

TEST_F(RuleTest, ARouteCarriesItsPreferredSource) {
  auto& ns = make_netns();
  make_veth(ns, "net1", ns, "peer1");
  Rtnl rtnl = ns.rtnl();
  LinkInfo link = must(find_link_by_name(rtnl, "net1"));
  ASSERT_OK(set_link_up(rtnl, link));
  ns.ip("addr add 10.9.0.2/24 dev net1");
  Route r;
  r.dst = must(IpPrefix::parse("10.9.0.0/24"));
  r.ifindex = link.index;
  r.src = must(IpAddress::parse("10.9.0.2"));
  r.table = 10007;
  ASSERT_OK(add_route(rtnl, r));
  auto routes = must(list_routes(rtnl, AF_INET, 10007));
  ASSERT_EQ(routes.size(), 1u);
  EXPECT_EQ(routes[0].src, r.src);
  EXPECT_NE(ns.ip("route show table 10007").find("10.9.0.0/24 dev net1 scope link src 10.9.0.2"),
            std::string::npos)
      << ns.ip("route show table 10007");
}

}  // namespace
}  // namespace rdmanet::netns
