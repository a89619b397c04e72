// Claims, adoption and release of blocks, and their races, with nodes that are
// real allocators and stores (one directory each) sharing one FakeEtcd. The
// fake's hook runs one node's whole ADD between two calls of another, and its
// faults lose answers exactly where a leader change would. After each scenario
// the invariant holds: no address has two owners in the cluster.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <set>
#include <thread>

#include "base/hex.h"
#include "cni/error_code.h"
#include "ipam/allocator.h"
#include "ipam/cluster.h"
#include "ipam/etcd_layout.h"
#include "ipam/testing/fake_etcd.h"
#include "ipam/testing/test_util.h"

namespace rdmanet::ipam {
namespace {

using nlohmann::json;
using Fault = FakeEtcd::Fault;

constexpr const char* kNetwork = "rail0";
constexpr const char* kBlockKeys = "/blocks/";

struct Node {
  std::string name;
  std::string dir;
  int64_t clock = 1000;  // unix seconds, as ClusterBlocks sees them
  std::unique_ptr<ClusterBlocks> blocks;
  std::unique_ptr<Allocator> allocator;
};

class ClusterRace : public ::testing::Test {
 protected:
  void SetUp() override { spdlog::set_level(spdlog::level::warn); }
  void TearDown() override { spdlog::set_level(spdlog::level::info); }

  // 10.1.0.0/26 (gateway .1) in `block_size` blocks: four /28s by default.
  IpamConfig config(int block_size, int release_after) {
    auto c = parse_ipam_config(testing::ipam_with(
        testing::cluster_conf({{"blockSize", block_size}, {"releaseAfter", release_after}}),
        json::parse(R"([[{"subnet": "10.1.0.0/26", "gateway": "10.1.0.1"}]])")));
    EXPECT_TRUE(c) << c.error().msg();
    return *c;
  }

  Node& node(const std::string& name, int block_size = 28, int release_after = 600) {
    auto n = std::make_unique<Node>();
    n->name = name;
    n->dir = tmp_.path() + "/" + name;
    IpamConfig c = config(block_size, release_after);
    Node* raw = n.get();
    n->blocks = std::make_unique<ClusterBlocks>(c, kNetwork, name, etcd_, false,
                                                [raw] { return raw->clock; });
    n->allocator = std::make_unique<Allocator>(
        c, n->dir, [](const std::string&) { return true; }, n->blocks.get());
    nodes_.push_back(std::move(n));
    return *raw;
  }

  // A node name whose claims start at the same block as `other`'s (see claim_free).
  static std::string same_start_as(const std::string& other, size_t blocks = 4) {
    for (int k = 0;; ++k) {
      std::string name = "node-" + std::to_string(k);
      if (name != other && fnv1a64(name) % blocks == fnv1a64(other) % blocks) {
        return name;
      }
    }
  }

  static Expected<IpAddr> add(Node& n, const std::string& cid) {
    TRY_ASSIGN(auto got, n.allocator->add({{cid, "eth0"}, "/var/run/netns/" + cid}, {}));
    return got.front().ip;
  }
  static Status del(Node& n, const std::string& cid) { return n.allocator->del({cid, "eth0"}); }

  static NodeBlocks listed(const Node& n) {
    auto b = load_node_blocks(n.dir, n.name);
    EXPECT_TRUE(b) << b.error().msg();
    return b ? *b : NodeBlocks{};
  }
  static std::vector<std::string> held(const Node& n) {
    std::vector<std::string> out;
    for (const auto& h : listed(n).held) {
      out.push_back(h.block.str());
    }
    return out;
  }
  static std::vector<std::string> releasing(const Node& n) {
    std::vector<std::string> out;
    for (const auto& h : listed(n).releasing) {
      out.push_back(h.block.str());
    }
    return out;
  }

  std::string key_of(const std::string& block) {
    return block_key(*config(28, 600).cluster, kNetwork, *parse_prefix(block));
  }
  // Block -> owner, as etcd has them.
  std::map<std::string, std::string> owners() {
    std::string prefix = blocks_prefix(*config(28, 600).cluster, kNetwork);
    std::map<std::string, std::string> out;
    for (const auto& kv : etcd_.with_prefix(prefix)) {
      out[block_of_key(kv.key, prefix)->str()] = block_owner(kv.value);
    }
    return out;
  }

  // No two blocks in etcd share an address; every block a node lists is its own in
  // etcd, at the revision the node will compare; every lease lies in a block etcd
  // gives the lease's node.
  void expect_invariant() {
    std::string prefix = blocks_prefix(*config(28, 600).cluster, kNetwork);
    auto kvs = etcd_.with_prefix(prefix);
    for (size_t i = 0; i < kvs.size(); ++i) {
      for (size_t j = i + 1; j < kvs.size(); ++j) {
        Prefix a = *block_of_key(kvs[i].key, prefix);
        Prefix b = *block_of_key(kvs[j].key, prefix);
        EXPECT_FALSE(a.contains(b.network()) || b.contains(a.network()))
            << a.str() << " and " << b.str() << " overlap";
      }
    }
    auto owner_of = [&](const IpAddr& ip) -> std::string {
      for (const auto& kv : kvs) {
        if (block_of_key(kv.key, prefix)->contains(ip)) {
          return block_owner(kv.value);
        }
      }
      return "nobody";
    };
    for (const auto& n : nodes_) {
      for (const auto& h : listed(*n).held) {
        auto kv = etcd_.get(block_key(*config(28, 600).cluster, kNetwork, h.block));
        ASSERT_TRUE(kv) << n->name << " lists " << h.block.str() << ", which etcd does not have";
        EXPECT_EQ(block_owner(kv->value), n->name) << h.block.str();
        EXPECT_EQ(kv->mod_revision, h.revision) << h.block.str();
      }
      auto store = Store::open(n->dir);
      ASSERT_TRUE(store) << store.error().msg();
      auto leased = store->leased_addresses();
      ASSERT_TRUE(leased) << leased.error().msg();
      for (const auto& ip : *leased) {
        EXPECT_EQ(owner_of(ip), n->name) << ip.str() << " is leased by " << n->name;
      }
    }
  }

  void release_unanswered_then_gc(Fault fault);

  testing::TempDir tmp_;
  FakeEtcd etcd_;
  std::vector<std::unique_ptr<Node>> nodes_;
};

bool in_block(const IpAddr& ip, const std::string& block) {
  return parse_prefix(block)->contains(ip);
}

// Node b claims the very block node a is about to claim, between a's read of the
// network's keys and a's transaction: a's comparison fails, the block is b's, and a
// takes the next one.
TEST_F(ClusterRace, TwoNodesClaimingTheSameBlockAtOnceGetDifferentBlocks) {
  Node& a = node("node-a");
  Node& b = node(same_start_as("node-a"));
  std::optional<IpAddr> b_ip;
  etcd_.before_each_call([&](const FakeEtcd::Call& call) {
    if (!b_ip && call.is_txn && call.touches(kBlockKeys)) {
      auto got = add(b, "b1");
      ASSERT_TRUE(got) << got.error().msg();
      b_ip = *got;
    }
  });
  auto a_ip = add(a, "a1");
  ASSERT_TRUE(a_ip) << a_ip.error().msg();
  ASSERT_TRUE(b_ip);
  EXPECT_EQ(etcd_.failed_compares(), 1U) << "the two claims did not meet";
  ASSERT_EQ(held(a).size(), 1U);
  ASSERT_EQ(held(b).size(), 1U);
  EXPECT_NE(held(a), held(b));
  EXPECT_TRUE(in_block(*a_ip, held(a)[0]));
  EXPECT_TRUE(in_block(*b_ip, held(b)[0]));
  EXPECT_EQ(owners().size(), 2U);
  expect_invariant();
}

// The same with real threads: four nodes, 12 ADDs each, in /30 blocks (at most four
// addresses), so that claims contend all the time.
TEST_F(ClusterRace, FourNodesClaimingConcurrentlyNeverShareABlockOrAnAddress) {
  std::vector<Node*> ns;
  for (const char* name : {"n1", "n2", "n3", "n4"}) {
    ns.push_back(&node(name, 30));
  }
  std::vector<std::vector<IpAddr>> got(ns.size());
  std::vector<std::thread> threads;
  for (size_t k = 0; k < ns.size(); ++k) {
    threads.emplace_back([&, k] {
      for (int i = 0; i < 12; ++i) {
        auto ip = add(*ns[k], "c" + std::to_string(i));
        if (ip) {
          got[k].push_back(*ip);
        }
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  std::set<IpAddr> all;
  size_t total = 0;
  for (const auto& list : got) {
    all.insert(list.begin(), list.end());
    total += list.size();
  }
  // 16 blocks hold 61 addresses (.0, the gateway .1 and .63 are reserved); 48 are
  // asked for, and a node leaves at most 3 unused in its last block.
  EXPECT_EQ(total, 48U);
  EXPECT_EQ(all.size(), total) << "an address was handed out twice";
  expect_invariant();
}

// The claim committed, its answer was lost, and the client's retry on another member
// failed its comparison (the key exists now): the key names this node, so the block is
// this claim's. No second block is claimed.
TEST_F(ClusterRace, AClaimWhoseAnswerWasLostIsRecognisedAsTheNodes) {
  Node& a = node("node-a");
  etcd_.inject(Fault::kRetriedAfterCommit, kBlockKeys);
  auto ip = add(a, "a1");
  ASSERT_TRUE(ip) << ip.error().msg();
  ASSERT_EQ(owners().size(), 1U);
  EXPECT_EQ(owners().begin()->second, "node-a");
  EXPECT_EQ(held(a), std::vector<std::string>{owners().begin()->first});
  EXPECT_EQ(etcd_.failed_compares(), 1U);
  expect_invariant();
}

// The whole call failed after the commit (no member answered in time): ADD fails with
// 11 and lists nothing, and the next ADD takes that block back rather than another.
TEST_F(ClusterRace, AClaimThatFailedAfterItsCommitIsTakenBackByTheNextAdd) {
  Node& a = node("node-a");
  etcd_.inject(Fault::kAnswerLost, kBlockKeys);
  auto failed = add(a, "a1");
  ASSERT_FALSE(failed);
  EXPECT_EQ(cni::error_code(failed.error()), 11) << failed.error().msg();
  ASSERT_EQ(owners().size(), 1U);
  EXPECT_TRUE(held(a).empty());
  auto ip = add(a, "a1");
  ASSERT_TRUE(ip) << ip.error().msg();
  EXPECT_EQ(owners().size(), 1U) << "a second block was claimed";
  EXPECT_EQ(held(a), std::vector<std::string>{owners().begin()->first});
  expect_invariant();
}

// A block etcd gives the node but the node does not list (a kill between the two
// writes) is adopted by a rewrite; the rewrite's answer is lost and the retry fails
// its comparison (the revision moved): the key still names this node at a new
// revision, so the adoption is the node's.
TEST_F(ClusterRace, AnAdoptionWhoseAnswerWasLostIsRecognisedAsTheNodes) {
  Node& a = node("node-a");
  auto first = add(a, "a1");
  ASSERT_TRUE(first) << first.error().msg();
  std::string block = held(a).at(0);
  int64_t claimed_at = etcd_.get(key_of(block))->mod_revision;
  ASSERT_EQ(unlink((a.dir + "/blocks.json").c_str()), 0);
  etcd_.inject(Fault::kRetriedAfterCommit, kBlockKeys);
  auto second = add(a, "a2");
  ASSERT_TRUE(second) << second.error().msg();
  EXPECT_TRUE(in_block(*second, block));
  EXPECT_NE(*second, *first);
  EXPECT_EQ(held(a), std::vector<std::string>{block});
  EXPECT_GT(etcd_.get(key_of(block))->mod_revision, claimed_at) << "not rewritten";
  EXPECT_EQ(owners().size(), 1U);
  expect_invariant();
}

// The DEL that empties a block sends its delete, which stays in flight (no answer).
// The next ADD finds the block still the node's in etcd and takes it back with a
// rewrite; when the old delete lands at last, it compares the old revision and fails.
// Without the rewrite it would delete a block the node allocates from, and another
// node could claim it: two owners.
TEST_F(ClusterRace, AReleaseRacingAReAdoptionNeverLeavesTheBlockTwoOwners) {
  Node& a = node("node-a", 28, 0);
  Node& b = node(same_start_as("node-a"), 28, 0);
  ASSERT_TRUE(add(a, "a1"));
  std::string block = held(a).at(0);
  etcd_.inject(Fault::kInFlight, kBlockKeys);
  ASSERT_TRUE(del(a, "a1"));
  EXPECT_TRUE(held(a).empty());
  EXPECT_EQ(releasing(a), std::vector<std::string>{block});
  auto again = add(a, "a2");
  ASSERT_TRUE(again) << again.error().msg();
  EXPECT_TRUE(in_block(*again, block));
  EXPECT_EQ(held(a), std::vector<std::string>{block});
  EXPECT_TRUE(releasing(a).empty());
  etcd_.deliver_in_flight();
  EXPECT_EQ(owners()[block], "node-a") << "the late delete removed a block in use";
  auto other = add(b, "b1");  // starts at the same block
  ASSERT_TRUE(other) << other.error().msg();
  EXPECT_FALSE(in_block(*other, block));
  expect_invariant();
}

// The same delete landing before the next claim: the release happened after all, the
// node forgets it and claims afresh.
TEST_F(ClusterRace, AReleaseThatLandsLateIsForgottenByTheNextClaim) {
  Node& a = node("node-a", 28, 0);
  ASSERT_TRUE(add(a, "a1"));
  etcd_.inject(Fault::kInFlight, kBlockKeys);
  ASSERT_TRUE(del(a, "a1"));
  etcd_.deliver_in_flight();
  EXPECT_TRUE(owners().empty());
  ASSERT_TRUE(add(a, "a2"));
  EXPECT_TRUE(releasing(a).empty());
  EXPECT_EQ(held(a).size(), 1U);
  expect_invariant();
}

TEST_F(ClusterRace, ABlockSizeOtherThanTheNetworksIsError7) {
  Node& a = node("node-a", 28);
  Node& b = node("node-b", 27);
  ASSERT_TRUE(add(a, "a1"));
  auto refused = add(b, "b1");
  ASSERT_FALSE(refused);
  EXPECT_EQ(cni::error_code(refused.error()), 7);
  EXPECT_NE(refused.error().msg().find("ipam.cluster.blockSize"), std::string::npos)
      << refused.error().msg();
  EXPECT_TRUE(held(b).empty());
  EXPECT_EQ(owners().size(), 1U);
  expect_invariant();
}

// Two sizes on a fresh network: node b (/27) records its sizes and claims between
// node a's (/28) read and a's recording of the sizes. One size wins; a gets 7 and no
// block, so no two blocks overlap.
TEST_F(ClusterRace, TwoBlockSizesClaimingAtOnceNeverOverlap) {
  Node& a = node("node-a", 28);
  Node& b = node("node-b", 27);
  bool ran = false;
  etcd_.before_each_call([&](const FakeEtcd::Call& call) {
    if (!ran && call.is_txn && call.touches("/blockSizes")) {
      ran = true;
      auto got = add(b, "b1");
      EXPECT_TRUE(got) << got.error().msg();
    }
  });
  auto refused = add(a, "a1");
  ASSERT_TRUE(ran);
  ASSERT_FALSE(refused);
  EXPECT_EQ(cni::error_code(refused.error()), 7) << refused.error().msg();
  EXPECT_TRUE(held(a).empty());
  EXPECT_EQ(held(b).size(), 1U);
  expect_invariant();
}

// The sizes change between a node's check and its claim (every block was given back,
// the blockSizes key deleted, and a node with other sizes claimed first): the claim
// compares the revision of the sizes it checked, so it fails instead of claiming a
// /28 inside the other node's /27.
TEST_F(ClusterRace, AClaimFailsWhenTheBlockSizesChangedSinceItsCheck) {
  Node& a = node("node-a", 28);
  size_t a_first = fnv1a64("node-a") % 4;  // a's first /28; /27 number a_first / 2 holds it
  std::string b_name;
  for (int k = 0; b_name.empty(); ++k) {
    std::string name = "node-" + std::to_string(k);
    if (fnv1a64(name) % 2 == a_first / 2) {
      b_name = name;
    }
  }
  Node& b = node(b_name, 27);
  bool ran = false;
  etcd_.before_each_call([&](const FakeEtcd::Call& call) {
    if (!ran && call.is_txn && call.touches(kBlockKeys)) {
      ran = true;
      etcd_.erase(block_sizes_key(*config(28, 600).cluster, kNetwork));
      auto got = add(b, "b1");
      EXPECT_TRUE(got) << got.error().msg();
    }
  });
  auto refused = add(a, "a1");
  ASSERT_TRUE(ran);
  EXPECT_FALSE(refused);
  EXPECT_TRUE(held(a).empty());
  EXPECT_EQ(held(b).size(), 1U);
  expect_invariant();
}

// A delete etcd does not answer may still happen: the block is neither used nor given
// up (kept as releasing) until GC learns the outcome, whichever it was.
void ClusterRace::release_unanswered_then_gc(Fault fault) {
  Node& a = node("node-a", 28, 0);
  ASSERT_TRUE(add(a, "a1"));
  std::string block = held(a).at(0);
  etcd_.inject(fault, kBlockKeys);
  ASSERT_TRUE(del(a, "a1"));  // the DEL itself succeeds
  EXPECT_TRUE(held(a).empty());
  EXPECT_EQ(releasing(a), std::vector<std::string>{block});
  EXPECT_EQ(owners().count(block), fault == Fault::kUnavailable ? 1U : 0U);
  ASSERT_TRUE(a.allocator->gc({}));
  EXPECT_TRUE(releasing(a).empty());
  EXPECT_TRUE(owners().empty());
  expect_invariant();
}

TEST_F(ClusterRace, AReleaseEtcdDidNotCommitIsKeptReleasingAndFinishedByGc) {
  release_unanswered_then_gc(Fault::kUnavailable);
}

TEST_F(ClusterRace, AReleaseWhoseAnswerWasLostIsKeptReleasingAndFinishedByGc) {
  release_unanswered_then_gc(Fault::kAnswerLost);
}

// GC empties two blocks; the first delete is not answered: the round stops there and
// the node keeps the other block, given back by the next GC.
TEST_F(ClusterRace, TheFirstUnansweredReleaseEndsTheRound) {
  Node& a = node("node-a", 29, 0);  // /29 blocks: at most eight addresses
  for (int i = 0; i < 9; ++i) {
    ASSERT_TRUE(add(a, "a" + std::to_string(i)));
  }
  ASSERT_EQ(held(a).size(), 2U);
  etcd_.inject(Fault::kUnavailable, kBlockKeys);
  ASSERT_TRUE(a.allocator->gc({}));
  EXPECT_EQ(releasing(a).size(), 1U);
  EXPECT_EQ(held(a).size(), 1U);
  EXPECT_EQ(owners().size(), 2U);
  ASSERT_TRUE(a.allocator->gc({}));
  EXPECT_TRUE(releasing(a).empty());
  EXPECT_TRUE(held(a).empty());
  EXPECT_TRUE(owners().empty());
}

TEST_F(ClusterRace, AnEmptyBlockIsReleasedAfterReleaseAfterAndNotBefore) {
  Node& a = node("node-a", 28, 600);
  ASSERT_TRUE(add(a, "a1"));
  ASSERT_TRUE(del(a, "a1"));  // empty since 1000
  a.clock = 1599;
  ASSERT_TRUE(a.allocator->gc({}));
  EXPECT_EQ(held(a).size(), 1U);
  EXPECT_EQ(owners().size(), 1U);
  a.clock = 1600;
  ASSERT_TRUE(a.allocator->gc({}));
  EXPECT_TRUE(held(a).empty());
  EXPECT_TRUE(owners().empty());
}

}  // namespace
}  // namespace rdmanet::ipam
