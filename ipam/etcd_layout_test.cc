#include "ipam/etcd_layout.h"

#include <gtest/gtest.h>

namespace rdmanet::ipam {
namespace {

ClusterConfig config(const std::string& prefix = "/rdmanet/ipam") {
  ClusterConfig c;
  c.prefix = prefix;
  return c;
}

KeyValue kv(const std::string& key, const std::string& value, int64_t rev) {
  return {key, value, rev, rev};
}

TEST(EtcdLayout, KeysOfANetwork) {
  auto c = config();
  EXPECT_EQ(network_prefix(c, "rail0"), "/rdmanet/ipam/rail0/");
  EXPECT_EQ(network_prefix(config("/p/"), "rail0"), "/p/rail0/");
  EXPECT_EQ(block_sizes_key(c, "rail0"), "/rdmanet/ipam/rail0/blockSizes");
  Prefix v6 = *parse_prefix("fd00::f00/120");
  std::string key = block_key(c, "rail0", v6);
  EXPECT_EQ(key, "/rdmanet/ipam/rail0/blocks/fd00::f00_120");
  std::string blocks = blocks_prefix(c, "rail0");
  EXPECT_EQ(block_of_key(key, blocks), v6);
  EXPECT_EQ(block_of_key(blocks + "10.1.0.64_26", blocks)->str(), "10.1.0.64/26");
  for (const std::string& other : {block_sizes_key(c, "rail0"), blocks + "10.1.0.65_26",
                                   blocks + "junk", std::string("/rdmanet/ipam/rail1/blocks/x")}) {
    EXPECT_FALSE(block_of_key(other, blocks)) << other;
  }
}

TEST(EtcdLayout, BlockValues) {
  std::string claimed_at;
  std::string value = block_value("n1");
  EXPECT_EQ(block_owner(value, &claimed_at), "n1");
  EXPECT_EQ(claimed_at.size(), 20U) << claimed_at;  // 2026-12-03T13:52:51Z
  EXPECT_EQ(block_owner("not json"), "");
  EXPECT_EQ(block_owner(R"({"node": 7})"), "");
  ClusterConfig c;
  c.block_len_v4 = 28;
  EXPECT_EQ(block_sizes_value(c).dump(), R"({"v4":28,"v6":120})");
}

TEST(EtcdLayout, BlocksOfARangeAndTheirOverlaps) {
  std::string p = "/n/blocks/";
  EtcdBlocks etcd(
      {kv(p + "10.1.0.0_25", block_value("a"), 5), kv(p + "10.1.1.64_26", block_value("b"), 6),
       kv(p + "10.1.1.128_26", "?", 7), kv("/n/blockSizes", R"({"v4":26,"v6":120})", 2)},
      p);
  const EtcdBlock* a = etcd.find(*parse_prefix("10.1.0.0/25"));
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->owner, "a");
  EXPECT_EQ(a->mod_revision, 5);
  EXPECT_EQ(etcd.find(*parse_prefix("10.1.0.0/26")), nullptr);  // same start, other size
  EXPECT_EQ(etcd.owners(), 3U);                                 // a, b, and unreadable
  // Inside a larger block, holding a smaller one, or the same: an address with two owners.
  for (const char* taken : {"10.1.0.64/26", "10.1.0.0/24", "10.1.1.0/24", "10.1.1.64/26"}) {
    EXPECT_TRUE(etcd.overlaps(*parse_prefix(taken))) << taken;
  }
  for (const char* free : {"10.1.0.128/26", "10.1.1.0/26", "10.1.2.0/24"}) {
    EXPECT_FALSE(etcd.overlaps(*parse_prefix(free))) << free;
  }
}

}  // namespace
}  // namespace rdmanet::ipam
