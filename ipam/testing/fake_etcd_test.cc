// The fake keeps etcd's rules, checked here one by one; each was also seen on
// etcd 3.4.23 (etcdctl and the JSON gateway): a put moves the revision even when
// the value is the same, a delete of a missing key does not, a missing key
// compares as revision 0, one key written twice in a txn is refused.
#include "ipam/testing/fake_etcd.h"

#include <gtest/gtest.h>

namespace rdmanet::ipam {
namespace {

using Target = Compare::Target;

std::vector<std::string> keys_of(const std::vector<KeyValue>& kvs) {
  std::vector<std::string> out;
  out.reserve(kvs.size());
  for (const auto& kv : kvs) {
    out.push_back(kv.key);
  }
  return out;
}

TEST(FakeEtcd, RevisionsMoveAsEtcdsDo) {
  FakeEtcd etcd;
  EXPECT_EQ(etcd.revision(), 1);
  EXPECT_EQ(etcd.put("/a", "1"), 2);
  EXPECT_EQ(etcd.put("/a", "1"), 3);  // the same value is a write too
  auto a = etcd.get("/a");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->create_revision, 2);
  EXPECT_EQ(a->mod_revision, 3);
  // One txn, one revision for all of its writes.
  auto both = etcd.txn({}, {Op{"/b", "x"}, Op{"/c", "y"}});
  ASSERT_TRUE(both);
  EXPECT_TRUE(both->succeeded);
  EXPECT_EQ(both->revision, 4);
  EXPECT_EQ(etcd.get("/b")->mod_revision, 4);
  EXPECT_EQ(etcd.get("/c")->create_revision, 4);
  // Deleting what is not there changes nothing, the revision included.
  auto none = etcd.txn({}, {Op{"/nope", std::nullopt}});
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->succeeded);
  EXPECT_EQ(none->revision, 4);
  auto gone = etcd.txn({}, {Op{"/b", std::nullopt}});
  EXPECT_EQ(gone->revision, 5);
  EXPECT_FALSE(etcd.get("/b"));
}

TEST(FakeEtcd, ComparisonsOnRevisionsAndMissingKeys) {
  FakeEtcd etcd;
  int64_t rev = etcd.put("/k", "v");
  // A missing key has create and mod revision 0: "create only if absent".
  auto absent = etcd.txn({Compare{Target::kCreateRevision, "/new", 0}}, {Op{"/new", "1"}});
  ASSERT_TRUE(absent);
  EXPECT_TRUE(absent->succeeded);
  auto again = etcd.txn({Compare{Target::kCreateRevision, "/new", 0}}, {Op{"/new", "2"}});
  ASSERT_TRUE(again);
  EXPECT_FALSE(again->succeeded);
  EXPECT_EQ(again->revision, etcd.revision());  // a failed comparison writes nothing
  EXPECT_EQ(etcd.get("/new")->value, "1");
  EXPECT_TRUE(etcd.txn({Compare{Target::kModRevision, "/missing", 0}}, {})->succeeded);
  // Every comparison must hold.
  auto stale = etcd.txn(
      {Compare{Target::kModRevision, "/k", rev}, Compare{Target::kModRevision, "/new", rev}},
      {Op{"/k", std::nullopt}});
  EXPECT_FALSE(stale->succeeded);
  EXPECT_TRUE(etcd.get("/k"));
  EXPECT_TRUE(
      etcd.txn({Compare{Target::kModRevision, "/k", rev}}, {Op{"/k", std::nullopt}})->succeeded);
  EXPECT_EQ(etcd.failed_compares(), 2U);
}

TEST(PrefixEnd, SelectsThePrefix) {
  EXPECT_EQ(prefix_end("/a/b/"), "/a/b0");
  EXPECT_EQ(prefix_end(std::string("a\xff", 2)), "b");
  EXPECT_EQ(prefix_end(std::string("\xff", 1)), std::string(1, '\0'));  // every key
}

TEST(FakeEtcd, RangesAndRefusedRequests) {
  FakeEtcd etcd;
  for (const char* k : {"/n/blocks/b", "/n/blocks/a", "/n/blockSizes", "/m/x", "/n0"}) {
    etcd.put(k, "v");
  }
  EXPECT_EQ(keys_of(*etcd.range("/n/", prefix_end("/n/"))),
            (std::vector<std::string>{"/n/blockSizes", "/n/blocks/a", "/n/blocks/b"}));
  EXPECT_EQ(keys_of(*etcd.range("/n/blocks/a", "")), (std::vector<std::string>{"/n/blocks/a"}));
  EXPECT_TRUE(etcd.range("/n/blocks/c", "")->empty());
  EXPECT_EQ(etcd.range("/n/blocks/", std::string(1, '\0'))->size(), 3U);  // "\0": to the end
  auto no_key = etcd.range("", "x");
  ASSERT_FALSE(no_key);
  EXPECT_EQ(no_key.error().kind(), ErrorKind::kIo);
  auto twice = etcd.txn({}, {Op{"/d", "1"}, Op{"/d", std::nullopt}});
  ASSERT_FALSE(twice);
  EXPECT_EQ(twice.error().kind(), ErrorKind::kIo);
  EXPECT_FALSE(etcd.get("/d"));
}

TEST(FakeEtcd, InjectedFaults) {
  FakeEtcd etcd;
  etcd.inject(FakeEtcd::Fault::kUnavailable, "/a");
  etcd.inject(FakeEtcd::Fault::kAnswerLost, "/b");
  etcd.inject(FakeEtcd::Fault::kRetriedAfterCommit, "/c");
  etcd.inject(FakeEtcd::Fault::kInFlight, "/d");
  etcd.inject(FakeEtcd::Fault::kUnavailable, "", true);
  auto create = [&](const std::string& key) {
    return etcd.txn({Compare{Target::kCreateRevision, key, 0}}, {Op{key, "v"}});
  };
  // Faults go to the calls they name, in order, once.
  EXPECT_TRUE(create("/z")->succeeded);
  auto a = create("/a");
  ASSERT_FALSE(a);
  EXPECT_EQ(a.error().kind(), ErrorKind::kTryAgainLater);
  EXPECT_FALSE(etcd.get("/a"));
  EXPECT_FALSE(create("/b"));
  EXPECT_TRUE(etcd.get("/b"));  // committed all the same
  auto c = create("/c");
  ASSERT_TRUE(c);
  EXPECT_FALSE(c->succeeded);  // the retry found the key its first attempt created
  EXPECT_TRUE(etcd.get("/c"));
  EXPECT_FALSE(create("/d"));
  EXPECT_FALSE(etcd.get("/d"));
  auto range = etcd.range("/a", "");
  ASSERT_FALSE(range);
  EXPECT_EQ(range.error().kind(), ErrorKind::kTryAgainLater);
  EXPECT_TRUE(etcd.range("/a", ""));  // used up
  etcd.deliver_in_flight();
  EXPECT_TRUE(etcd.get("/d"));
  EXPECT_TRUE(create("/a")->succeeded);
  EXPECT_EQ(etcd.txns(), 6U);
}

TEST(FakeEtcd, TheHookRunsBeforeEachCallButNotForItsOwn) {
  FakeEtcd etcd;
  std::vector<std::string> seen;
  etcd.before_each_call([&](const FakeEtcd::Call& call) {
    seen.push_back((call.is_txn ? "txn " : "range ") + call.keys.front());
    if (call.touches("/first")) {
      etcd.put("/between", "x");                // direct access: no hook
      EXPECT_TRUE(etcd.range("/between", ""));  // a call: no nested hook
    }
  });
  auto r = etcd.txn({Compare{Target::kCreateRevision, "/first", 0}}, {Op{"/first", "1"}});
  ASSERT_TRUE(r && r->succeeded);
  EXPECT_EQ(etcd.get("/between")->mod_revision, 2);
  EXPECT_EQ(etcd.get("/first")->mod_revision, 3);
  EXPECT_TRUE(etcd.range("/first", ""));
  EXPECT_EQ(seen, (std::vector<std::string>{"txn /first", "range /first"}));
}

}  // namespace
}  // namespace rdmanet::ipam
