#include "netns/address.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "netns/route.h"
#include "netns/testing/test_util.h"

namespace rdmanet::netns {
namespace {

using testing::KernelTest;
using testing::must;

class AddressTest : public KernelTest {
 protected:
  void SetUp() override {
    KernelTest::SetUp();
    if (HasFatalFailure()) {
      return;
    }
    ns_ = &make_netns();
    make_veth(*ns_, "net1", *ns_, "peer1");
    rtnl_.emplace(ns_->rtnl());
    link_ = must(find_link_by_name(*rtnl_, "net1"));
    ASSERT_OK(set_link_up(*rtnl_, link_));
  }

  bool has(const std::vector<IpPrefix>& list, const std::string& prefix) {
    return std::find(list.begin(), list.end(), must(IpPrefix::parse(prefix))) != list.end();
  }

  testing::TestNetns* ns_ = nullptr;
  std::optional<Rtnl> rtnl_;
  LinkInfo link_;
};

TEST_F(AddressTest, AddsListsAndDeletesBothFamilies) {
  auto v4 = must(IpPrefix::parse("10.1.2.3/24"));
  auto v6 = must(IpPrefix::parse("fd00:1::3/64"));
  ASSERT_OK(add_address(*rtnl_, link_, v4));
  ASSERT_OK(add_address(*rtnl_, link_, v6, {.no_dad = true}));

  auto all = must(list_addresses(*rtnl_, link_));
  EXPECT_TRUE(has(all, "10.1.2.3/24"));
  EXPECT_TRUE(has(all, "fd00:1::3/64"));
  auto only_v4 = must(list_addresses(*rtnl_, link_, AF_INET));
  EXPECT_EQ(only_v4.size(), 1u);
  std::string shown = ns_->ip("addr show net1");
  EXPECT_NE(shown.find("inet 10.1.2.3/24"), std::string::npos) << shown;
  EXPECT_NE(shown.find("inet6 fd00:1::3/64"), std::string::npos) << shown;
  EXPECT_EQ(shown.find("tentative"), std::string::npos) << shown;
  // The peer has none of them.
  EXPECT_TRUE(
      must(list_addresses(*rtnl_, must(find_link_by_name(*rtnl_, "peer1")), AF_INET)).empty());

  auto dup = add_address(*rtnl_, link_, v4);
  ASSERT_FALSE(dup.ok());
  // Followed by the kernel's extended ack, when it gives one.
  EXPECT_EQ(dup.error().msg().find("add address 10.1.2.3/24 on link \"net1\": File exists"), 0u)
      << dup.error().msg();

  ASSERT_OK(delete_address(*rtnl_, link_, v4));
  ASSERT_OK(delete_address(*rtnl_, link_, v6));
  all = must(list_addresses(*rtnl_, link_));
  EXPECT_FALSE(has(all, "10.1.2.3/24"));
  EXPECT_FALSE(has(all, "fd00:1::3/64"));
  EXPECT_FALSE(delete_address(*rtnl_, link_, v4).ok());
}

TEST_F(AddressTest, AddsListsAndDeletesRoutes) {
  ASSERT_OK(add_address(*rtnl_, link_, must(IpPrefix::parse("10.1.2.3/24"))));
  ASSERT_OK(add_address(*rtnl_, link_, must(IpPrefix::parse("fd00:1::3/64")), {.no_dad = true}));

  Route to_net;
  to_net.dst = must(IpPrefix::parse("10.20.0.0/16"));
  to_net.gateway = must(IpAddress::parse("10.1.2.254"));
  to_net.ifindex = link_.index;
  to_net.metric = 100;
  to_net.mtu = 1400;
  ASSERT_OK(add_route(*rtnl_, to_net));

  Route dflt;
  dflt.dst = must(IpPrefix::parse("0.0.0.0/0"));
  dflt.gateway = must(IpAddress::parse("10.1.2.1"));
  dflt.ifindex = link_.index;
  ASSERT_OK(add_route(*rtnl_, dflt));

  Route direct;  // on-link, no gateway: link scope
  direct.dst = must(IpPrefix::parse("192.168.50.0/24"));
  direct.ifindex = link_.index;
  direct.table = 100;
  ASSERT_OK(add_route(*rtnl_, direct));

  Route v6;
  v6.dst = must(IpPrefix::parse("fd00:2::/48"));
  v6.gateway = must(IpAddress::parse("fd00:1::1"));
  v6.ifindex = link_.index;
  v6.metric = 50;
  ASSERT_OK(add_route(*rtnl_, v6));

  auto routes = must(list_routes(*rtnl_, AF_INET));
  auto find = [&](const std::vector<Route>& list, const std::string& dst) -> const Route* {
    for (const auto& r : list) {
      if (r.dst.str() == dst) {
        return &r;
      }
    }
    return nullptr;
  };
  const Route* got = find(routes, "10.20.0.0/16");
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->gateway->str(), "10.1.2.254");
  EXPECT_EQ(got->ifindex, link_.index);
  EXPECT_EQ(got->metric, 100u);
  EXPECT_EQ(got->mtu, 1400u);
  ASSERT_NE(find(routes, "0.0.0.0/0"), nullptr);
  EXPECT_NE(find(routes, "10.1.2.0/24"), nullptr) << "the kernel's connected route";
  EXPECT_EQ(find(routes, "192.168.50.0/24"), nullptr) << "lives in table 100";
  auto table100 = must(list_routes(*rtnl_, AF_INET, 100));
  ASSERT_NE(find(table100, "192.168.50.0/24"), nullptr);
  EXPECT_EQ(find(table100, "192.168.50.0/24")->scope, RT_SCOPE_LINK);
  auto routes6 = must(list_routes(*rtnl_, AF_INET6));
  ASSERT_NE(find(routes6, "fd00:2::/48"), nullptr);
  EXPECT_EQ(find(routes6, "fd00:2::/48")->gateway->str(), "fd00:1::1");

  std::string shown = ns_->ip("route show");
  EXPECT_NE(shown.find("10.20.0.0/16 via 10.1.2.254 dev net1 metric 100"), std::string::npos)
      << shown;
  EXPECT_NE(shown.find("mtu 1400"), std::string::npos) << shown;

  auto unreachable = to_net;
  unreachable.dst = must(IpPrefix::parse("10.30.0.0/16"));
  unreachable.gateway = must(IpAddress::parse("10.99.0.1"));
  auto bad = add_route(*rtnl_, unreachable);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().msg().find("add route 10.30.0.0/16 via 10.99.0.1"), std::string::npos)
      << bad.error().msg();

  ASSERT_OK(delete_route(*rtnl_, to_net));
  ASSERT_OK(delete_route(*rtnl_, v6));
  EXPECT_EQ(find(must(list_routes(*rtnl_, AF_INET)), "10.20.0.0/16"), nullptr);
  EXPECT_EQ(find(must(list_routes(*rtnl_, AF_INET6)), "fd00:2::/48"), nullptr);
}

}  // namespace
}  // namespace rdmanet::netns
