#include "ipam/config.h"

#include <gtest/gtest.h>

#include "ipam/testing/test_util.h"

namespace rdmanet::ipam {
namespace {

using nlohmann::json;
using testing::cluster_conf;
using testing::ipam_with;

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

TEST(ClusterConfig, DefaultsAndFields) {
  auto c =
      parse_ipam_config(ipam_with(cluster_conf(), json::parse(R"([[{"subnet": "10.1.0.0/16"}]])")));
  ASSERT_TRUE(c) << c.error().msg();
  ASSERT_TRUE(c->cluster);
  EXPECT_EQ(c->cluster->block_len_v4, 26);
  EXPECT_EQ(c->cluster->release_after.count(), 600);
  EXPECT_EQ(c->cluster->node_name_file, kDefaultNodeNameFile);
  EXPECT_EQ(c->cluster->prefix, "/rdmanet/ipam");
  ASSERT_EQ(c->cluster->endpoints.size(), 1U);
  EXPECT_TRUE(c->cluster->endpoints[0].tls);
  // Without "cluster": node mode.
  auto node = parse_ipam_config(json::parse(R"({"ranges": [[{"subnet": "10.1.0.0/16"}]]})"));
  ASSERT_TRUE(node);
  EXPECT_FALSE(node->cluster);
}

TEST(ClusterConfig, ErrorsNameTheField) {
  json v4 = json::parse(R"([[{"subnet": "10.1.0.0/16"}]])");
  struct Case {
    json cluster;
    const char* field;
  } cases[] = {
      {cluster_conf({{"blockSize", 8}}), "ipam.cluster.blockSize"},
      {cluster_conf({{"blockSize", 31}}), "ipam.cluster.blockSize"},
      {cluster_conf({{"blockSize", "26"}}), "ipam.cluster.blockSize"},
      {cluster_conf({{"releaseAfter", -5}}), "ipam.cluster.releaseAfter"},
      {cluster_conf({{"nodeNameFile", "node-name"}}), "ipam.cluster.nodeNameFile"},
      {json{{"blockSize", 26}}, "ipam.cluster.etcd"},
      {cluster_conf({{"etcd", {{"endpoints", json::array()}}}}), "ipam.cluster.etcd.endpoints"},
      {cluster_conf({{"etcd", {{"endpoints", {"10.0.0.1:2379"}}}}}),
       "ipam.cluster.etcd.endpoints[0]"},
      {cluster_conf({{"etcd", {{"endpoints", {"http://a:1"}}, {"prefix", "x"}}}}),
       "ipam.cluster.etcd.prefix"},
      {cluster_conf({{"etcd", {{"endpoints", {"http://a:1"}}, {"timeout", 0}}}}),
       "ipam.cluster.etcd.timeout"},
      {cluster_conf({{"etcd", {{"endpoints", {"http://a:1"}}, {"timeout", 61}}}}),
       "ipam.cluster.etcd.timeout"},
      {cluster_conf(
           {{"etcd", {{"endpoints", {"https://a:1", "http://b:1"}}, {"tls", {{"ca", "/ca"}}}}}}),
       "ipam.cluster.etcd.tls"},
      {cluster_conf({{"etcd", {{"endpoints", {"http://a:1"}}, {"tls", {{"key", "/k"}}}}}}),
       "ipam.cluster.etcd.tls.cert"},
      {cluster_conf({{"etcd", {{"endpoints", {"http://a:1"}}, {"tls", {{"ca", "ca.pem"}}}}}}),
       "ipam.cluster.etcd.tls.ca"},
  };
  for (const auto& c : cases) {
    auto parsed = parse_ipam_config(ipam_with(c.cluster, v4));
    ASSERT_FALSE(parsed) << c.cluster.dump();
    EXPECT_EQ(parsed.error().kind(), ErrorKind::kInvalidConfig);
    EXPECT_NE(parsed.error().msg().find(c.field), std::string::npos) << parsed.error().msg();
  }
  // 2^14 blocks are fine; more than 2^16 in one range (v6 /64 in /120 blocks) are not.
  EXPECT_TRUE(parse_ipam_config(ipam_with(cluster_conf({{"blockSize", 30}}), v4)));
  auto v6 =
      parse_ipam_config(ipam_with(cluster_conf(), json::parse(R"([[{"subnet": "fd00::/64"}]])")));
  ASSERT_FALSE(v6);
  EXPECT_NE(v6.error().msg().find("2^56 blocks (at most 2^16)"), std::string::npos)
      << v6.error().msg();
}

}  // namespace
}  // namespace rdmanet::ipam
