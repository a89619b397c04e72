#include "plugin/store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "base/hex.h"
#include "base/testing/temp_dir.h"
#include "cni/error_code.h"

namespace rdmanet::plugin {
namespace {

namespace fs = std::filesystem;

AttachmentRecord sample() {
  AttachmentRecord r;
  r.network = "rail0";
  r.container_id = "abc";
  r.ifname = "net1";
  r.netns = "/run/netns/p";
  r.device_key = "pci-x";
  r.steps.push_back({StepKind::kHoldDevice, {{"key", "pci-x"}}});
  return r;
}

class Store : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(tmp_.path().empty()) << "cannot create a temporary directory";
    dir_ = tmp_.path();
  }
  testutil::TempDir tmp_{"rdmanet-store"};
  std::string dir_;
};

mode_t mode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 0777;
}

TEST_F(Store, SavesLoadsAndForgets) {
  StateStore store(dir_ + "/state");
  ASSERT_TRUE(store.save(sample()).ok());
  auto loaded = store.load(sample().id());
  ASSERT_TRUE(loaded.ok()) << loaded.error().msg();
  ASSERT_TRUE(loaded->has_value());
  EXPECT_EQ((*loaded)->steps.size(), 1U);
  EXPECT_FALSE(store.load({"rail0", "abc", "net2"})->has_value());
  ASSERT_TRUE(store.forget(sample().id()).ok());
  EXPECT_FALSE(store.load(sample().id())->has_value());
  EXPECT_TRUE(store.forget(sample().id()).ok()) << "forgetting twice is fine";
}

TEST_F(Store, FilesArePrivate) {
  StateStore store(dir_ + "/state");
  ASSERT_TRUE(store.save(sample()).ok());
  ASSERT_TRUE(store.set_holder("pci-x", sample().id()).ok());
  ASSERT_TRUE(store.lock("pci-x").ok());
  for (const auto& e : fs::recursive_directory_iterator(dir_ + "/state")) {
    mode_t want = e.is_directory() ? 0700 : 0600;
    EXPECT_EQ(mode_of(e.path()), want) << e.path();
  }
}

// A network name up to the spec's limit of any length works (its directory is bounded like
// the file names), and GC's listing finds it.
TEST_F(Store, LongNetworkNamesWork) {
  StateStore store(dir_ + "/state");
  AttachmentRecord r = sample();
  r.network = std::string(200, 'n');
  ASSERT_TRUE(store.save(r).ok());
  EXPECT_TRUE(store.load(r.id())->has_value());
  auto all = store.list(r.network);
  ASSERT_TRUE(all);
  EXPECT_EQ(all->size(), 1U);
}

// DEL trusts the state: a directory others can write to is refused.
TEST_F(Store, DirectoryOthersCanWriteIsRefused) {
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

TEST_F(Store, HostileInterfaceNamesStayInside) {
  StateStore store(dir_ + "/state");
  AttachmentRecord r = sample();
  r.ifname = "../../x";
  ASSERT_TRUE(store.save(r).ok());
  for (const auto& e : fs::recursive_directory_iterator(dir_)) {
    EXPECT_EQ(e.path().string().rfind(dir_ + "/state", 0), 0u) << e.path();
  }
  EXPECT_TRUE(store.load({"rail0", "abc", "../../x"})->has_value());
}

TEST_F(Store, HoldsBelongToOneAttachment) {
  StateStore store(dir_ + "/state");
  AttachmentId mine = sample().id();
  AttachmentId other = mine;
  other.container_id = "def";
  ASSERT_TRUE(store.set_holder("pci-x", mine).ok());
  ASSERT_TRUE(store.clear_holder("pci-x", other).ok());
  auto holder = store.holder("pci-x");
  ASSERT_TRUE(holder.ok() && holder->has_value());
  EXPECT_EQ(**holder, mine) << "another attachment cleared our hold";
  ASSERT_TRUE(store.clear_holder("pci-x", mine).ok());
  EXPECT_FALSE(store.holder("pci-x")->has_value());
}

TEST_F(Store, CorruptStateIsNamed) {
  StateStore store(dir_ + "/state");
  ASSERT_TRUE(store.save(sample()).ok());
  std::string path = dir_ + "/state/rail0/abc." + hex("net1") + ".json";
  ASSERT_TRUE(fs::exists(path));
  fs::resize_file(path, 10);
  auto loaded = store.load(sample().id());
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(cni::error_code(loaded.error()), 107);
  EXPECT_NE(loaded.error().msg().find(path), std::string::npos);
}

// A symlink planted as a state file is not followed (the directory check keeps others out;
// this keeps a mistake from reading some other file as state).
TEST_F(Store, SymlinkedStateFileIsRefused) {
  StateStore store(dir_ + "/state");
  ASSERT_TRUE(store.save(sample()).ok());
  std::string path = dir_ + "/state/rail0/abc." + hex("net1") + ".json";
  fs::rename(path, dir_ + "/elsewhere.json");
  fs::create_symlink(dir_ + "/elsewhere.json", path);
  auto loaded = store.load(sample().id());
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.error().kind(), ErrorKind::kIo);
}

}  // namespace
}  // namespace rdmanet::plugin
