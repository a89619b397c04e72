#include "ipam/allocator.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <set>

#include "ipam/testing/test_util.h"

namespace rdmanet::ipam {
namespace {

using testing::TempDir;

using testing::ip;

class AllocatorTest : public ::testing::Test {
 protected:
  // A v4 range set of .2-.6 (/29, gateway .1) unless the test says otherwise.
  Allocator make(const std::string& ipam = R"({"ranges":[[{"subnet":"10.1.0.0/29"}]]})") {
    auto c = parse_ipam_config(nlohmann::json::parse(ipam));
    EXPECT_TRUE(c) << c.error().msg();
    return Allocator(*c, dir(), [this](const std::string& p) { return gone_.count(p) == 0; });
  }
  std::string dir() const { return tmp_.path() + "/net"; }
  static Attachment who(const std::string& cid, const std::string& netns = "/ns/live") {
    return {{cid, "eth0"}, netns, "default", "pod-" + cid, "uid-" + cid};
  }
  static std::vector<std::string> strs(const Expected<std::vector<Allocation>>& a) {
    std::vector<std::string> out;
    for (const auto& x : *a) {
      out.push_back(x.ip.str());
    }
    return out;
  }
  size_t lease_files() const {
    size_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir() + "/leases")) {
      n += e.path().filename().string().rfind(".tmp", 0) == 0 ? 0 : 1;
    }
    return n;
  }

  TempDir tmp_;
  std::set<std::string> gone_;  // netns paths that no longer exist
};

TEST_F(AllocatorTest, AddIsIdempotentAndDistinct) {
  auto a = make();
  auto first = a.add(who("c1"), {});
  ASSERT_TRUE(first) << first.error().msg();
  EXPECT_EQ(strs(first), std::vector<std::string>{"10.1.0.2"});
  EXPECT_EQ((*first)[0].range.gateway.str(), "10.1.0.1");
  EXPECT_EQ(strs(a.add(who("c2"), {})), std::vector<std::string>{"10.1.0.3"});
  // Re-ADD, also from a fresh process (new Allocator): same address.
  EXPECT_EQ(strs(a.add(who("c1"), {})), std::vector<std::string>{"10.1.0.2"});
  EXPECT_EQ(strs(make().add(who("c1"), {})), std::vector<std::string>{"10.1.0.2"});
  EXPECT_EQ(lease_files(), 2U);
  // Same container, other interface: another attachment.
  Attachment net2 = who("c1");
  net2.owner.ifname = "net2";
  EXPECT_EQ(strs(a.add(net2, {})), std::vector<std::string>{"10.1.0.4"});
}

TEST_F(AllocatorTest, DualStackGivesOneAddressPerRangeSet) {
  auto a = make(R"({"ranges":[[{"subnet":"10.1.0.0/24"}],[{"subnet":"fd00::/64"}]]})");
  auto r = a.add(who("c1"), {});
  ASSERT_TRUE(r) << r.error().msg();
  EXPECT_EQ(strs(r), (std::vector<std::string>{"10.1.0.2", "fd00::2"}));
  EXPECT_EQ(strs(a.add(who("c2"), {})), (std::vector<std::string>{"10.1.0.3", "fd00::3"}));
  ASSERT_TRUE(a.del({"c1", "eth0"}));
  EXPECT_EQ(lease_files(), 2U);
}

TEST_F(AllocatorTest, NextFitDoesNotReuseAReleasedAddressAtOnce) {
  auto a = make();
  ASSERT_TRUE(a.add(who("c1"), {}));
  ASSERT_TRUE(a.add(who("c2"), {}));
  ASSERT_TRUE(a.del({"c1", "eth0"}));
  EXPECT_EQ(strs(a.add(who("c3"), {})), std::vector<std::string>{"10.1.0.4"});
  EXPECT_EQ(strs(make().add(who("c4"), {})), std::vector<std::string>{"10.1.0.5"});
}

TEST_F(AllocatorTest, ExhaustionNamesTheRangeAndLeavesNothingBehind) {
  auto a = make(R"({"ranges":[[{"subnet":"10.1.0.0/24"}],
                              [{"subnet":"10.2.0.0/29","rangeStart":"10.2.0.2","rangeEnd":"10.2.0.3"}]]})");
  ASSERT_TRUE(a.add(who("c1"), {}));
  ASSERT_TRUE(a.add(who("c2"), {}));
  auto full = a.add(who("c3"), {});
  ASSERT_FALSE(full);
  EXPECT_EQ(full.error().kind(), ErrorKind::kAddressUnavailable);
  EXPECT_NE(full.error().msg().find("ipam.ranges[1] (10.2.0.2-10.2.0.3)"), std::string::npos)
      << full.error().msg();
  // The v4 address claimed for c3 in the first set was rolled back.
  EXPECT_EQ(lease_files(), 4U);
  auto status = a.status();
  ASSERT_FALSE(status);
  EXPECT_EQ(status.error().kind(), ErrorKind::kNotAvailable);
  EXPECT_NE(status.error().msg().find("ipam.ranges[1]"), std::string::npos);
  ASSERT_TRUE(a.del({"c2", "eth0"}));
  EXPECT_TRUE(a.status());
  EXPECT_TRUE(a.add(who("c3"), {}));
}

TEST_F(AllocatorTest, ExcludedAndGatewayAddressesAreNeverHandedOut) {
  auto a = make(R"({"ranges":[[{"subnet":"10.1.0.0/29","gateway":"10.1.0.3"}]],
                    "exclude":["10.1.0.4/31"]})");
  std::vector<std::string> got;
  for (int i = 0; i < 3; ++i) {
    auto r = a.add(who("c" + std::to_string(i)), {});
    if (r) {
      got.push_back((*r)[0].ip.str());
    }
  }
  EXPECT_EQ(got, (std::vector<std::string>{"10.1.0.1", "10.1.0.2", "10.1.0.6"}));
}

TEST_F(AllocatorTest, StaticRequests) {
  auto a = make(R"({"ranges":[[{"subnet":"10.1.0.0/24"}],[{"subnet":"fd00::/64"}]]})");
  auto r = a.add(who("c1"), {ip("10.1.0.77")});
  ASSERT_TRUE(r) << r.error().msg();
  EXPECT_EQ(strs(r), (std::vector<std::string>{"10.1.0.77", "fd00::2"}));
  auto taken = a.add(who("c2"), {ip("10.1.0.77")});
  ASSERT_FALSE(taken);
  EXPECT_EQ(taken.error().kind(), ErrorKind::kAddressUnavailable);
  EXPECT_NE(taken.error().msg().find("10.1.0.77 is already allocated to c1/eth0"),
            std::string::npos)
      << taken.error().msg();
  auto outside = a.add(who("c2"), {ip("10.9.0.1")});
  ASSERT_FALSE(outside);
  EXPECT_NE(outside.error().msg().find("10.9.0.1 is not in any range"), std::string::npos);
  auto gateway = a.add(who("c2"), {ip("10.1.0.1")});
  ASSERT_FALSE(gateway);
  EXPECT_NE(gateway.error().msg().find("10.1.0.1 is the gateway"), std::string::npos);
  auto two = a.add(who("c2"), {ip("10.1.0.8"), ip("10.1.0.9")});
  ASSERT_FALSE(two);
  EXPECT_EQ(two.error().kind(), ErrorKind::kInvalidConfig);
  EXPECT_EQ(lease_files(), 2U);  // failures left nothing
  EXPECT_EQ(strs(a.add(who("c2"), {ip("fd00::99"), ip("10.1.0.8")})),
            (std::vector<std::string>{"10.1.0.8", "fd00::99"}));
  // A re-ADD asking for what it holds is answered with it; asking for another address is
  // refused (host-local refuses too), never answered with the old one.
  EXPECT_EQ(strs(a.add(who("c1"), {ip("10.1.0.77")})),
            (std::vector<std::string>{"10.1.0.77", "fd00::2"}));
  EXPECT_EQ(strs(a.add(who("c1"), {})), (std::vector<std::string>{"10.1.0.77", "fd00::2"}));
  auto other = a.add(who("c1"), {ip("10.1.0.78")});
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error().kind(), ErrorKind::kAddressUnavailable);
  EXPECT_NE(other.error().msg().find("c1/eth0 already holds 10.1.0.77"), std::string::npos)
      << other.error().msg();
  EXPECT_NE(other.error().msg().find("10.1.0.78"), std::string::npos) << other.error().msg();
  EXPECT_EQ(lease_files(), 4U);  // nothing taken for it
}

// A lease path that is not a file we wrote (planted as root: the store is private): a
// symlink or FIFO is released by GC without following or blocking on it; a directory
// stops GC with kState (107) naming it, and CHECK of the owner names it too.
TEST_F(AllocatorTest, LeasesThatAreNotFilesAreNamedAndNeverFollowed) {
  auto a = make();
  ASSERT_TRUE(a.add(who("c1"), {}));  // 10.1.0.2
  ASSERT_TRUE(a.add(who("c2"), {}));  // 10.1.0.3
  std::string target = tmp_.path() + "/precious";
  std::ofstream(target) << "keep me";
  std::filesystem::remove(dir() + "/leases/10.1.0.2");
  std::filesystem::create_symlink(target, dir() + "/leases/10.1.0.2");
  std::filesystem::remove(dir() + "/leases/10.1.0.3");
  ASSERT_EQ(::mkfifo((dir() + "/leases/10.1.0.3").c_str(), 0600), 0);
  auto check = a.check({"c1", "eth0"});
  ASSERT_FALSE(check);
  EXPECT_EQ(check.error().kind(), ErrorKind::kState);
  EXPECT_NE(check.error().msg().find(dir() + "/leases/10.1.0.2 is a symlink"), std::string::npos)
      << check.error().msg();
  ASSERT_TRUE(a.gc({{"c1", "eth0"}, {"c2", "eth0"}}));
  EXPECT_FALSE(std::filesystem::exists(dir() + "/leases/10.1.0.3"));
  EXPECT_FALSE(std::filesystem::is_symlink(dir() + "/leases/10.1.0.2"));
  EXPECT_TRUE(std::filesystem::exists(target)) << "GC followed the symlink";

  ASSERT_TRUE(a.add(who("c4"), {}));
  std::filesystem::create_directory(dir() + "/leases/10.1.0.6");
  auto gc = a.gc({{"c4", "eth0"}});
  ASSERT_FALSE(gc);
  EXPECT_EQ(gc.error().kind(), ErrorKind::kState);
  EXPECT_NE(gc.error().msg().find(dir() + "/leases/10.1.0.6 is a directory"), std::string::npos)
      << gc.error().msg();
}

TEST_F(AllocatorTest, DelCheckAndGc) {
  auto a = make();
  EXPECT_TRUE(a.del({"nobody", "eth0"}));
  auto check = a.check({"c1", "eth0"});
  ASSERT_FALSE(check);
  EXPECT_EQ(check.error().kind(), ErrorKind::kUnknownContainer);
  ASSERT_TRUE(a.add(who("c1"), {}));
  ASSERT_TRUE(a.add(who("c2"), {}));
  ASSERT_TRUE(a.add(who("c3"), {}));
  EXPECT_TRUE(a.check({"c1", "eth0"}));
  ASSERT_TRUE(a.del({"c1", "eth0"}));
  ASSERT_TRUE(a.del({"c1", "eth0"}));
  EXPECT_FALSE(a.check({"c1", "eth0"}));
  ASSERT_TRUE(a.gc({{"c3", "eth0"}}));
  EXPECT_FALSE(a.check({"c2", "eth0"}));
  EXPECT_TRUE(a.check({"c3", "eth0"}));
  EXPECT_EQ(lease_files(), 1U);
  // A lease the record does not know about is not a valid attachment either.
  std::filesystem::remove(dir() + "/attachments/" + record_name({"c3", "eth0"}));
  EXPECT_FALSE(a.check({"c3", "eth0"}));
  ASSERT_TRUE(a.gc({}));
  EXPECT_EQ(lease_files(), 0U);
}

// Sweep and GC share one release routine but not its rules: GC releases what is not a
// valid attachment's (and a valid one's orphans) and keeps valid records; the sweep
// reclaims by the reclaim rule and drops the records left without a lease.
TEST_F(AllocatorTest, GcKeepsValidRecordsAndTheSweepDropsLeaselessOnes) {
  auto a = make();
  ASSERT_TRUE(a.add(who("c1"), {}));
  {
    auto store = Store::open(dir());
    ASSERT_TRUE(store);
    // c1's orphan from a killed ADD, and a record whose lease is gone (half a DEL).
    ASSERT_TRUE(store->claim(Lease{ip("10.1.0.4"), {"c1", "eth0"}, "/ns/live"}));
    ASSERT_TRUE(store->write_record({{"half", "eth0"}, "/ns/live", {ip("10.1.0.5")}}));
    ASSERT_TRUE(store->sync());
  }
  ASSERT_TRUE(a.gc({{"c1", "eth0"}, {"half", "eth0"}}));
  EXPECT_EQ(lease_files(), 1U);
  EXPECT_TRUE(a.check({"c1", "eth0"}));
  auto half = a.check({"half", "eth0"});
  ASSERT_FALSE(half);
  EXPECT_EQ(half.error().kind(), ErrorKind::kState);  // its record is still there
  for (const char* c : {"c2", "c3", "c4", "c5"}) {
    ASSERT_TRUE(a.add(who(c), {}));
  }
  EXPECT_FALSE(a.add(who("c6"), {}));  // full: the sweep runs and reclaims nothing
  half = a.check({"half", "eth0"});
  ASSERT_FALSE(half);
  EXPECT_EQ(half.error().kind(), ErrorKind::kUnknownContainer);  // the sweep dropped it
}

TEST_F(AllocatorTest, StaleNetnsIsReclaimedWhenThePoolRunsShort) {
  auto a = make();  // 5 addresses
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(a.add(who("c" + std::to_string(i), "/ns/pod" + std::to_string(i)), {}));
  }
  EXPECT_FALSE(a.add(who("new"), {}));
  EXPECT_FALSE(a.status());
  gone_.insert("/ns/pod3");  // the node rebooted under pod3, or its DEL was lost
  EXPECT_TRUE(a.status());
  auto r = a.add(who("new"), {});
  ASSERT_TRUE(r) << r.error().msg();
  EXPECT_EQ(strs(r), std::vector<std::string>{"10.1.0.5"});
  EXPECT_FALSE(a.check({"c3", "eth0"}));
  EXPECT_TRUE(a.check({"c2", "eth0"}));
  // An attachment being re-added is never reclaimed from under itself.
  gone_.insert("/ns/pod0");
  EXPECT_EQ(strs(a.add(who("c0", "/ns/pod0"), {})), std::vector<std::string>{"10.1.0.2"});
}

TEST_F(AllocatorTest, ReconcileReclaimsStaleLeasesButThoseKeptAndCountsUsage) {
  auto a = make(R"({"ranges":[[{"subnet":"10.1.0.0/29"}],[{"subnet":"fd01::/125"}]]})");
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(a.add(who("c" + std::to_string(i), "/ns/pod" + std::to_string(i)), {}));
  }
  gone_.insert("/ns/pod1");
  gone_.insert("/ns/pod2");
  // pod2's attachment is still the main plugin's (it tears it down after its grace).
  auto r = a.reconcile({{"c2", "eth0"}});
  ASSERT_TRUE(r) << r.error().msg();
  EXPECT_EQ(r->released, (std::map<std::string, size_t>{{"stale (netns gone)", 2}}));
  ASSERT_EQ(r->pools.size(), 2U);
  EXPECT_EQ(r->pools[0].where, "ipam.ranges[0]");
  EXPECT_EQ(r->pools[0].size, 5);  // .2-.6: the gateway, network and broadcast are not
  EXPECT_EQ(r->pools[0].used, 2U);
  EXPECT_EQ(r->pools[1].size, 6);  // ::2-::7 (::1 is the gateway, ::0 the subnet router)
  EXPECT_EQ(r->pools[1].used, 2U);
  EXPECT_FALSE(a.check({"c1", "eth0"}));
  EXPECT_TRUE(a.check({"c2", "eth0"}));
  // Without the keep, the next round takes pod2's too; nothing else changes after that.
  r = a.reconcile();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->released.at("stale (netns gone)"), 2U);
  EXPECT_EQ(r->pools[0].used, 1U);
  r = a.reconcile();
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->released.empty());
  EXPECT_EQ(lease_files(), 2U);
}

TEST_F(AllocatorTest, OrphanLeasesFromACrashedAddAreReclaimedOrAdopted) {
  auto a = make();
  ASSERT_TRUE(a.add(who("c1"), {}));
  {
    // What a kill -9 between claiming and writing the record leaves behind.
    auto store = Store::open(dir());
    ASSERT_TRUE(store);
    for (const char* addr : {"10.1.0.3", "10.1.0.4", "10.1.0.5"}) {
      ASSERT_TRUE(store->claim(Lease{ip(addr), {"dead", "eth0"}, "/ns/live"}));
    }
    ASSERT_TRUE(store->claim(Lease{ip("10.1.0.6"), {"c2", "eth0"}, "/ns/live"}));
  }
  // The index does not know about them; the claims hit EEXIST and move on,
  // c2 adopts its own orphan.
  auto c2 = make().add(who("c2"), {});
  ASSERT_TRUE(c2) << c2.error().msg();
  EXPECT_EQ(strs(c2), std::vector<std::string>{"10.1.0.6"});
  // The pool now looks full; the sweep frees the three orphans.
  auto c3 = a.add(who("c3"), {});
  ASSERT_TRUE(c3) << c3.error().msg();
  EXPECT_EQ(lease_files(), 3U);
  EXPECT_TRUE(a.check({"c1", "eth0"}));
  EXPECT_TRUE(a.check({"c2", "eth0"}));
}

TEST_F(AllocatorTest, IndexIsRebuiltWhenMissingOrWrongAndLeasesAlwaysWin) {
  auto a = make();
  ASSERT_TRUE(a.add(who("c1"), {}));
  ASSERT_TRUE(a.add(who("c2"), {}));
  std::filesystem::remove(dir() + "/index/0");
  // Rebuilt from the leases: the cursor is lost, the taken addresses are not.
  EXPECT_EQ(strs(make().add(who("c3"), {})), std::vector<std::string>{"10.1.0.4"});
  std::ofstream(dir() + "/index/0") << "garbage";
  auto c4 = make().add(who("c4"), {});
  ASSERT_TRUE(c4);
  std::set<std::string> seen;
  for (const char* cid : {"c1", "c2", "c3", "c4"}) {
    auto r = make().add(who(cid), {});
    ASSERT_TRUE(r);
    EXPECT_TRUE(seen.insert((*r)[0].ip.str()).second) << (*r)[0].ip.str();
  }
  // A changed config (new exclude) invalidates the index; the leases stay.
  auto b = make(R"({"ranges":[[{"subnet":"10.1.0.0/29"}]],"exclude":["10.1.0.6"]})");
  auto c5 = b.add(who("c5"), {});
  EXPECT_FALSE(c5);  // .2-.5 held, .6 excluded
  EXPECT_TRUE(b.check({"c1", "eth0"}));
}

TEST_F(AllocatorTest, LargeV6PoolsAreProbed) {
  auto a = make(R"({"ranges":[[{"subnet":"fd00::/64"}]]})");
  std::set<std::string> seen;
  for (int i = 0; i < 20; ++i) {
    auto r = a.add(who("c" + std::to_string(i)), {});
    ASSERT_TRUE(r) << r.error().msg();
    EXPECT_TRUE(seen.insert((*r)[0].ip.str()).second);
  }
  ASSERT_TRUE(a.del({"c0", "eth0"}));
  EXPECT_TRUE(a.status());
  EXPECT_EQ(strs(a.add(who("c1"), {})), std::vector<std::string>{"fd00::3"});
  EXPECT_EQ(strs(a.add(who("x"), {})), std::vector<std::string>{"fd00::16"});
}

TEST_F(AllocatorTest, ResultCarriesPrefixGatewayRoutesAndDns) {
  auto c = parse_ipam_config(nlohmann::json::parse(
      R"({"ranges":[[{"subnet":"10.1.0.0/16","gateway":"10.1.255.254"}]],
          "routes":[{"dst":"0.0.0.0/0"}],"dns":{"nameservers":["10.0.0.53"]}})"));
  ASSERT_TRUE(c);
  Allocator a(*c, dir());
  auto r = a.add(who("c1"), {});
  ASSERT_TRUE(r);
  cni::Result result = to_result(*c, *r);
  ASSERT_EQ(result.ips.size(), 1U);
  EXPECT_EQ(result.ips[0].address, "10.1.0.1/16");
  EXPECT_EQ(result.ips[0].gateway, "10.1.255.254");
  EXPECT_FALSE(result.ips[0].interface);
  EXPECT_EQ(result.routes.size(), 1U);
  EXPECT_EQ(result.dns.nameservers.size(), 1U);
}

}  // namespace
}  // namespace rdmanet::ipam
