#include "netns/sysctl.h"

#include <gtest/gtest.h>

#include "netns/testing/test_util.h"

namespace rdmanet::netns {
namespace {

using testing::KernelTest;
using testing::must;

class SysctlTest : public KernelTest {};

TEST_F(SysctlTest, WritesInsideTheNetnsAndReturnsTheOldValue) {
  auto& pod = make_netns();
  make_veth(pod, "net1", pod, "peer1");
  auto key = must(ipv4_conf_key("net1", "arp_ignore"));
  EXPECT_EQ(key, "net/ipv4/conf/net1/arp_ignore");

  auto old = in_netns(pod.ns(), [&] { return write_sysctl(key, "1"); });
  ASSERT_OK(old);
  EXPECT_EQ(*old, "0");
  EXPECT_EQ(must(in_netns(pod.ns(), [&] { return read_sysctl(key); })), "1");
  EXPECT_EQ(testing::sh("ip netns exec " + pod.name() + " cat /proc/sys/" + key), "1\n");

  for (const char* setting : {"arp_announce", "rp_filter"}) {
    auto k = must(ipv4_conf_key("net1", setting));
    ASSERT_OK(in_netns(pod.ns(), [&] { return write_sysctl(k, "2"); }));
    EXPECT_EQ(must(in_netns(pod.ns(), [&] { return read_sysctl(k); })), "2");
  }
  auto dad = must(ipv6_conf_key("net1", "accept_dad"));
  ASSERT_OK(in_netns(pod.ns(), [&] { return write_sysctl(dad, "0"); }));
  EXPECT_EQ(must(in_netns(pod.ns(), [&] { return read_sysctl(dad); })), "0");

  // The host has no net1: the file belongs to the pod's namespace only.
  auto outside = read_sysctl(key);
  ASSERT_FALSE(outside.ok());
  EXPECT_EQ(outside.error().msg(),
            "read sysctl net/ipv4/conf/net1/arp_ignore: No such file or directory");

  auto bad_value = in_netns(pod.ns(), [&] { return write_sysctl(key, "banana"); });
  ASSERT_FALSE(bad_value.ok());
  EXPECT_NE(bad_value.error().msg().find("write sysctl net/ipv4/conf/net1/arp_ignore = banana"),
            std::string::npos)
      << bad_value.error().msg();
}

TEST(SysctlKeyTest, RejectsNamesThatWouldLeaveTheTree) {
  EXPECT_FALSE(ipv4_conf_key("..", "rp_filter").ok());
  EXPECT_FALSE(ipv4_conf_key("a/b", "rp_filter").ok());
  EXPECT_FALSE(ipv4_conf_key("net1", "../../kernel/hostname").ok());
  EXPECT_FALSE(ipv4_conf_key("net1", "").ok());
  EXPECT_FALSE(ipv6_conf_key("", "accept_dad").ok());
  EXPECT_TRUE(ipv4_conf_key("all", "rp_filter").ok());
  EXPECT_TRUE(ipv4_conf_key("eth0.100", "rp_filter").ok());
  EXPECT_FALSE(read_sysctl("../etc/passwd").ok());
  EXPECT_FALSE(read_sysctl("/etc/passwd").ok());
}

}  // namespace
}  // namespace rdmanet::netns
