#include "ipam/pool.h"

#include <gtest/gtest.h>

namespace rdmanet::ipam {
namespace {

IpamConfig config(const std::string& text) {
  auto c = parse_ipam_config(nlohmann::json::parse(text));
  EXPECT_TRUE(c) << c.error().msg();
  return *c;
}

Pool pool_of(const std::string& text) {
  IpamConfig c = config(text);
  return Pool(c.range_sets[0], c.exclude);
}

TEST(Bitmap, FindsClearBitsWithWrapAndPartialWords) {
  Bitmap b(130);
  EXPECT_EQ(b.find_clear_from(0), 0U);
  b.set_range(0, 129);
  EXPECT_EQ(b.count(), 130U);
  EXPECT_FALSE(b.find_clear_from(0));
  EXPECT_FALSE(b.find_clear_from(129));
  b.reset(3);
  EXPECT_EQ(b.find_clear_from(4), 3U);  // wraps
  EXPECT_EQ(b.find_clear_from(3), 3U);
  b.reset(127);
  EXPECT_EQ(b.find_clear_from(4), 127U);
  EXPECT_EQ(b.find_clear_from(128), 3U);
  b.reset(129);
  EXPECT_EQ(b.find_clear_from(128), 129U);
  EXPECT_EQ(b.find_clear_from(500), 127U);  // from is taken modulo size (110)
  EXPECT_FALSE(Bitmap(0).find_clear_from(0));
}

TEST(Pool, OrdinalsSpanTheRangesOfASet) {
  Pool p = pool_of(
      R"({"ranges":[[{"subnet":"10.1.0.0/24","rangeStart":"10.1.0.10","rangeEnd":"10.1.0.12"},
                                   {"subnet":"10.2.0.0/30"}]]})");
  ASSERT_EQ(p.size(), 5U);  // .10-.12, then 10.2.0.1-10.2.0.2
  EXPECT_EQ(p.address(0).str(), "10.1.0.10");
  EXPECT_EQ(p.address(2).str(), "10.1.0.12");
  EXPECT_EQ(p.address(3).str(), "10.2.0.1");
  EXPECT_EQ(p.address(4).str(), "10.2.0.2");
  EXPECT_EQ(p.ordinal(*parse_ip("10.2.0.2")), 4U);
  EXPECT_FALSE(p.ordinal(*parse_ip("10.1.0.13")));
  EXPECT_EQ(p.range_at(4).subnet.str(), "10.2.0.0/30");
  // 10.2.0.1 is that range's default gateway.
  EXPECT_TRUE(p.reserved(3));
  EXPECT_NE(p.reserved_reason(*parse_ip("10.2.0.1")).find("gateway"), std::string::npos);
  EXPECT_EQ(p.reserved_reason(*parse_ip("10.1.0.11")), "");
}

TEST(Pool, ReservesNetworkBroadcastGatewayAndExcludes) {
  Pool p =
      pool_of(R"({"ranges":[[{"subnet":"10.1.0.0/28","rangeStart":"10.1.0.0","rangeEnd":"10.1.0.15",
                                    "gateway":"10.1.0.5"}]],
                       "exclude":["10.1.0.8/30","10.1.0.2","fd00::/64"]})");
  std::vector<std::string> free;
  for (u128 o = 0; o < p.size(); ++o) {
    if (!p.reserved(o)) {
      free.push_back(p.address(o).str());
    }
  }
  EXPECT_EQ(free, (std::vector<std::string>{"10.1.0.1", "10.1.0.3", "10.1.0.4", "10.1.0.6",
                                            "10.1.0.7", "10.1.0.12", "10.1.0.13", "10.1.0.14"}));
  EXPECT_EQ(p.next_unreserved(8), 12U);
  EXPECT_FALSE(p.next_unreserved(15));
  EXPECT_EQ(p.reserved_mask().count(), 8U);
  EXPECT_NE(p.reserved_reason(*parse_ip("10.1.0.9")).find("excluded by 10.1.0.8/30"),
            std::string::npos);
  EXPECT_NE(p.reserved_reason(*parse_ip("10.1.0.15")).find("broadcast"), std::string::npos);
}

TEST(Pool, NextFitSkipsTakenAndReserved) {
  Pool p = pool_of(R"({"ranges":[[{"subnet":"10.1.0.0/29"}]]})");  // .1 (gw) .. .6
  ASSERT_EQ(p.size(), 6U);
  Bitmap taken(6);
  EXPECT_EQ(p.address(*next_free(p, taken, 0)).str(), "10.1.0.2");
  taken.set(1);
  taken.set(2);
  EXPECT_EQ(p.address(*next_free(p, taken, 1)).str(), "10.1.0.4");
  EXPECT_EQ(p.address(*next_free(p, taken, 5)).str(), "10.1.0.6");
  taken.set(5);
  EXPECT_EQ(p.address(*next_free(p, taken, 5)).str(), "10.1.0.4");  // wraps
  taken.set_range(3, 4);
  EXPECT_FALSE(next_free(p, taken, 0));
}

TEST(Pool, HugeV6PoolsHaveNoBitmap) {
  Pool p = pool_of(R"({"ranges":[[{"subnet":"fd00::/64"}]],"exclude":["fd00::/120"]})");
  EXPECT_FALSE(p.has_bitmap());
  EXPECT_EQ(p.size(), (u128{1} << 64) - 1);
  EXPECT_EQ(p.address(*p.next_unreserved(0)).str(), "fd00::100");
  EXPECT_TRUE(pool_of(R"({"ranges":[[{"subnet":"fd00::/108"}]]})").has_bitmap());
}

TEST(Pool, FingerprintFollowsTheConfig) {
  auto a = pool_of(R"({"ranges":[[{"subnet":"10.1.0.0/24"}]]})").fingerprint();
  EXPECT_EQ(a, pool_of(R"({"ranges":[[{"subnet":"10.1.0.0/24"}]]})").fingerprint());
  EXPECT_NE(
      a,
      pool_of(R"({"ranges":[[{"subnet":"10.1.0.0/24","rangeEnd":"10.1.0.100"}]]})").fingerprint());
  EXPECT_NE(
      a,
      pool_of(R"({"ranges":[[{"subnet":"10.1.0.0/24"}]],"exclude":["10.1.0.9"]})").fingerprint());
}

}  // namespace
}  // namespace rdmanet::ipam
