#include "ipam/config.h"

#include <gtest/gtest.h>

namespace rdmanet::ipam {
namespace {

using nlohmann::json;

Expected<IpamConfig> parse(const std::string& text) { return parse_ipam_config(json::parse(text)); }

// The error message of an invalid config, which must be kInvalidConfig (7).
std::string error_of(const std::string& text) {
  auto c = parse(text);
  if (c) {
    return "parsed";
  }
  EXPECT_EQ(c.error().kind(), ErrorKind::kInvalidConfig) << c.error().msg();
  return c.error().msg();
}

TEST(Config, DefaultsLikeHostLocal) {
  auto c = parse(
      R"({"type":"rdmanet-ipam","ranges":[[{"subnet":"10.1.0.0/16"}],[{"subnet":"fd00::/64"}]]})");
  ASSERT_TRUE(c) << c.error().msg();
  EXPECT_EQ(c->data_dir, "/var/lib/cni/networks");
  ASSERT_EQ(c->range_sets.size(), 2U);
  const Range& v4 = c->range_sets[0].ranges[0];
  EXPECT_EQ(v4.start.str(), "10.1.0.1");
  EXPECT_EQ(v4.end.str(), "10.1.255.254");
  EXPECT_EQ(v4.gateway.str(), "10.1.0.1");
  const Range& v6 = c->range_sets[1].ranges[0];
  EXPECT_EQ(v6.start.str(), "fd00::1");
  EXPECT_EQ(v6.end.str(), "fd00::ffff:ffff:ffff:ffff");
  EXPECT_TRUE(c->range_sets[1].v6());
}

TEST(Config, ExplicitFieldsRoutesDnsExclude) {
  auto c = parse(R"({"dataDir":"/d","ranges":[[
      {"subnet":"10.1.0.0/24","rangeStart":"10.1.0.10","rangeEnd":"10.1.0.20","gateway":"10.1.0.254"},
      {"subnet":"10.2.0.0/24"}]],
    "routes":[{"dst":"0.0.0.0/0","gw":"10.1.0.254"},{"dst":"192.168.0.0/16"}],
    "dns":{"nameservers":["10.0.0.53"]},
    "exclude":["10.1.0.12","10.2.0.0/28"]})");
  ASSERT_TRUE(c) << c.error().msg();
  EXPECT_EQ(c->data_dir, "/d");
  ASSERT_EQ(c->range_sets[0].ranges.size(), 2U);
  EXPECT_EQ(c->range_sets[0].describe(), "10.1.0.10-10.1.0.20,10.2.0.1-10.2.0.254");
  EXPECT_EQ(c->range_sets[0].ranges[0].gateway.str(), "10.1.0.254");
  ASSERT_EQ(c->routes.size(), 2U);
  EXPECT_EQ(c->routes[0].gw, "10.1.0.254");
  EXPECT_EQ(c->dns.nameservers, std::vector<std::string>{"10.0.0.53"});
  ASSERT_EQ(c->exclude.size(), 2U);
  EXPECT_EQ(c->exclude[0].len, 32);
}

TEST(Config, LegacyTopLevelRangeComesFirst) {
  auto c = parse(R"({"subnet":"10.9.0.0/24","rangeStart":"10.9.0.5","gateway":"10.9.0.1",
                     "ranges":[[{"subnet":"fd00::/120"}]]})");
  ASSERT_TRUE(c) << c.error().msg();
  ASSERT_EQ(c->range_sets.size(), 2U);
  EXPECT_EQ(c->range_sets[0].ranges[0].start.str(), "10.9.0.5");
  EXPECT_EQ(c->range_sets[0].where, "ipam");
  EXPECT_TRUE(c->range_sets[1].v6());
}

TEST(Config, ErrorsNameTheField) {
  struct Case {
    const char* config;
    const char* message_part;
  };
  const Case cases[] = {
      {R"({})", "ipam.ranges: no IP ranges"},
      {R"({"ranges":[]})", "ipam.ranges: no IP ranges"},
      {R"({"ranges":{}})", "ipam.ranges must be an array"},
      {R"({"ranges":[{"subnet":"10.1.0.0/24"}]})", "ipam.ranges[0] must be a non-empty array"},
      {R"({"ranges":[[]]})", "ipam.ranges[0] must be a non-empty array"},
      {R"({"ranges":[[{"subnet":"10.1.0.0/24"},{}]]})", "ipam.ranges[0][1].subnet is missing"},
      {R"({"ranges":[[{"subnet":"10.1.0/24"}]]})", "ipam.ranges[0][0].subnet is not a valid CIDR"},
      {R"({"ranges":[[{"subnet":"10.1.0.0"}]]})", "ipam.ranges[0][0].subnet is not a valid CIDR"},
      {R"({"ranges":[[{"subnet":42}]]})", "ipam.ranges[0][0].subnet must be a string"},
      {R"({"ranges":[[{"subnet":"10.1.0.1/24"}]]})", "ipam.ranges[0][0].subnet has host bits set"},
      {R"({"ranges":[[{"subnet":"10.1.0.0/31"}]]})",
       "ipam.ranges[0][0].subnet \"10.1.0.0/31\" is too small"},
      {R"({"ranges":[[{"subnet":"10.1.0.0/32"}]]})", "too small"},
      {R"({"ranges":[[{"subnet":"fd00::/127"}]]})", "too small"},
      {R"({"ranges":[[{"subnet":"fd00::/128"}]]})", "too small"},
      {R"({"ranges":[[{"subnet":"10.1.0.0/24","gateway":"10.2.0.1"}]]})",
       "ipam.ranges[0][0].gateway 10.2.0.1 is not in subnet 10.1.0.0/24"},
      {R"({"ranges":[[{"subnet":"10.1.0.0/24","gateway":"nope"}]]})",
       "ipam.ranges[0][0].gateway is not a valid IP address"},
      {R"({"ranges":[[{"subnet":"10.1.0.0/24","rangeStart":"10.1.1.1"}]]})",
       "ipam.ranges[0][0].rangeStart 10.1.1.1 is not in subnet"},
      {R"({"ranges":[[{"subnet":"10.1.0.0/24","rangeEnd":"fd00::1"}]]})",
       "ipam.ranges[0][0].rangeEnd fd00::1 is not in subnet"},
      {R"({"ranges":[[{"subnet":"10.1.0.0/24","rangeStart":"10.1.0.9","rangeEnd":"10.1.0.8"}]]})",
       "ipam.ranges[0][0].rangeStart 10.1.0.9 is after rangeEnd 10.1.0.8"},
      {R"({"ranges":[[{"subnet":"10.1.0.0/24"}],[{"subnet":"10.1.0.0/25"}]]})",
       "ipam.ranges[1][0] overlaps with ipam.ranges[0][0]"},
      {R"({"ranges":[[{"subnet":"10.1.0.0/24"},{"subnet":"10.1.0.0/16"}]]})",
       "ipam.ranges[0][1] overlaps with ipam.ranges[0][0]"},
      {R"({"subnet":"10.1.0.0/24","ranges":[[{"subnet":"10.1.0.128/25"}]]})",
       "ipam.ranges[0][0] overlaps with ipam"},
      {R"({"ranges":[[{"subnet":"10.1.0.0/24"},{"subnet":"fd00::/64"}]]})",
       "ipam.ranges[0][1].subnet mixes address families"},
      {R"({"ranges":[[{"subnet":"10.1.0.0/24"}]],"exclude":["10.1.0.300"]})",
       "ipam.exclude[0] is not a valid CIDR or address"},
      {R"({"ranges":[[{"subnet":"10.1.0.0/24"}]],"exclude":"10.1.0.3"})", "ipam.exclude must be"},
      {R"({"ranges":[[{"subnet":"10.1.0.0/24"}]],"routes":[{"dst":"0.0.0.0"}]})",
       "ipam.routes[0].dst is not a valid CIDR"},
      {R"({"ranges":[[{"subnet":"10.1.0.0/24"}]],"routes":[{"dst":"0.0.0.0/0","gw":"x"}]})",
       "ipam.routes[0].gw is not a valid IP address"},
      {R"({"ranges":[[{"subnet":"10.1.0.0/24"}]],"dataDir":7})", "ipam.dataDir must be a string"},
  };
  for (const auto& c : cases) {
    EXPECT_NE(error_of(c.config).find(c.message_part), std::string::npos)
        << c.config << " -> " << error_of(c.config);
  }
}

TEST(Config, SmallestSubnetsHostLocalAccepts) {
  EXPECT_TRUE(parse(R"({"ranges":[[{"subnet":"10.1.0.0/30"}]]})"));
  EXPECT_TRUE(parse(R"({"ranges":[[{"subnet":"fd00::/126"}]]})"));
  // Adjacent, not overlapping.
  EXPECT_TRUE(parse(R"({"ranges":[[{"subnet":"10.1.0.0/25"},{"subnet":"10.1.0.128/25"}]]})"));
}

}  // namespace
}  // namespace rdmanet::ipam
