#include "netns/link_watch.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "netns/testing/test_util.h"

namespace rdmanet::netns {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;
using testing::KernelTest;
using testing::must;

class LinkWatchTest : public KernelTest {};

// A veth has carrier only while both ends are up: the far end stands in for the wire.
TEST_F(LinkWatchTest, SeesCarrierComeWhenTheFarEndComesUp) {
  auto& pod = make_netns();
  auto& far = make_netns();
  make_veth(pod, "rail", far, "wire");
  pod.ip("link set rail up");
  Rtnl rtnl = pod.rtnl();
  const int ifindex = must(find_link_by_name(rtnl, "rail")).index;

  auto watch = must(LinkWatch::open(pod.ns(), ifindex));
  EXPECT_EQ(watch.link().name, "rail");
  EXPECT_TRUE(watch.link().up());
  EXPECT_FALSE(has_carrier(watch.link()));
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
  auto watch = must(LinkWatch::open(pod.ns(), ifindex));
  pod.ip("link set rail netns " + host.name());
  auto seen = watch.next(steady_clock::now() + std::chrono::seconds(10));
  ASSERT_FALSE(seen.ok());
  EXPECT_EQ(seen.error().kind(), ErrorKind::kDeviceNotFound);
  EXPECT_NE(seen.error().msg().find("left the netns"), std::string::npos) << seen.error().msg();
}

TEST_F(LinkWatchTest, NoSuchLinkIsDeviceNotFound) {
  auto& pod = make_netns();
  auto watch = LinkWatch::open(pod.ns(), 999999);
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
  auto watch = must(LinkWatch::open(pod.ns(), ifindex));
  pod.ip("link set other up");
  pod.ip("link set other mtu 1400");
  EXPECT_FALSE(must(watch.next(steady_clock::now() + milliseconds(200))));
  pod.ip("link set rail up");
  EXPECT_TRUE(must(watch.next(steady_clock::now() + std::chrono::seconds(10))));
  EXPECT_TRUE(watch.link().up());
}

}  // namespace
}  // namespace rdmanet::netns
