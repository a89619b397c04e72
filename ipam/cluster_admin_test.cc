#include "ipam/cluster_admin.h"

#include <gtest/gtest.h>

#include "ipam/etcd_layout.h"
#include "ipam/testing/fake_etcd.h"
#include "ipam/testing/test_util.h"

namespace rdmanet::ipam {
namespace {

class ClusterAdmin : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = parse_ipam_config(testing::ipam_with(
        testing::cluster_conf(), nlohmann::json::parse(R"([[{"subnet": "10.1.0.0/24"}]])")));
    ASSERT_TRUE(c) << c.error().msg();
    config_ = *c;
  }
  int64_t give(const char* block, const std::string& node) {
    return etcd_.put(key(block), block_value(node));
  }
  std::string key(const char* block) {
    return block_key(*config_.cluster, "rail0", *parse_prefix(block));
  }
  IpamConfig config_;
  FakeEtcd etcd_;
};

TEST_F(ClusterAdmin, ListsBlocksInAddressOrderWithOwners) {
  give("10.1.0.192/26", "b");
  give("10.1.0.64/26", "a");
  etcd_.put(key("10.1.0.0/26"), "unreadable");
  etcd_.put(block_sizes_key(*config_.cluster, "rail0"), R"({"v4":26,"v6":120})");
  auto owners = list_block_owners(config_, "rail0", etcd_);
  ASSERT_TRUE(owners) << owners.error().msg();
  ASSERT_EQ(owners->size(), 3U);
  EXPECT_EQ((*owners)[0].block.str(), "10.1.0.0/26");
  EXPECT_EQ((*owners)[0].node, "");
  EXPECT_EQ((*owners)[1].node, "a");
  EXPECT_FALSE((*owners)[1].claimed_at.empty());
  EXPECT_EQ((*owners)[2].block.str(), "10.1.0.192/26");
}

// The node rewrites a block between the operator's read and delete (an adoption):
// the delete compares the revision read and leaves the block to its node.
TEST_F(ClusterAdmin, ReclaimDeletesOnlyTheNodesBlocksUnchangedSinceRead) {
  give("10.1.0.0/26", "gone");
  give("10.1.0.64/26", "gone");
  give("10.1.0.128/26", "other");
  etcd_.before_each_call([&](const FakeEtcd::Call& call) {
    if (call.is_txn && call.touches("10.1.0.64_26")) {
      give("10.1.0.64/26", "gone");
    }
  });
  std::vector<std::string> printed;
  auto gone = reclaim_node_blocks(config_, "rail0", "gone", etcd_,
                                  [&](const Prefix& b) { printed.push_back(b.str()); });
  ASSERT_TRUE(gone) << gone.error().msg();
  ASSERT_EQ(gone->size(), 1U);
  EXPECT_EQ((*gone)[0].str(), "10.1.0.0/26");
  EXPECT_EQ(printed, std::vector<std::string>{"10.1.0.0/26"});
  EXPECT_FALSE(etcd_.get(key("10.1.0.0/26")));
  EXPECT_TRUE(etcd_.get(key("10.1.0.64/26")));
  EXPECT_TRUE(etcd_.get(key("10.1.0.128/26")));
  // etcd unreachable: an error (11), nothing deleted.
  etcd_.inject(FakeEtcd::Fault::kUnavailable, "", true);
  auto down = reclaim_node_blocks(config_, "rail0", "other", etcd_);
  ASSERT_FALSE(down);
  EXPECT_EQ(down.error().kind(), ErrorKind::kTryAgainLater);
  EXPECT_TRUE(etcd_.get(key("10.1.0.128/26")));
}

}  // namespace
}  // namespace rdmanet::ipam
