#include "netns/netns_sysfs.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <set>

#include "netns/testing/test_util.h"

namespace rdmanet::netns {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;  // NOLINT(google-build-using-namespace): 5000ms
using testing::KernelTest;

class NetnsSysfsTest : public KernelTest {};

std::set<std::string> class_net() {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator("/sys/class/net")) {
    names.insert(entry.path().filename());
  }
  return names;
}

std::string joined(const std::set<std::string>& names) {
  std::string out;
  for (const auto& name : names) {
    out += name + " ";
  }
  return out;
}

TEST_F(NetnsSysfsTest, ShowsTheNetdevsOfThePodNetnsAndLeavesTheHostsMountsAlone) {
  auto& host = make_netns();  // stands in for the node: a namespace the test owns
  auto& pod = make_netns();
  std::string tag = std::to_string(getpid() % 100000);
  make_veth(host, "hv" + tag, pod, "pv" + tag);

  auto seen = in_netns_sysfs(
      pod.ns(), [] { return Expected<std::string>(joined(class_net())); }, 5000ms);
  ASSERT_TRUE(seen.ok()) << seen.error().msg();
  EXPECT_EQ(*seen, "lo pv" + tag + " ") << "the pod's sysfs lists exactly the pod's netdevs";

  // Our own /sys is still the plugin's view: the pod's netdev is not in it.
  EXPECT_EQ(class_net().count("pv" + tag), 0U);
  auto again = in_netns_sysfs(
      host.ns(), [] { return Expected<std::string>(joined(class_net())); }, 5000ms);
  ASSERT_TRUE(again.ok()) << again.error().msg();
  EXPECT_EQ(*again, "hv" + tag + " lo ");
}

TEST_F(NetnsSysfsTest, PassesTheReadersErrorBack) {
  auto& pod = make_netns();
  auto seen = in_netns_sysfs(
      pod.ns(),
      []() -> Expected<std::string> { return Error(ErrorKind::kGidTimeout, "no GID for 1.2.3.4"); },
      5000ms);
  ASSERT_FALSE(seen.ok());
  EXPECT_EQ(seen.error().kind(), ErrorKind::kGidTimeout);
  EXPECT_EQ(seen.error().msg(), "no GID for 1.2.3.4");
}

TEST_F(NetnsSysfsTest, TheReaderHoldsNoneOfTheCallersFiles) {
  // A lock the caller holds (the plugin holds its device lock during the GID wait) must
  // not be shared with a reader that could outlive it.
  auto& pod = make_netns();
  int lock = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(lock, 0);
  auto seen = in_netns_sysfs(
      pod.ns(),
      [] {
        std::string fds;
        for (const auto& entry : fs::directory_iterator("/proc/self/fd")) {
          fds += entry.path().filename().string() + " ";
        }
        return Expected<std::string>(fds);
      },
      5000ms);
  close(lock);
  ASSERT_TRUE(seen.ok()) << seen.error().msg();
  // stdio, the answer pipe (3) and the directory being listed (4).
  EXPECT_EQ(*seen, "0 1 2 3 4 ") << "fd " << lock << " leaked into the reader";
}

TEST_F(NetnsSysfsTest, KillsAReaderThatDoesNotAnswer) {
  auto& pod = make_netns();
  auto start = std::chrono::steady_clock::now();
  auto seen = in_netns_sysfs(
      pod.ns(),
      []() -> Expected<std::string> {
        sleep(30);
        return std::string("late");
      },
      200ms);
  ASSERT_FALSE(seen.ok());
  EXPECT_EQ(seen.error().kind(), ErrorKind::kInternal);
  EXPECT_NE(seen.error().msg().find(pod.path()), std::string::npos) << seen.error().msg();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

}  // namespace
}  // namespace rdmanet::netns
