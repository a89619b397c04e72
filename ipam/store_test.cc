#include "ipam/store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "ipam/testing/test_util.h"

namespace rdmanet::ipam {
namespace {

using testing::TempDir;

using testing::ip;

mode_t mode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

TEST(Store, ClaimIsExclusiveAndLeasesRoundTrip) {
  TempDir tmp;
  auto store = Store::open(tmp.path() + "/net");
  ASSERT_TRUE(store) << store.error().msg();
  Lease lease{ip("10.1.0.2"), {"c1", "eth0"}, "/proc/self/ns/net", "ns", "pod", "uid"};
  auto first = store->claim(lease);
  ASSERT_TRUE(first);
  EXPECT_TRUE(*first);
  Lease other = lease;
  other.owner = {"c2", "eth0"};
  auto second = store->claim(other);
  ASSERT_TRUE(second);
  EXPECT_FALSE(*second);
  ASSERT_TRUE(store->sync());

  auto read = store->read_lease(ip("10.1.0.2"));
  ASSERT_TRUE(read && *read);
  EXPECT_TRUE((*read)->readable);
  EXPECT_EQ((*read)->owner, (Owner{"c1", "eth0"}));
  EXPECT_EQ((*read)->netns, "/proc/self/ns/net");
  EXPECT_EQ((*read)->pod_name, "pod");
  EXPECT_FALSE(*store->read_lease(ip("10.1.0.3")));

  ASSERT_TRUE(store->claim(Lease{ip("fd00::2"), {"c1", "eth0"}}));
  auto all = store->list_leases();
  ASSERT_TRUE(all);
  EXPECT_EQ(all->size(), 2U);
  ASSERT_TRUE(store->release(ip("10.1.0.2")));
  ASSERT_TRUE(store->release(ip("10.1.0.2")));  // already gone: fine
  EXPECT_EQ(store->list_leases()->size(), 1U);

  EXPECT_EQ(mode_of(tmp.path() + "/net"), 0700U);
  EXPECT_EQ(mode_of(tmp.path() + "/net/leases"), 0700U);
  EXPECT_EQ(mode_of(tmp.path() + "/net/leases/fd00::2"), 0600U);
  EXPECT_EQ(mode_of(tmp.path() + "/net/lock"), 0600U);
}

TEST(Store, UnparseableLeaseIsReportedNotFatal) {
  TempDir tmp;
  auto store = Store::open(tmp.path() + "/net");
  ASSERT_TRUE(store);
  std::ofstream(tmp.path() + "/net/leases/10.1.0.9") << "{\"containerID\":";
  auto read = store->read_lease(ip("10.1.0.9"));
  ASSERT_TRUE(read && *read);
  EXPECT_FALSE((*read)->readable);
}

TEST(Store, RecordsRoundTripAndHostileIfnamesStayInside) {
  TempDir tmp;
  auto store = Store::open(tmp.path() + "/net");
  ASSERT_TRUE(store);
  // ifnames may hold bytes libcni allows: none may reach the path.
  for (const char* ifname : {"eth0", "..", "a\\b", "\xff\xfe", "x/../../y", "net*1"}) {
    Owner owner{"c1", ifname};
    std::string name = record_name(owner);
    EXPECT_EQ(name.find('/'), std::string::npos) << name;
    EXPECT_NE(name, "..");
    ASSERT_TRUE(store->write_record({owner, "/ns", {ip("10.1.0.2"), ip("fd00::2")}}));
    auto r = store->read_record(owner);
    ASSERT_TRUE(r && *r);
    EXPECT_EQ((*r)->owner, owner);
    EXPECT_EQ((*r)->ips.size(), 2U);
  }
  EXPECT_EQ(store->list_records()->size(), 6U);
  ASSERT_TRUE(store->remove_record({"c1", "eth0"}));
  EXPECT_FALSE(*store->read_record({"c1", "eth0"}));
  EXPECT_EQ(store->list_records()->size(), 5U);
  // A long container id still gives a valid, distinct file name.
  std::string long_id(300, 'a');
  EXPECT_LT(record_name({long_id, "eth0"}).size(), 255U);
  EXPECT_NE(record_name({long_id, "eth0"}), record_name({long_id + "b", "eth0"}));
  ASSERT_TRUE(store->write_record({{long_id, "eth0"}, "", {}}));
  EXPECT_TRUE(*store->read_record({long_id, "eth0"}));
  EXPECT_FALSE(*store->read_record({long_id + "b", "eth0"}));
}

TEST(Store, IndexFilesAreKeptAsBytes) {
  TempDir tmp;
  auto store = Store::open(tmp.path() + "/net");
  ASSERT_TRUE(store);
  EXPECT_FALSE(*store->read_index(0));
  ASSERT_TRUE(store->write_index(0, "0123456789"));
  ASSERT_TRUE(store->patch_index(0, {{2, "ab"}, {8, "z"}}));
  EXPECT_EQ(**store->read_index(0), "01ab4567z9");
  EXPECT_EQ(mode_of(tmp.path() + "/net/index/0"), 0600U);
  EXPECT_FALSE(store->patch_index(1, {{0, "x"}}));  // in place only: no file, an error
}

TEST(Store, TemporariesAreRemoved) {
  TempDir tmp;
  auto store = Store::open(tmp.path() + "/net");
  ASSERT_TRUE(store);
  std::ofstream(tmp.path() + "/net/leases/.tmp-1-0") << "x";
  std::ofstream(tmp.path() + "/net/attachments/.tmp-1-1") << "x";
  EXPECT_EQ(store->list_leases()->size(), 0U);
  EXPECT_EQ(store->list_records()->size(), 0U);
  ASSERT_TRUE(store->remove_temporaries());
  EXPECT_FALSE(std::filesystem::exists(tmp.path() + "/net/leases/.tmp-1-0"));
  EXPECT_FALSE(std::filesystem::exists(tmp.path() + "/net/attachments/.tmp-1-1"));
}

// Whether process `pid` is (within 30 s) blocked waiting for a flock: /proc/locks lists a
// waiter as "N: -> FLOCK ADVISORY WRITE <pid> ...".
bool waits_in_flock(pid_t pid) {
  for (int i = 0; i < 3000; ++i) {
    std::ifstream locks("/proc/locks");
    std::string line;
    while (std::getline(locks, line)) {
      std::istringstream w(line);
      std::string n, arrow, type, advisory, mode, who;
      w >> n >> arrow >> type >> advisory >> mode >> who;
      if (arrow == "->" && type == "FLOCK" && who == std::to_string(pid)) {
        return true;
      }
    }
    usleep(10 * 1000);
  }
  return false;
}

TEST(Store, LockSerialisesProcesses) {
  TempDir tmp;
  std::string dir = tmp.path() + "/net";
  auto store = Store::open(dir);
  ASSERT_TRUE(store);
  pid_t child = fork();
  if (child == 0) {
    // Drop the descriptor inherited from the parent (flock locks belong to the
    // open file, shared across fork), then block until the parent lets go.
    { Store inherited = std::move(*store); }
    auto s = Store::open(dir);
    std::ofstream(dir + "/child-got-lock") << "1";
    _exit(s ? 0 : 1);
  }
  // Judged once the child waits in flock (a blocked entry of its pid in /proc/locks), not
  // after a guessed pause that a slow child might not have used to get there.
  ASSERT_TRUE(waits_in_flock(child)) << "the child never waited for the lock";
  EXPECT_FALSE(std::filesystem::exists(dir + "/child-got-lock"));
  { Store release = std::move(*store); }
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(std::filesystem::exists(dir + "/child-got-lock"));
}

}  // namespace
}  // namespace rdmanet::ipam
