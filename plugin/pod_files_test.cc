#include "plugin/pod_files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "base/file_lock.h"
#include "base/json_fields.h"
#include "base/testing/temp_dir.h"
#include "plugin/testing/rails.h"
#include "plugin/workload_settings.h"

namespace rdmanet::plugin {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;
using testutil::roce_rail;
using testutil::shared_rail;
using testutil::with_class;

TEST(PodInfo, PodUidsAreCheckedBeforeTheyNameADirectory) {
  EXPECT_TRUE(is_pod_uid("7c5a1f0e-5b3e-4c1a-9d2e-0123456789ab"));
  for (const std::string& bad :
       std::vector<std::string>{"", "..", "a/b", "x y", std::string(65, 'a'), "a%d"}) {
    EXPECT_FALSE(is_pod_uid(bad)) << bad;
  }
}

class PodInfoStoreTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(tmp_.path().empty()); }
  std::string root() const { return tmp_.path() + "/pods"; }
  std::string locks() const { return tmp_.path() + "/state/locks"; }
  PodInfoStore store(std::chrono::milliseconds wait = std::chrono::seconds(10)) const {
    return {root(), locks(), wait};
  }
  json read_doc(const std::string& uid) {
    std::ifstream in(root() + "/" + uid + "/rails.json");
    return parse_json(std::string(std::istreambuf_iterator<char>(in), {}));
  }
  // A directory outside the pod tree with a file in it: what a planted link points at.
  std::string host_dir() {
    std::string d = tmp_.path() + "/host";
    fs::create_directories(d);
    std::ofstream(d + "/keep.json") << R"({"interface": "leak", "secret": "s3cr3t"})";
    return d;
  }
  testutil::TempDir tmp_{"rdmanet-podinfo"};
};

// Eight rails of one pod attached at once (Multus runs them one after another, a runtime
// may not): every entry is in the files afterwards; each DEL takes its own out, the last
// one the pod's directory.
TEST_F(PodInfoStoreTest, RailsAddedAtOnceAreAllListedAndTheLastDelRemovesThePod) {
  PodInfoStore s = store();
  std::vector<std::thread> threads;
  threads.reserve(8);
  for (int k = 0; k < 8; ++k) {
    threads.emplace_back([&s, k] {
      std::string ifname = "net" + std::to_string(k + 1);
      auto put = s.put({"pod-a", "sandbox", ifname},
                       roce_rail(ifname, "mlx5_" + std::to_string(k),
                                 "10.56.0." + std::to_string(k + 2) + "/24", 3));
      EXPECT_TRUE(put.ok()) << put.error().msg();
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  json doc = read_doc("pod-a");
  ASSERT_EQ(doc["rails"].size(), 8u) << doc.dump();
  EXPECT_EQ(doc["rails"][7]["interface"], "net8");
  EXPECT_EQ(doc["env"]["NCCL_IB_HCA"],
            "=mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1");
  struct stat st {};
  ASSERT_EQ(::stat((root() + "/pod-a/rdma.env").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u) << "pods read it through a hostPath volume";

  ASSERT_TRUE(s.remove({"pod-a", "sandbox", "net4"}).ok());
  doc = read_doc("pod-a");
  ASSERT_EQ(doc["rails"].size(), 7u);
  EXPECT_EQ(doc["env"]["NCCL_SOCKET_IFNAME"], "=net1,net2,net3,net5,net6,net7,net8");
  ASSERT_TRUE(s.remove({"pod-a", "sandbox", "net4"}).ok()) << "removing twice is fine";
  for (int k : {1, 2, 3, 5, 6, 7, 8}) {
    ASSERT_TRUE(s.remove({"pod-a", "sandbox", "net" + std::to_string(k)}).ok());
  }
  EXPECT_FALSE(fs::exists(root() + "/pod-a"));
  EXPECT_TRUE(s.remove({"gone", "sandbox", "net1"}).ok());
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), {}};
}

// nccl.conf and ucx.conf sit next to rdma.env, with only their library's keys, and go with
// the pod's last rail.
TEST_F(PodInfoStoreTest, NcclAndUcxConfigFilesFollowTheRails) {
  PodInfoStore s = store();
  ASSERT_TRUE(s.put({"pod-a", "s", "net1"},
                    with_class(roce_rail("net1", "mlx5_0", "10.56.0.2/24", 3), 106)));
  const std::string nccl = read_text(root() + "/pod-a/nccl.conf");
  EXPECT_NE(nccl.find("\nNCCL_IB_HCA==mlx5_0:1\n"), std::string::npos) << nccl;
  EXPECT_NE(nccl.find("\nNCCL_IB_TC=106\n"), std::string::npos) << nccl;
  EXPECT_EQ(nccl.find("UCX_"), std::string::npos) << nccl;
  const std::string ucx = read_text(root() + "/pod-a/ucx.conf");
  EXPECT_NE(ucx.find("\nUCX_IB_TRAFFIC_CLASS=106\n"), std::string::npos) << ucx;
  EXPECT_NE(ucx.find("\nUCX_NET_DEVICES=mlx5_0:1\n"), std::string::npos) << ucx;
  ASSERT_TRUE(s.put({"pod-a", "s", "net2"},
                    with_class(roce_rail("net2", "mlx5_1", "10.57.0.2/24", 3), 98)));
  EXPECT_EQ(read_text(root() + "/pod-a/nccl.conf").find("NCCL_IB_TC"), std::string::npos)
      << "the rails disagree now";
  ASSERT_TRUE(s.remove({"pod-a", "s", "net1"}));
  ASSERT_TRUE(s.remove({"pod-a", "s", "net2"}));
  EXPECT_FALSE(fs::exists(root() + "/pod-a"));
}

// The node agent's rewrite: only when the index moved, only an entry that is still there,
// keeping the entry's place among the pod's sandboxes.
TEST_F(PodInfoStoreTest, RefreshedGidsRewriteTheFilesOnlyWhenTheIndexMoved) {
  PodInfoStore s = store();
  ASSERT_TRUE(s.put({"pod-a", "s", "net1"}, shared_rail("net1", "mlx5_0", "10.56.0.2/24", 3)));
  const std::string env_path = root() + "/pod-a/rdma.env";
  struct stat before {};
  ASSERT_EQ(::stat(env_path.c_str(), &before), 0);

  json same = {{"gids", json::array()}, {"gidIndex", {{"ipv4", 3}}}};
  auto unchanged = s.refresh_gids({"pod-a", "s", "net1"}, same);
  ASSERT_TRUE(unchanged.ok()) << unchanged.error().msg();
  EXPECT_FALSE(*unchanged);
  struct stat after {};
  ASSERT_EQ(::stat(env_path.c_str(), &after), 0);
  EXPECT_EQ(before.st_ino, after.st_ino) << "not rewritten";

  json moved = {{"gids", {{{"index", 5}, {"gid", "::ffff:10.56.0.2"}, {"type", "RoCE v2"}}}},
                {"gidIndex", {{"ipv4", 5}}}};
  auto changed = s.refresh_gids({"pod-a", "s", "net1"}, moved);
  ASSERT_TRUE(changed.ok()) << changed.error().msg();
  ASSERT_TRUE(*changed);
  EXPECT_EQ(**changed, json({{"ipv4", 3}}));
  EXPECT_NE(read_text(env_path).find("\nNCCL_IB_GID_INDEX=5\n"), std::string::npos)
      << read_text(env_path);
  EXPECT_NE(read_text(env_path).find("\nRDMANET_RAIL0_GID_INDEX=5\n"), std::string::npos);
  json doc = read_doc("pod-a");
  EXPECT_EQ(doc["rails"][0]["rdma"]["gids"].size(), 1u);
  EXPECT_EQ(doc["rails"][0]["rdma"]["device"], "mlx5_0") << "the rest of the entry is kept";

  json gone = {{"gids", json::array()}, {"gidIndex", json::object()}};
  ASSERT_TRUE(*s.refresh_gids({"pod-a", "s", "net1"}, gone));
  EXPECT_EQ(read_text(env_path).find("GID_INDEX"), std::string::npos) << read_text(env_path);

  // A DEL first: the refresh brings nothing back.
  ASSERT_TRUE(s.remove({"pod-a", "s", "net1"}));
  auto late = s.refresh_gids({"pod-a", "s", "net1"}, moved);
  ASSERT_TRUE(late.ok());
  EXPECT_FALSE(*late);
  EXPECT_FALSE(fs::exists(root() + "/pod-a"));
}

TEST_F(PodInfoStoreTest, AnUntrustedRootAndABadUidAreRefused) {
  fs::create_directories(root());
  fs::permissions(root(), fs::perms::all);  // 0777: anyone could plant files
  auto put = store().put({"pod-a", "s", "net1"}, roce_rail("net1", "d", "10.0.0.2/24", 1));
  ASSERT_FALSE(put.ok());
  EXPECT_NE(put.error().msg().find(root()), std::string::npos) << put.error().msg();
  EXPECT_FALSE(store().check("pod-a").ok()) << "ADD checks it before anything is recorded";
  fs::permissions(root(), fs::perms::owner_all | fs::perms::group_read | fs::perms::others_read);
  auto bad = store().put({"../x", "s", "net1"}, json::object());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().kind(), ErrorKind::kInvalidEnvironment);
  EXPECT_NE(bad.error().msg().find("K8S_POD_UID"), std::string::npos);
  EXPECT_EQ(store().check("../x").error().kind(), ErrorKind::kInvalidEnvironment);
}

// A pod's earlier sandbox (kubelet's attempt 0) and the live one (attempt 1) name the same
// interface: the files show the newer rail, and the late DEL of the old sandbox takes out
// its own entry only.
TEST_F(PodInfoStoreTest, TwoSandboxesOfOnePodKeepTheirOwnEntries) {
  PodInfoStore s = store();
  ASSERT_TRUE(s.put({"pod-a", "attempt0", "net1"}, roce_rail("net1", "old", "10.0.0.2/24", 1)));
  ASSERT_TRUE(s.put({"pod-a", "attempt1", "net1"}, roce_rail("net1", "new", "10.0.0.3/24", 1)));
  json doc = read_doc("pod-a");
  ASSERT_EQ(doc["rails"].size(), 1u) << doc.dump();
  EXPECT_EQ(doc["rails"][0]["sandbox"], "attempt1");
  ASSERT_TRUE(s.remove({"pod-a", "attempt0", "net1"}));
  doc = read_doc("pod-a");
  ASSERT_EQ(doc["rails"].size(), 1u) << "the live sandbox's rail survives the late DEL";
  EXPECT_EQ(doc["rails"][0]["rdma"]["device"], "new");
  ASSERT_TRUE(s.remove({"pod-a", "attempt1", "net1"}));
  EXPECT_FALSE(fs::exists(root() + "/pod-a"));
}

// Links planted in the pod's tree are never followed: not by a write (a <uid> link made
// before the first rail, a rails.json link), not by the last DEL (a rails/ link to a host
// directory), and a link or hard link to a root-only file is never copied into rails.json.
TEST_F(PodInfoStoreTest, PlantedLinksAreNeverFollowed) {
  const std::string host = host_dir();
  fs::create_directories(root());
  fs::create_directory_symlink(host, root() + "/pod-a");
  PodInfoStore s = store();
  ASSERT_TRUE(s.put({"pod-a", "s", "net1"}, roce_rail("net1", "d", "10.0.0.2/24", 1)));
  EXPECT_TRUE(fs::is_directory(fs::symlink_status(root() + "/pod-a")));
  EXPECT_EQ(fs::directory_iterator(host)->path().filename(), "keep.json");
  EXPECT_FALSE(fs::exists(host + "/rails.json")) << "written through the planted link";

  fs::remove(root() + "/pod-a/rails.json");
  fs::create_symlink(host + "/keep.json", root() + "/pod-a/rails.json");
  fs::create_symlink(host + "/keep.json", root() + "/pod-a/rails/leak.json");
  fs::create_hard_link(host + "/keep.json", root() + "/pod-a/rails/hard.json");
  ASSERT_TRUE(s.put({"pod-a", "s", "net2"}, roce_rail("net2", "e", "10.0.1.2/24", 1)));
  json doc = read_doc("pod-a");
  EXPECT_EQ(doc["rails"].size(), 2u) << doc.dump();
  EXPECT_EQ(doc.dump().find("s3cr3t"), std::string::npos) << doc.dump();
  EXPECT_FALSE(fs::is_symlink(root() + "/pod-a/rails.json")) << "replaced, not written through";
  std::ifstream keep(host + "/keep.json");
  EXPECT_NE(std::string(std::istreambuf_iterator<char>(keep), {}).find("s3cr3t"),
            std::string::npos);

  // The last DEL with rails/ swapped for a link to the host directory: nothing there goes.
  fs::rename(root() + "/pod-a/rails", tmp_.path() + "/old-rails");
  fs::create_directory_symlink(host, root() + "/pod-a/rails");
  EXPECT_TRUE(s.remove({"pod-a", "s", "net1"})) << "logged and skipped, never followed";
  EXPECT_TRUE(fs::exists(host + "/keep.json"));
}

// Whatever else the pod leaves in rails/ (a stray file, a directory or a FIFO named like an
// entry, an entry too big to be one) is skipped: the pod's own rails stay listed, and its
// last DEL removes what rdmanet wrote and leaves the rest.
TEST_F(PodInfoStoreTest, StrayEntriesAreSkippedAndLeft) {
  PodInfoStore s = store();
  ASSERT_TRUE(s.put({"pod-a", "s", "net1"}, roce_rail("net1", "d", "10.0.0.2/24", 1)));
  const std::string rails = root() + "/pod-a/rails";
  std::ofstream(rails + "/stray.txt") << "x";
  fs::create_directory(rails + "/dir.json");
  ASSERT_EQ(::mkfifo((rails + "/fifo.json").c_str(), 0644), 0);
  std::ofstream(rails + "/big.json") << std::string(1 << 20, ' ');
  ASSERT_TRUE(s.put({"pod-a", "s", "net2"}, roce_rail("net2", "e", "10.0.1.2/24", 1)));
  EXPECT_EQ(read_doc("pod-a")["rails"].size(), 2u);
  ASSERT_TRUE(s.remove({"pod-a", "s", "net1"}));
  ASSERT_TRUE(s.remove({"pod-a", "s", "net2"}));
  EXPECT_FALSE(fs::exists(root() + "/pod-a/rails.json"));
  EXPECT_FALSE(fs::exists(root() + "/pod-a/rdma.env"));
  for (const char* left : {"stray.txt", "dir.json", "fifo.json", "big.json"}) {
    EXPECT_TRUE(fs::exists(fs::symlink_status(rails + "/" + left))) << left;
  }
  // rails/ as a plain file: the next ADD makes the directory it needs.
  fs::remove_all(root() + "/pod-a");
  fs::create_directories(root() + "/pod-a");
  std::ofstream(root() + "/pod-a/rails") << "not a directory";
  ASSERT_TRUE(s.put({"pod-a", "s", "net1"}, roce_rail("net1", "d", "10.0.0.2/24", 1)));
  EXPECT_TRUE(fs::is_directory(root() + "/pod-a/rails"));
}

// The pod's lock is in the state directory: a lock a pod holds in its own tree (where the
// lock used to be) stops nothing, and a stuck holder of the real one is waited on for a
// bounded time, then 11.
TEST_F(PodInfoStoreTest, LocksPodsCannotHoldAndWaitsThatEnd) {
  fs::create_directories(root());
  auto pods_lock = FileLock::acquire(root() + "/.lock");
  ASSERT_TRUE(pods_lock.ok());
  ASSERT_TRUE(store().put({"pod-a", "s", "net1"}, roce_rail("net1", "d", "10.0.0.2/24", 1)));
  auto held = FileLock::acquire(locks() + "/pod-pod-a.lock");
  ASSERT_TRUE(held.ok()) << held.error().msg();
  auto t0 = std::chrono::steady_clock::now();
  auto put = store(std::chrono::milliseconds(200))
                 .put({"pod-a", "s", "net2"}, roce_rail("net2", "e", "10.0.1.2/24", 1));
  ASSERT_FALSE(put.ok());
  EXPECT_EQ(put.error().kind(), ErrorKind::kTryAgainLater) << put.error().msg();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

}  // namespace
}  // namespace rdmanet::plugin
