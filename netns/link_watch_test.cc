#include "netns/link_watch.h"

#include <gtest/gtest.h>
#include <linux/if.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "netns/testing/test_util.h"

namespace rdmanet::netns {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;
using testing::KernelTest;
using testing::must;

class LinkWatchTest : public KernelTest {};

steady_clock::time_point soon() { return steady_clock::now() + std::chrono::seconds(10); }

// Takes what is already queued or about to come (a veth's carrier-off on creation is
// delivered up to a second late), so that what follows sees only the test's own changes.
void drain(LinkWatch& watch) {
  while (must(watch.next(steady_clock::now() + milliseconds(300)))) {
  }
}

// A veth has carrier only while both ends are up: the far end stands in for the wire.
TEST_F(LinkWatchTest, SeesCarrierComeWhenTheFarEndComesUp) {
  auto& pod = make_netns();
  auto& far = make_netns();
  make_veth(pod, "rail", far, "wire");
  pod.ip("link set rail up");
  Rtnl rtnl = pod.rtnl();
  const int ifindex = must(find_link_by_name(rtnl, "rail")).index;

  auto watch = must(LinkWatch::open(pod.ns(), ifindex, soon()));
  EXPECT_EQ(watch.link().name, "rail");
  EXPECT_TRUE(watch.link().up());
  EXPECT_FALSE(has_carrier(watch.link()));
  drain(watch);
  // Nothing happens: the wait ends at its deadline.
  auto t0 = steady_clock::now();
  EXPECT_FALSE(must(watch.next(t0 + milliseconds(100))));
  EXPECT_GE(steady_clock::now() - t0, milliseconds(100));

  std::thread wire([&] {
    std::this_thread::sleep_for(milliseconds(200));
    far.ip("link set wire up");
  });
  auto deadline = steady_clock::now() + std::chrono::seconds(10);
  while (!has_carrier(watch.link())) {
    auto seen = watch.next(deadline);
    if (!seen.ok() || !*seen) {
      break;
    }
  }
  wire.join();
  EXPECT_TRUE(has_carrier(watch.link()));
  EXPECT_LT(steady_clock::now(), deadline);  // woken by the event, not the deadline
}

TEST_F(LinkWatchTest, ALinkThatLeavesTheNetnsEndsTheWait) {
  auto& pod = make_netns();
  auto& host = make_netns();
  make_veth(pod, "rail", host, "wire");
  Rtnl rtnl = pod.rtnl();
  const int ifindex = must(find_link_by_name(rtnl, "rail")).index;
  auto watch = must(LinkWatch::open(pod.ns(), ifindex, soon()));
  pod.ip("link set rail netns " + host.name());
  auto seen = watch.next(steady_clock::now() + std::chrono::seconds(10));
  ASSERT_FALSE(seen.ok());
  EXPECT_EQ(seen.error().kind(), ErrorKind::kDeviceNotFound);
  EXPECT_NE(seen.error().msg().find("left the netns"), std::string::npos) << seen.error().msg();
}

TEST_F(LinkWatchTest, NoSuchLinkIsDeviceNotFound) {
  auto& pod = make_netns();
  auto watch = LinkWatch::open(pod.ns(), 999999, soon());
  ASSERT_FALSE(watch.ok());
  EXPECT_EQ(watch.error().kind(), ErrorKind::kDeviceNotFound) << watch.error().msg();
}

// Other links' notifications do not wake the waiter for this one.
TEST_F(LinkWatchTest, OtherLinksDoNotCount) {
  auto& pod = make_netns();
  auto& far = make_netns();
  make_veth(pod, "rail", far, "wire");
  make_veth(pod, "other", pod, "other2");
  Rtnl rtnl = pod.rtnl();
  const int ifindex = must(find_link_by_name(rtnl, "rail")).index;
  auto watch = must(LinkWatch::open(pod.ns(), ifindex, soon()));
  drain(watch);
  pod.ip("link set other up");
  pod.ip("link set other mtu 1400");
  EXPECT_FALSE(must(watch.next(steady_clock::now() + milliseconds(200))));
  pod.ip("link set rail up");
  EXPECT_TRUE(must(watch.next(steady_clock::now() + std::chrono::seconds(10))));
  EXPECT_TRUE(watch.link().up());
}

// The pod may hold CAP_NET_ADMIN in its netns, which lets it send to the link group: a
// forged notification that the rail has carrier is not taken, only the kernel's word.
TEST_F(LinkWatchTest, AForgedNotificationIsNotTaken) {
  auto& pod = make_netns();
  auto& far = make_netns();
  make_veth(pod, "rail", far, "wire");
  pod.ip("link set rail up");
  Rtnl rtnl = pod.rtnl();
  const int ifindex = must(find_link_by_name(rtnl, "rail")).index;
  auto watch = must(LinkWatch::open(pod.ns(), ifindex, soon()));
  drain(watch);
  ASSERT_FALSE(has_carrier(watch.link()));

  // A process in the pod netns multicasts a RTM_NEWLINK for the rail with carrier on.
  Fd forger = must(in_netns(pod.ns(), []() -> Expected<Fd> {
    Fd fd(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE));
    if (!fd.valid()) {
      return sys_error("socket", errno);
    }
    return fd;
  }));
  struct {
    nlmsghdr hdr;
    ifinfomsg ifi;
  } forged{};
  forged.hdr.nlmsg_len = sizeof(forged);
  forged.hdr.nlmsg_type = RTM_NEWLINK;
  forged.ifi.ifi_family = AF_UNSPEC;
  forged.ifi.ifi_index = ifindex;
  forged.ifi.ifi_flags = IFF_UP | IFF_RUNNING | IFF_LOWER_UP;
  sockaddr_nl group{};
  group.nl_family = AF_NETLINK;
  group.nl_groups = RTMGRP_LINK;
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(::sendto(forger.get(), &forged, sizeof(forged), 0,
                       reinterpret_cast<const sockaddr*>(&group), sizeof(group)),
              static_cast<ssize_t>(sizeof(forged)))
        << std::strerror(errno);
  }
  EXPECT_FALSE(must(watch.next(steady_clock::now() + milliseconds(300))));
  EXPECT_FALSE(has_carrier(watch.link())) << "a forged notification was taken";
}

}  // namespace
}  // namespace rdmanet::netns
