#include "plugin/state.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "base/testing/temp_dir.h"
#include "cni/error_code.h"

namespace rdmanet::plugin {
namespace {

namespace fs = std::filesystem;

class State : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(tmp_.path().empty()) << "cannot create a temporary directory";
    dir_ = tmp_.path();
  }

  AttachmentState sample() {
    AttachmentState s;
    s.network = "rail0";
    s.container_id = "abc";
    s.ifname = "net1";
    s.netns = "/run/netns/p";
    s.mode = "netdev";
    s.phase = "added";
    s.device = {"ens1f0v3", 7, "02:00:00:00:00:07", 9000, "", {"enp59s0f0v3"}, "", "pci-x"};
    netns::VfState original;
    original.mac = *netns::HwAddress::parse("02:00:00:00:00:01");
    original.vlan = 12;
    original.vlan_proto = 0x88a8;
    original.trust = true;
    original.link_state = netns::VfLinkState::kDisable;
    original.max_tx_rate = 100;
    original.node_guid = 0x0011223344556677ULL;
    s.vf = VfRecord{"0000:3b:00.0", "ens1f0", "/sys", 3, original};
    RdmaRecord rdma;
    rdma.device = "rxe_net1_1a2b3c4d";
    rdma.index = 4;
    rdma.created = true;
    rdma.moved = true;
    rdma.node_mode = "exclusive";
    rdma.gids = {{"device", "rxe_net1_1a2b3c4d"}};
    s.rdma = rdma;
    s.device_info_file = "/var/run/k8s.cni.cncf.io/devinfo/cni/x-net1.json";
    s.config = R"({"cniVersion":"1.0.0"})";
    return s;
  }

  testutil::TempDir tmp_{"rdmanet-state"};
  std::string dir_;
};

mode_t mode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 0777;
}

TEST_F(State, RoundTripsEverythingDelNeeds) {
  StateStore store(dir_ + "/state");
  ASSERT_TRUE(store.save(sample()).ok());
  auto loaded = store.load("rail0", "abc", "net1");
  ASSERT_TRUE(loaded.ok()) << loaded.error().msg();
  ASSERT_TRUE(loaded->has_value());
  const AttachmentState& s = **loaded;
  EXPECT_EQ(s.device.name, "ens1f0v3");
  EXPECT_EQ(s.device.altnames, std::vector<std::string>{"enp59s0f0v3"});
  EXPECT_EQ(s.device.mtu, 9000u);
  ASSERT_TRUE(s.vf.has_value());
  EXPECT_EQ(s.vf->index, 3);
  EXPECT_EQ(s.vf->original.vlan, 12u);
  EXPECT_EQ(s.vf->original.vlan_proto, 0x88a8);
  EXPECT_TRUE(s.vf->original.trust);
  EXPECT_EQ(s.vf->original.link_state, netns::VfLinkState::kDisable);
  EXPECT_EQ(s.vf->original.max_tx_rate, 100u);
  EXPECT_EQ(s.vf->original.mac.str(), "02:00:00:00:00:01");
  EXPECT_EQ(s.vf->original.node_guid, 0x0011223344556677ULL);
  EXPECT_FALSE(s.vf->original.port_guid.has_value()) << "not reported, so not restored";
  ASSERT_TRUE(s.rdma.has_value());
  EXPECT_EQ(s.rdma->device, "rxe_net1_1a2b3c4d");
  EXPECT_EQ(s.rdma->index, 4);
  EXPECT_TRUE(s.rdma->created);
  EXPECT_TRUE(s.rdma->moved);
  EXPECT_EQ(s.rdma->node_mode, "exclusive");
  EXPECT_EQ(s.device_info_file, "/var/run/k8s.cni.cncf.io/devinfo/cni/x-net1.json");
  EXPECT_EQ(s.rdma->gids["device"], "rxe_net1_1a2b3c4d");
  EXPECT_FALSE(store.load("rail0", "abc", "net2")->has_value());
}

TEST_F(State, FilesArePrivate) {
  StateStore store(dir_ + "/state");
  ASSERT_TRUE(store.save(sample()).ok());
  ASSERT_TRUE(store.set_holder("pci-x", sample()).ok());
  ASSERT_TRUE(store.lock_device("pci-x").ok());
  for (const auto& e : fs::recursive_directory_iterator(dir_ + "/state")) {
    mode_t want = e.is_directory() ? 0700 : 0600;
    EXPECT_EQ(mode_of(e.path()), want) << e.path();
  }
}

// A network name up to the spec's limit of any length works (its directory
// is bounded like the file names), and GC's listing finds it.
TEST_F(State, LongNetworkNamesWork) {
  StateStore store(dir_ + "/state");
  AttachmentState s = sample();
  s.network = std::string(200, 'n');
  ASSERT_TRUE(store.save(s).ok());
  EXPECT_TRUE(store.load(s.network, "abc", "net1")->has_value());
  auto all = store.list(s.network);
  ASSERT_TRUE(all);
  EXPECT_EQ(all->size(), 1U);
}

// DEL trusts the state: a directory others can write to is refused.
TEST_F(State, DirectoryOthersCanWriteIsRefused) {
  fs::create_directories(dir_ + "/state/rail0");
  fs::permissions(dir_ + "/state/rail0", fs::perms(0777));
  StateStore store(dir_ + "/state");
  Status saved = store.save(sample());
  ASSERT_FALSE(saved.ok());
  EXPECT_EQ(saved.error().kind(), ErrorKind::kIo);
  EXPECT_NE(saved.error().msg().find(dir_ + "/state/rail0"), std::string::npos)
      << saved.error().msg();
  EXPECT_NE(saved.error().msg().find("mode 0777"), std::string::npos);
}

TEST_F(State, HostileInterfaceNamesStayInside) {
  StateStore store(dir_ + "/state");
  AttachmentState s = sample();
  s.ifname = "../../x";
  ASSERT_TRUE(store.save(s).ok());
  for (const auto& e : fs::recursive_directory_iterator(dir_)) {
    EXPECT_EQ(e.path().string().rfind(dir_ + "/state", 0), 0u) << e.path();
  }
  EXPECT_TRUE(store.load("rail0", "abc", "../../x")->has_value());
}

TEST_F(State, HoldsBelongToOneAttachment) {
  StateStore store(dir_ + "/state");
  AttachmentState mine = sample();
  AttachmentState other = sample();
  other.container_id = "def";
  ASSERT_TRUE(store.save(mine).ok());
  ASSERT_TRUE(store.set_holder("pci-x", mine).ok());
  ASSERT_TRUE(store.clear_holder("pci-x", other).ok());
  auto holder = store.holder("pci-x");
  ASSERT_TRUE(holder.ok() && holder->has_value());
  EXPECT_EQ((*holder)->container_id, "abc") << "another attachment cleared our hold";
  ASSERT_TRUE(store.clear_holder("pci-x", mine).ok());
  EXPECT_FALSE(store.holder("pci-x")->has_value());
}

TEST_F(State, CorruptStateIsNamed) {
  StateStore store(dir_ + "/state");
  ASSERT_TRUE(store.save(sample()).ok());
  std::string path = dir_ + "/state/rail0/abc." + hex("net1") + ".json";
  ASSERT_TRUE(fs::exists(path));
  fs::resize_file(path, 10);
  auto loaded = store.load("rail0", "abc", "net1");
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(cni::error_code(loaded.error()), 107);
  EXPECT_NE(loaded.error().msg().find(path), std::string::npos);
}

}  // namespace
}  // namespace rdmanet::plugin
