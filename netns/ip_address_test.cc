#include "netns/ip_address.h"

#include <gtest/gtest.h>

#include "netns/hw_address.h"

namespace rdmanet::netns {
namespace {

TEST(IpAddressTest, ParsesAndFormatsBothFamilies) {
  auto v4 = IpPrefix::parse("10.1.2.3/24");
  ASSERT_TRUE(v4.ok()) << v4.error().msg();
  EXPECT_TRUE(v4->addr.is_v4());
  EXPECT_EQ(v4->len, 24);
  EXPECT_EQ(v4->str(), "10.1.2.3/24");
  EXPECT_EQ(v4->network().str(), "10.1.2.0/24");

  auto v6 = IpPrefix::parse("fd00:0::5/64");
  ASSERT_TRUE(v6.ok()) << v6.error().msg();
  EXPECT_EQ(v6->addr.family(), AF_INET6);
  EXPECT_EQ(v6->str(), "fd00::5/64");
  EXPECT_EQ(IpPrefix::parse("fd00::1:2:3:4/63")->network().str(), "fd00::/63");
  EXPECT_EQ(IpPrefix::parse("0.0.0.0/0")->str(), "0.0.0.0/0");
  EXPECT_EQ(IpPrefix::parse("::/0")->str(), "::/0");
  EXPECT_TRUE(IpAddress::parse("fe80::1")->is_link_local());
  EXPECT_FALSE(IpAddress::parse("fd00::1")->is_link_local());
  EXPECT_EQ(*IpAddress::parse("10.0.0.1"), *IpAddress::parse("10.0.0.1"));
}

TEST(IpAddressTest, RejectsGarbageWithTheInputInTheMessage) {
  for (const char* bad : {"", "10.1.2.3", "10.1.2/24", "10.1.2.3/33", "fd00::5/129", "10.1.2.3/",
                          "10.1.2.3/-1", "10.1.2.3/+8", "10.1.2.3/024", " 10.1.2.3/24",
                          "10.1.2.3/24 ", "010.1.2.3/24", "1.2.3.4.5/8", "fe80::1%eth0/64",
                          "hello/8", "10.1.2.3/2a", "::ffff:1.2.3/96", "10.1.2.3//24"}) {
    auto parsed = IpPrefix::parse(bad);
    EXPECT_FALSE(parsed.ok()) << "accepted \"" << bad << "\"";
    if (!parsed.ok()) {
      EXPECT_EQ(parsed.error().kind(), ErrorKind::kInvalidConfig);
      EXPECT_NE(parsed.error().msg().find(std::string("\"") + bad + "\""), std::string::npos)
          << parsed.error().msg();
    }
  }
  EXPECT_FALSE(IpAddress::parse(std::string_view("10.0.0.1\0x", 10)).ok());
  EXPECT_FALSE(IpAddress::parse("10.0.0.1/32").ok());
}

TEST(HwAddressTest, ParsesEthernetAndInfiniband) {
  auto mac = HwAddress::parse("02:00:0A:01:02:03");
  ASSERT_TRUE(mac.ok());
  EXPECT_EQ(mac->str(), "02:00:0a:01:02:03");
  EXPECT_EQ(mac->bytes().size(), 6u);
  std::string ib = "80:00:00:48:fe:80:00:00:00:00:00:00:00:02:c9:03:00:0a:0b:0c";
  EXPECT_EQ(HwAddress::parse(ib)->str(), ib);
  for (const char* bad : {"", "02:00:0a:01:02:03:", "02-00-0a-01-02-03", "0200.0a01.0203",
                          "g2:00:0a:01:02:03", "2:00:0a:01:02:03"}) {
    EXPECT_FALSE(HwAddress::parse(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace rdmanet::netns
