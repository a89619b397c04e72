// Cluster mode's pure parts: config checks, cutting ranges into blocks, the
// node's range sets from its blocks, and the node name file. Claims, release
// and reclaim run against a real etcd cluster in tests/ipam_cluster_test.py.
#include "ipam/cluster.h"

#include <gtest/gtest.h>

#include <fstream>

#include "ipam/fake_etcd.h"
#include "ipam/test_util.h"

namespace rdmanet::ipam {
namespace {

using nlohmann::json;

json ipam_with(const json& cluster, const json& ranges) {
  return {{"type", "rdmanet-ipam"}, {"ranges", ranges}, {"cluster", cluster}};
}

json cluster_conf(json extra = json::object()) {
  json c = {{"blockSize", 26}, {"etcd", {{"endpoints", {"https://10.0.0.1:2379"}}}}};
  c.update(extra);
  return c;
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

TEST(Blocks, CutsRangesIntoAlignedBlocksWithinRangeStartAndEnd) {
  auto c = parse_ipam_config(ipam_with(
      cluster_conf({{"blockSize", 28}}),
      json::parse(
          R"([[{"subnet": "10.1.0.0/26", "rangeStart": "10.1.0.20", "rangeEnd": "10.1.0.40"}],
                       [{"subnet": "fd00::/116"}]])")));
  ASSERT_TRUE(c) << c.error().msg();
  std::vector<std::string> v4;
  for (const auto& b : blocks_of(*c, 0)) {
    v4.push_back(b.str());
  }
  EXPECT_EQ(v4, (std::vector<std::string>{"10.1.0.16/28", "10.1.0.32/28"}));
  auto v6 = blocks_of(*c, 1);
  ASSERT_EQ(v6.size(), 16U);
  EXPECT_EQ(v6.front().str(), "fd00::/120");
  EXPECT_EQ(v6.back().str(), "fd00::f00/120");
  EXPECT_EQ(block_key(*c->cluster, "rail0", v6.back()), "/rdmanet/ipam/rail0/blocks/fd00::f00_120");
}

class HeldBlocks : public ::testing::Test {
 protected:
  void write(const std::string& text) { std::ofstream(dir_.path() + "/blocks.json") << text; }
  IpamConfig config() {
    auto c = parse_ipam_config(ipam_with(
        cluster_conf({{"blockSize", 28}}),
        json::parse(
            R"([[{"subnet": "10.1.0.0/24", "gateway": "10.1.0.1", "rangeEnd": "10.1.0.20"}]])")));
    EXPECT_TRUE(c) << c.error().msg();
    return *c;
  }
  testing::TempDir dir_;
  FakeEtcd etcd_;
};

TEST_F(HeldBlocks, TheNodesRangesAreItsBlocksClippedToTheConfig) {
  write(R"({"node": "n1", "blocks": [{"block": "10.1.0.16/28", "revision": 9},
                                     {"block": "10.1.0.0/28", "revision": 8}]})");
  ClusterBlocks blocks(config(), "rail0", "n1", etcd_);
  auto store = Store::open(dir_.path());
  ASSERT_TRUE(store) << store.error().msg();
  auto sets = blocks.held(*store);
  ASSERT_TRUE(sets) << sets.error().msg();
  ASSERT_EQ(sets->size(), 1U);
  EXPECT_EQ((*sets)[0].describe(), "10.1.0.1-10.1.0.15,10.1.0.16-10.1.0.20");
  for (const auto& r : (*sets)[0].ranges) {
    EXPECT_EQ(r.subnet.str(), "10.1.0.0/24");  // results keep the network's prefix
    EXPECT_EQ(r.gateway.str(), "10.1.0.1");
  }
}

TEST_F(HeldBlocks, NoFileIsNoBlockAndAnotherNodesFileIsRefused) {
  ClusterBlocks blocks(config(), "rail0", "n1", etcd_);
  {
    auto store = Store::open(dir_.path());
    ASSERT_TRUE(store);
    auto sets = blocks.held(*store);
    ASSERT_TRUE(sets);
    EXPECT_TRUE((*sets)[0].ranges.empty());
  }
  write(R"({"node": "n2", "blocks": []})");
  auto store = Store::open(dir_.path());
  ASSERT_TRUE(store);
  auto sets = blocks.held(*store);
  ASSERT_FALSE(sets);
  EXPECT_EQ(sets.error().kind(), ErrorKind::kState);
  EXPECT_NE(sets.error().msg().find("node n2, this node is n1"), std::string::npos);
}

TEST(NodeName, ReadFromTheDaemonSetsFile) {
  testing::TempDir dir;
  std::string file = dir.path() + "/node-name";
  auto missing = read_node_name(file);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().kind(), ErrorKind::kTryAgainLater);
  EXPECT_NE(missing.error().msg().find(file), std::string::npos);
  std::ofstream(file) << "gpu-node-7.example\n";
  auto name = read_node_name(file);
  ASSERT_TRUE(name) << name.error().msg();
  EXPECT_EQ(*name, "gpu-node-7.example");
  for (const char* bad : {"", "Upper", "-x", "a/b", "x_y", "a..\n\nb"}) {
    std::ofstream(file, std::ios::trunc) << bad;
    auto r = read_node_name(file);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().kind(), ErrorKind::kInvalidConfig);
  }
}

}  // namespace
}  // namespace rdmanet::ipam
