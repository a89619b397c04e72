#include "netns/netns.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "netns/testing/test_util.h"

namespace rdmanet::netns {
namespace {

using testing::KernelTest;

class NetnsTest : public KernelTest {};

void expect_invalid(const std::string& path, const std::string& why) {
  auto ns = Netns::open(path);
  ASSERT_FALSE(ns.ok()) << path;
  EXPECT_EQ(ns.error().kind(), ErrorKind::kInvalidEnvironment);
  EXPECT_NE(ns.error().msg().find(path), std::string::npos) << ns.error().msg();
  EXPECT_NE(ns.error().msg().find(why), std::string::npos) << ns.error().msg();
}

TEST_F(NetnsTest, OpensNamedNetnsAndProcNetns) {
  auto& t = make_netns();
  auto ns = Netns::open(t.path());
  ASSERT_OK(ns);
  EXPECT_TRUE(ns->same_as(t.ns()));
  EXPECT_FALSE(*ns->is_current());

  auto self = Netns::open("/proc/self/ns/net");
  ASSERT_OK(self);
  EXPECT_TRUE(*self->is_current());
  EXPECT_FALSE(self->same_as(*ns));
}

TEST_F(NetnsTest, RejectsWhatIsNotANetns) {
  char dir_template[] = "/tmp/rdmanet-netns-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  std::string dir = dir_template;
  std::ofstream(dir + "/file") << "not a namespace";

  expect_invalid(dir + "/file", "not a namespace file");
  expect_invalid(dir, "not a namespace file");
  expect_invalid(dir + "/missing", "No such file or directory");
  expect_invalid("/proc/self/ns/mnt", "is a mount namespace");
  expect_invalid("/proc/self/ns/uts", "is a uts namespace");
  std::filesystem::remove_all(dir);
}

TEST_F(NetnsTest, OpenIfExistsTreatsOnlyMissingAsAbsent) {
  auto& t = make_netns();
  auto present = Netns::open_if_exists(t.path());
  ASSERT_OK(present);
  EXPECT_TRUE(present->has_value());

  auto missing = Netns::open_if_exists("/run/netns/rdmanet-t-does-not-exist");
  ASSERT_OK(missing);
  EXPECT_FALSE(missing->has_value());

  EXPECT_FALSE(Netns::open_if_exists("/proc/self/ns/mnt").ok());
}

TEST_F(NetnsTest, InNetnsRunsInsideAndComesBack) {
  auto& t = make_netns();
  auto host = Netns::current();
  ASSERT_OK(host);

  auto inside = in_netns(t.ns(), [] { return Netns::current(); });
  ASSERT_OK(inside);
  EXPECT_TRUE(inside->same_as(t.ns()));
  EXPECT_TRUE(*host->is_current());

  // An error from inside is passed on, and the thread is still back home.
  Status failed =
      in_netns(t.ns(), []() -> Status { return Error(ErrorKind::kKernel, "failed inside"); });
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.error().msg(), "failed inside");
  EXPECT_TRUE(*host->is_current());

  // Nesting returns to the outer namespace, then to the host.
  auto& other = make_netns();
  Status nested = in_netns(t.ns(), [&]() -> Status {
    auto in_other = in_netns(other.ns(), [] { return Netns::current(); });
    EXPECT_TRUE(in_other.ok() && in_other->same_as(other.ns()));
    EXPECT_TRUE(*t.ns().is_current());
    return ok_status();
  });
  ASSERT_OK(nested);
  EXPECT_TRUE(*host->is_current());
}

}  // namespace
}  // namespace rdmanet::netns
