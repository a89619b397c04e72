#include "ipam/ip.h"

#include <gtest/gtest.h>

namespace rdmanet::ipam {
namespace {

TEST(Ip, ParsesAndFormatsBothFamilies) {
  auto v4 = parse_ip("10.1.2.3");
  ASSERT_TRUE(v4);
  EXPECT_FALSE(v4->v6);
  EXPECT_EQ(v4->value, (u128{10} << 24) | (1 << 16) | (2 << 8) | 3);
  EXPECT_EQ(v4->str(), "10.1.2.3");
  auto v6 = parse_ip("fd00::0:1");
  ASSERT_TRUE(v6);
  EXPECT_TRUE(v6->v6);
  EXPECT_EQ(v6->str(), "fd00::1");
  EXPECT_EQ(add(*v6, 0xffff).str(), "fd00::1:0");
  EXPECT_EQ(parse_ip("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")->value, ~u128{0});
}

TEST(Ip, RejectsGarbage) {
  for (const char* bad :
       {"", "10.1.2", "10.1.2.256", "10.1.2.3/24", "fd00::g", "::1%eth0", " 1.2.3.4"}) {
    EXPECT_FALSE(parse_ip(bad)) << bad;
  }
  for (const char* bad : {"10.1.0.0", "10.1.0.0/33", "10.1.0.0/", "10.1.0.0/-1", "fd00::/129",
                          "10.1.0.0/1x", "x/8"}) {
    EXPECT_FALSE(parse_prefix(bad)) << bad;
  }
}

TEST(Ip, PrefixArithmetic) {
  auto p = parse_prefix("10.1.2.3/16");
  ASSERT_TRUE(p);
  EXPECT_TRUE(p->has_host_bits());
  EXPECT_EQ(p->network().str(), "10.1.0.0");
  EXPECT_EQ(p->last().str(), "10.1.255.255");
  EXPECT_EQ(p->str(), "10.1.0.0/16");
  EXPECT_TRUE(p->contains(*parse_ip("10.1.200.1")));
  EXPECT_FALSE(p->contains(*parse_ip("10.2.0.1")));
  EXPECT_FALSE(p->contains(*parse_ip("::a01:1")));  // same bits, other family

  auto v6 = parse_prefix("fd00:1::/64");
  ASSERT_TRUE(v6);
  EXPECT_FALSE(v6->has_host_bits());
  EXPECT_EQ(v6->last().str(), "fd00:1::ffff:ffff:ffff:ffff");
  EXPECT_EQ(parse_prefix("0.0.0.0/0")->last().str(), "255.255.255.255");
  EXPECT_EQ(parse_prefix("::/0")->last().value, ~u128{0});
  EXPECT_EQ(parse_ip_or_prefix("10.0.0.7")->len, 32);
  EXPECT_EQ(parse_ip_or_prefix("fd00::7")->len, 128);
  EXPECT_EQ(u128_str(u128{1} << 64), "18446744073709551616");
}

}  // namespace
}  // namespace rdmanet::ipam
