// The node's range sets from the blocks it lists. Claims, adoption and release,
// and their races, are in cluster_race_test.cc (against FakeEtcd) and
// tests/binary/ipam_cluster_test.py (against a real etcd cluster).
#include "ipam/cluster.h"

#include <gtest/gtest.h>

#include <fstream>

#include "ipam/testing/fake_etcd.h"
#include "ipam/testing/test_util.h"

namespace rdmanet::ipam {
namespace {

using nlohmann::json;

using testing::cluster_conf;
using testing::ipam_with;

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

}  // namespace
}  // namespace rdmanet::ipam
