#include "plugin/store.h"

#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

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
  EXPECT_EQ(all->records.size(), 1U);
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

// DEL trusts what it reads: a state root that others could write to (or a symlink) is not
// believed, for reading as for writing, and the error (107) names it.
TEST_F(Store, AnUntrustedRootIsNotBelieved) {
  StateStore store(dir_ + "/state");
  ASSERT_TRUE(store.save(sample()).ok());
  fs::permissions(dir_ + "/state", fs::perms(0777));
  auto loaded = store.load(sample().id());
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(cni::error_code(loaded.error()), 107);
  EXPECT_NE(loaded.error().msg().find(dir_ + "/state"), std::string::npos) << loaded.error().msg();
  EXPECT_FALSE(store.holder("pci-x").ok());
  EXPECT_FALSE(store.list("rail0").ok());
  EXPECT_FALSE(store.save(sample()).ok());
  fs::permissions(dir_ + "/state", fs::perms(0700));
  fs::rename(dir_ + "/state", dir_ + "/real");
  fs::create_directory_symlink(dir_ + "/real", dir_ + "/state");
  EXPECT_FALSE(store.load(sample().id()).ok()) << "a symlinked root was followed";
  // Not there at all: nothing recorded, which is no error.
  StateStore none(dir_ + "/nowhere");
  auto nothing = none.load(sample().id());
  ASSERT_TRUE(nothing.ok()) << nothing.error().msg();
  EXPECT_FALSE(nothing->has_value());
}

// A record in another attachment's file (forged, or copied by hand) is not believed.
TEST_F(Store, ARecordInAnotherAttachmentsFileIsRefused) {
  StateStore store(dir_ + "/state");
  AttachmentRecord other = sample();
  other.container_id = "someone-else";
  ASSERT_TRUE(store.save(other).ok());
  fs::rename(dir_ + "/state/rail0/someone-else." + hex("net1") + ".json",
             dir_ + "/state/rail0/abc." + hex("net1") + ".json");
  auto loaded = store.load(sample().id());
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(cni::error_code(loaded.error()), 107);
  auto listing = store.list("rail0");
  ASSERT_TRUE(listing.ok());
  EXPECT_TRUE(listing->records.empty());
  ASSERT_EQ(listing->unreadable.size(), 1U);
  EXPECT_NE(listing->unreadable[0].error.msg().find("abc."), std::string::npos);
}

// GC's listing names each file it cannot read and goes on with the others.
TEST_F(Store, TheListingNamesUnreadableFilesAndKeepsTheRest) {
  StateStore store(dir_ + "/state");
  ASSERT_TRUE(store.save(sample()).ok());
  std::ofstream(dir_ + "/state/rail0/broken." + hex("net1") + ".json") << "{\"version\": 2";
  fs::create_directory(dir_ + "/state/rail0/dir." + hex("net1") + ".json");
  auto listing = store.list("rail0");
  ASSERT_TRUE(listing.ok()) << listing.error().msg();
  EXPECT_EQ(listing->records.size(), 1U);
  EXPECT_EQ(listing->unreadable.size(), 2U);
}

// A DEL of nothing must work on a read-only state directory: nothing to remove means no
// unlink, which a read-only mount refuses before it looks.
TEST_F(Store, ForgettingNothingWorksOnAReadOnlyDirectory) {
  ASSERT_EQ(geteuid(), 0U) << "needs root for a read-only bind mount; it does not skip";
  StateStore store(dir_ + "/state");
  ASSERT_TRUE(store.save(sample()).ok());
  std::string ro = dir_ + "/state";
  ASSERT_EQ(::mount(ro.c_str(), ro.c_str(), nullptr, MS_BIND, nullptr), 0) << strerror(errno);
  struct Unmount {
    std::string path;
    ~Unmount() { ::umount2(path.c_str(), MNT_DETACH); }
  } unmount{ro};
  ASSERT_EQ(::mount(nullptr, ro.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr), 0)
      << strerror(errno);
  EXPECT_TRUE(store.forget({"rail0", "nobody", "net1"}).ok());
  auto s = store.forget(sample().id());
  ASSERT_FALSE(s.ok()) << "a record that is there cannot be removed read-only";
  EXPECT_NE(s.error().msg().find("Read-only"), std::string::npos) << s.error().msg();
}

}  // namespace
}  // namespace rdmanet::plugin
