#include "ipam/blocks.h"

#include <gtest/gtest.h>

#include "ipam/testing/test_util.h"

namespace rdmanet::ipam {
namespace {

using nlohmann::json;
using testing::cluster_conf;
using testing::ipam_with;

std::vector<std::string> strs(const std::vector<Prefix>& blocks) {
  std::vector<std::string> out;
  out.reserve(blocks.size());
  for (const auto& b : blocks) {
    out.push_back(b.str());
  }
  return out;
}

TEST(Blocks, CutsRangesIntoAlignedBlocksWithinRangeStartAndEnd) {
  auto c = parse_ipam_config(ipam_with(
      cluster_conf({{"blockSize", 28}}),
      json::parse(
          R"([[{"subnet": "10.1.0.0/26", "rangeStart": "10.1.0.20", "rangeEnd": "10.1.0.40"}],
                       [{"subnet": "fd00::/116"}]])")));
  ASSERT_TRUE(c) << c.error().msg();
  EXPECT_EQ(strs(blocks_of(*c, 0)), (std::vector<std::string>{"10.1.0.16/28", "10.1.0.32/28"}));
  auto v6 = blocks_of(*c, 1);
  ASSERT_EQ(v6.size(), 16U);
  EXPECT_EQ(v6.front().str(), "fd00::/120");
  EXPECT_EQ(v6.back().str(), "fd00::f00/120");
  EXPECT_EQ(block_containing(*parse_ip("10.1.0.45"), 28).str(), "10.1.0.32/28");
  EXPECT_EQ(block_len(*c->cluster, true), 120);
}

TEST(Blocks, ClippedKeepsSubnetAndGatewayOfEachRange) {
  auto c = parse_ipam_config(ipam_with(
      cluster_conf({{"blockSize", 28}}),
      json::parse(R"([[{"subnet": "10.1.0.0/28", "rangeStart": "10.1.0.4", "gateway": "10.1.0.1"},
                       {"subnet": "10.1.0.16/28"}]])")));
  ASSERT_TRUE(c) << c.error().msg();
  RangeSet first = clipped(c->range_sets[0], *parse_prefix("10.1.0.0/28"));
  EXPECT_EQ(first.describe(), "10.1.0.4-10.1.0.14");
  EXPECT_EQ(first.where, "ipam.ranges[0]");
  ASSERT_EQ(first.ranges.size(), 1U);
  EXPECT_EQ(first.ranges[0].subnet.str(), "10.1.0.0/28");
  EXPECT_EQ(first.ranges[0].gateway.str(), "10.1.0.1");
  EXPECT_EQ(clipped(c->range_sets[0], *parse_prefix("10.1.0.16/28")).describe(),
            "10.1.0.17-10.1.0.30");
  EXPECT_TRUE(clipped(c->range_sets[0], *parse_prefix("10.1.0.32/28")).ranges.empty());
}

}  // namespace
}  // namespace rdmanet::ipam
