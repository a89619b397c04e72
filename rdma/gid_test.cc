#include "rdma/gid.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

#include "base/testing/temp_dir.h"
#include "netns/testing/test_util.h"

namespace rdmanet::rdma {
namespace {

namespace fs = std::filesystem;
using netns::IpAddress;

IpAddress ip(const std::string& text) { return *IpAddress::parse(text); }

// A fake sysfs GID table laid out like the kernel's: gids/<i> for every slot (zeros when
// empty), gid_attrs/{types,ndevs}/<i> for the populated ones.
class GidTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    port_ = fs::path(dir_.path()) / "class/infiniband/mlx5_3/ports/1";
    fs::create_directories(port_ / "gids");
    fs::create_directories(port_ / "gid_attrs/types");
    fs::create_directories(port_ / "gid_attrs/ndevs");
    for (int i = 0; i < 8; ++i) {
      std::ofstream(port_ / "gids" / std::to_string(i))
          << "0000:0000:0000:0000:0000:0000:0000:0000\n";
    }
  }

  void entry(int i, const std::string& gid, const std::string& type, const std::string& ndev) {
    std::ofstream(port_ / "gids" / std::to_string(i)) << gid << "\n";
    std::ofstream(port_ / "gid_attrs/types" / std::to_string(i)) << type << "\n";
    std::ofstream(port_ / "gid_attrs/ndevs" / std::to_string(i)) << ndev << "\n";
  }

  testutil::TempDir dir_;
  fs::path port_;
};

TEST(RoceGid, MapsIpv4IntoV4MappedIpv6AndKeepsIpv6) {
  EXPECT_EQ(roce_gid_of(ip("10.56.0.2")).str(), "::ffff:10.56.0.2");
  EXPECT_EQ(roce_gid_of(ip("fd00:56::2")).str(), "fd00:56::2");
}

TEST_F(GidTableTest, ReadsPopulatedEntriesWithTypeAndNetdev) {
  // A device that supports both RoCE versions (mlx5) lists every address twice, v1 and v2;
  // rxe (RoCE v2 only) has one entry each.
  entry(0, "fe80:0000:0000:0000:5054:00ff:fe12:3401", "IB/RoCE v1", "net1");
  entry(1, "fe80:0000:0000:0000:5054:00ff:fe12:3401", "RoCE v2", "net1");
  entry(2, "0000:0000:0000:0000:0000:ffff:0a38:0002", "IB/RoCE v1", "net1");
  entry(3, "0000:0000:0000:0000:0000:ffff:0a38:0002", "RoCE v2", "net1");
  auto table = read_gids(dir_.path(), "mlx5_3", 1);
  ASSERT_TRUE(table.ok()) << table.error().msg();
  ASSERT_EQ(table->size(), 4U) << "empty slots are skipped";
  EXPECT_EQ((*table)[3].index, 3U);
  EXPECT_EQ((*table)[3].gid.str(), "::ffff:10.56.0.2");
  EXPECT_TRUE((*table)[3].roce_v2());
  EXPECT_FALSE((*table)[2].roce_v2());
  EXPECT_EQ((*table)[3].netdev, "net1");

  GidReport report;
  report.device = "mlx5_3";
  report.table = *table;
  match_addresses(&report, {ip("fd00::9"), ip("10.56.0.2")});
  EXPECT_FALSE(report.complete()) << "fd00::9 has no GID";
  EXPECT_EQ(report.v2_index(), 3) << "the IPv4 address's RoCE v2 entry, not its v1 twin";
  EXPECT_NE(report.summary().find("fd00::9 -> no RoCE v2 GID"), std::string::npos)
      << report.summary();
  EXPECT_NE(report.summary().find("[3] ::ffff:10.56.0.2 RoCE v2 net1"), std::string::npos)
      << report.summary();

  auto back = GidReport::from_json(report.to_json());
  ASSERT_TRUE(back.ok()) << back.error().msg();
  EXPECT_EQ(back->to_json(), report.to_json());
}

TEST_F(GidTableTest, MissingDeviceOrPortIsNotFoundAndHostileNamesAreRefused) {
  EXPECT_EQ(read_gids(dir_.path(), "mlx5_4", 1).error().kind(), ErrorKind::kDeviceNotFound);
  EXPECT_EQ(read_gids(dir_.path(), "mlx5_3", 2).error().kind(), ErrorKind::kDeviceNotFound);
  EXPECT_EQ(read_gids(dir_.path(), "../../../etc", 1).error().kind(), ErrorKind::kInvalidConfig);
  EXPECT_EQ(read_gids(dir_.path(), "..", 1).error().kind(), ErrorKind::kInvalidConfig);
}

TEST_F(GidTableTest, IgnoresMalformedEntries) {
  entry(1, "not a gid", "RoCE v2", "net1");
  entry(2, "0000:0000:0000:0000:0000:ffff:0a38:00zz", "RoCE v2", "net1");
  auto table = read_gids(dir_.path(), "mlx5_3", 1);
  ASSERT_TRUE(table.ok());
  EXPECT_TRUE(table->empty());
}

// Calls of read(2) this thread has made so far (the kernel's count, /proc/thread-self/io
// syscr; the read of that file is counted once it has returned).
uint64_t reads_so_far() {
  std::ifstream io("/proc/thread-self/io");
  std::string key;
  uint64_t value = 0;
  while (io >> key >> value) {
    if (key == "syscr:") {
      return value;
    }
  }
  ADD_FAILURE() << "no syscr in /proc/thread-self/io";
  return 0;
}

// ADD's GID wait reads the whole table every 50 ms (gid.cc, read_line): one read per file,
// the slot's GID and, for a populated slot, its type and netdev. A reader that also reads
// to see the end of each file (base read_file) would make it two.
TEST_F(GidTableTest, ReadsEachFileOfTheTableWithOneReadCall) {
  entry(1, "0000:0000:0000:0000:0000:ffff:0a38:0002", "RoCE v2", "net1");
  entry(5, "fe80:0000:0000:0000:5054:00ff:fe12:3401", "RoCE v2", "net1");
  const uint64_t before_nothing = reads_so_far();
  const uint64_t looking = reads_so_far() - before_nothing;  // what reads_so_far costs
  const uint64_t before = reads_so_far();
  auto table = read_gids(dir_.path(), "mlx5_3", 1);
  const uint64_t reads = reads_so_far() - before - looking;
  ASSERT_TRUE(table.ok()) << table.error().msg();
  ASSERT_EQ(table->size(), 2U);
  EXPECT_EQ(reads, 8U + 2 * 2) << "8 slots, 2 of them populated";
}

// The wait runs in a child that joined a real (throwaway) netns with its own sysfs; the
// table it polls is a fake tree, because this kernel has no RDMA device to fill one.
class GidWaitTest : public GidTableTest {
 protected:
  void SetUp() override {
    GidTableTest::SetUp();
    if (geteuid() != 0) {
      GTEST_FAIL() << "needs root (setns, mount)";
    }
    ns_ = std::make_unique<netns::testing::TestNetns>();
  }
  std::unique_ptr<netns::testing::TestNetns> ns_;
};

TEST_F(GidWaitTest, ReturnsAsSoonAsEveryAddressHasItsGid) {
  entry(1, "0000:0000:0000:0000:0000:ffff:0a38:0002", "RoCE v2", "net1");
  auto report = wait_for_roce_gids(ns_->ns(), "mlx5_3", 1, {ip("10.56.0.2")},
                                   std::chrono::seconds(20), dir_.path());
  ASSERT_TRUE(report.ok()) << report.error().msg();
  EXPECT_EQ(report->v2_index(), 1);
  EXPECT_EQ(report->device, "mlx5_3");
}

TEST_F(GidWaitTest, TimesOutListingTheTable) {
  entry(1, "0000:0000:0000:0000:0000:ffff:0a38:0002", "IB/RoCE v1", "net1");
  auto start = std::chrono::steady_clock::now();
  auto report = wait_for_roce_gids(ns_->ns(), "mlx5_3", 1, {ip("10.56.0.2")},
                                   std::chrono::milliseconds(300), dir_.path());
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.error().kind(), ErrorKind::kGidTimeout);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(300));
  const std::string& msg = report.error().msg();
  EXPECT_NE(msg.find("10.56.0.2 -> no RoCE v2 GID"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[1] ::ffff:10.56.0.2 IB/RoCE v1 net1"), std::string::npos)
      << "a v1 entry does not count, and the message shows it: " << msg;
}

TEST_F(GidWaitTest, SeesAGidThatAppearsWhileWaiting) {
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    entry(2, "fd00:0056:0000:0000:0000:0000:0000:0002", "RoCE v2", "net1");
  });
  auto report = wait_for_roce_gids(ns_->ns(), "mlx5_3", 1, {ip("fd00:56::2")},
                                   std::chrono::seconds(20), dir_.path());
  later.join();
  ASSERT_TRUE(report.ok()) << report.error().msg();
  EXPECT_EQ(report->v2_index(), 2);
}

TEST_F(GidWaitTest, ADeviceThePodCannotSeeIsNotFound) {
  auto report = wait_for_roce_gids(ns_->ns(), "mlx5_9", 1, {ip("10.56.0.2")},
                                   std::chrono::seconds(5), dir_.path());
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.error().kind(), ErrorKind::kDeviceNotFound) << report.error().msg();
}

}  // namespace
}  // namespace rdmanet::rdma
