#include "agent/gid_refresh.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "base/testing/temp_dir.h"
#include "plugin/pod_files.h"

namespace rdmanet::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using plugin::AttachmentRecord;
using plugin::Mode;
using plugin::Phase;
using plugin::PodInfoStore;
using plugin::RdmaReport;
using plugin::StepKind;

std::string file_text(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), {}};
}

// A shared-mode HCA's GID table in a fake sysfs (the kernel's layout: gids/<i> for every
// slot, gid_attrs/{types,ndevs}/<i>), one pod's rail on it with its pod files, and the record
// ADD left. The shared-mode path reads sysfs directly; the exclusive-mode path (through the
// pod netns) runs in the kernel lab (downward-api).
class GidRefreshTest : public ::testing::Test {
 protected:
  void SetUp() override {
    port_ = fs::path(tmp_.path()) / "sys/class/infiniband/mlx5_0/ports/1";
    for (const char* sub : {"gids", "gid_attrs/types", "gid_attrs/ndevs"}) {
      fs::create_directories(port_ / sub);
    }
    for (int i = 0; i < 8; ++i) {
      std::ofstream(port_ / "gids" / std::to_string(i))
          << "0000:0000:0000:0000:0000:0000:0000:0000\n";
    }
    gid(3, "0000:0000:0000:0000:0000:ffff:0a38:0002");  // ::ffff:10.56.0.2, pod A
    gid(4, "0000:0000:0000:0000:0000:ffff:0a38:0009");  // another pod's

    record_.network = "rail0";
    record_.container_id = "sandbox-a";
    record_.ifname = "net1";
    record_.pod = "ml/trainer-0";
    record_.phase = Phase::kAdded;
    record_.mode = Mode::kMacvlan;
    RdmaReport rdma;
    rdma.device = "mlx5_0";
    rdma.port = 1;
    rdma.node_mode = "shared";
    rdma.gids = {{"device", "mlx5_0"},
                 {"port", 1},
                 {"table", json::array()},
                 {"addresses", {{{"address", "10.56.0.2"}, {"index", 3}}}}};
    record_.rdma = rdma;
    record_.steps.push_back(
        {StepKind::kPodInfo, {{"root", pods()}, {"uid", "uid-a"}, {"interface", "net1"}}});

    json rail = {{"interface", "net1"},
                 {"network", "rail0"},
                 {"addresses", {"10.56.0.2/24"}},
                 {"rdma",
                  {{"device", "mlx5_0"},
                   {"port", 1},
                   {"linkLayer", "Ethernet"},
                   {"sharedDevice", true},
                   {"gids", json::array()},
                   {"gidIndex", {{"ipv4", 3}}}}}};
    ASSERT_TRUE(PodInfoStore(pods(), locks()).put({"uid-a", "sandbox-a", "net1"}, rail));
  }

  void gid(int i, const std::string& value, const std::string& ndev = "net1") {
    std::ofstream(port_ / "gids" / std::to_string(i)) << value << "\n";
    std::ofstream(port_ / "gid_attrs/types" / std::to_string(i)) << "RoCE v2\n";
    std::ofstream(port_ / "gid_attrs/ndevs" / std::to_string(i)) << ndev << "\n";
  }
  void clear(int i) {
    std::ofstream(port_ / "gids" / std::to_string(i))
        << "0000:0000:0000:0000:0000:0000:0000:0000\n";
  }
  Expected<std::optional<GidChange>> refresh() {
    auto self = netns::Netns::current();  // an nsfs handle: not under qemu-user (cross_test.sh)
    if (!self) {
      return self.error();
    }
    GidTables round;
    return refresh_pod_gids(record_, *self, locks(), &round, tmp_.path() + "/sys");
  }
  std::string pods() const { return tmp_.path() + "/pods"; }
  std::string locks() const { return tmp_.path() + "/state/locks"; }
  std::string env() const { return file_text(pods() + "/uid-a/rdma.env"); }

  testutil::TempDir tmp_{"rdmanet-gidrefresh"};
  fs::path port_;
  AttachmentRecord record_;
};

TEST_F(GidRefreshTest, AnIndexThatDidNotMoveRewritesNothing) {
  auto change = refresh();
  ASSERT_TRUE(change.ok()) << change.error().msg();
  EXPECT_FALSE(*change);
  EXPECT_NE(env().find("\nNCCL_IB_GID_INDEX=3\n"), std::string::npos) << env();
}

// The pod's address came back after another pod's: its GID sits at another index now.
TEST_F(GidRefreshTest, AMovedIndexIsWrittenToThePodFiles) {
  clear(3);
  gid(6, "0000:0000:0000:0000:0000:ffff:0a38:0002");
  auto change = refresh();
  ASSERT_TRUE(change.ok()) << change.error().msg();
  ASSERT_TRUE(*change);
  EXPECT_EQ((*change)->before, json({{"ipv4", 3}}));
  EXPECT_EQ((*change)->after, json({{"ipv4", 6}}));
  EXPECT_EQ((*change)->device, "mlx5_0 port 1");
  EXPECT_NE(env().find("\nNCCL_IB_GID_INDEX=6\n"), std::string::npos) << env();
  EXPECT_NE(env().find("\nRDMANET_RAIL0_GID_INDEX=6\n"), std::string::npos) << env();
  auto again = refresh();
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again) << "the files say 6 now";
}

// The address is gone from the table (the pod removed it): no index is better than a stale
// one, which would name another pod's GID on a shared HCA.
TEST_F(GidRefreshTest, AGidThatWentTakesTheIndexOutOfTheFiles) {
  clear(3);
  auto change = refresh();
  ASSERT_TRUE(change.ok()) << change.error().msg();
  ASSERT_TRUE(*change);
  EXPECT_EQ((*change)->after, json::object());
  EXPECT_EQ(env().find("GID_INDEX"), std::string::npos) << env();
}

TEST_F(GidRefreshTest, WhatHasNothingToKeepIsLeftAlone) {
  clear(3);
  gid(6, "0000:0000:0000:0000:0000:ffff:0a38:0002");
  AttachmentRecord adding = record_;
  adding.phase = Phase::kAdding;
  AttachmentRecord no_files = record_;
  no_files.steps.clear();
  AttachmentRecord no_rdma = record_;
  no_rdma.rdma.reset();
  auto self = netns::Netns::current();
  ASSERT_TRUE(self.ok());
  for (const auto* r : {&adding, &no_files, &no_rdma}) {
    GidTables round;
    auto change = refresh_pod_gids(*r, *self, locks(), &round, tmp_.path() + "/sys");
    ASSERT_TRUE(change.ok()) << change.error().msg();
    EXPECT_FALSE(*change);
  }
  EXPECT_NE(env().find("\nNCCL_IB_GID_INDEX=3\n"), std::string::npos) << "untouched: " << env();
}

// One round reads a shared HCA's table once, however many pods' rails are on it: what the
// round read first is what its later rails are compared with; the next round reads again.
TEST_F(GidRefreshTest, ARoundReadsASharedTableOnce) {
  auto self = netns::Netns::current();  // an nsfs handle: not under qemu-user
  ASSERT_TRUE(self.ok()) << self.error().msg();
  GidTables round;
  auto first = refresh_pod_gids(record_, *self, locks(), &round, tmp_.path() + "/sys");
  ASSERT_TRUE(first.ok()) << first.error().msg();
  EXPECT_FALSE(*first);
  ASSERT_EQ(round.size(), 1u);
  EXPECT_EQ(round.begin()->second.size(), 2u) << "pod A's GID and another pod's";
  clear(3);
  gid(6, "0000:0000:0000:0000:0000:ffff:0a38:0002");
  auto same_round = refresh_pod_gids(record_, *self, locks(), &round, tmp_.path() + "/sys");
  ASSERT_TRUE(same_round.ok());
  EXPECT_FALSE(*same_round) << "compared with the table this round read";
  GidTables next;
  auto next_round = refresh_pod_gids(record_, *self, locks(), &next, tmp_.path() + "/sys");
  ASSERT_TRUE(next_round.ok());
  ASSERT_TRUE(*next_round);
  EXPECT_EQ((*next_round)->after, json({{"ipv4", 6}}));
}

// A device the agent cannot see is an error it counts, never an index taken away.
TEST_F(GidRefreshTest, ADeviceThatIsNotThereIsAnErrorAndChangesNothing) {
  fs::remove_all(port_.parent_path().parent_path());
  auto change = refresh();
  ASSERT_FALSE(change.ok());
  EXPECT_EQ(change.error().kind(), ErrorKind::kDeviceNotFound) << change.error().msg();
  EXPECT_NE(env().find("\nNCCL_IB_GID_INDEX=3\n"), std::string::npos) << env();
}

}  // namespace
}  // namespace rdmanet::agent
