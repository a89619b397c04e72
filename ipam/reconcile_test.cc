// The node agent's reconcile of one network, as it runs it in process.
#include "ipam/reconcile.h"

#include <gtest/gtest.h>

#include <chrono>

#include "ipam/store.h"
#include "ipam/testing/test_util.h"

namespace rdmanet::ipam {
namespace {

using nlohmann::json;
using testing::TempDir;

json section(const std::string& data_dir) {
  return {
      {"type", "rdmanet-ipam"}, {"dataDir", data_dir}, {"ranges", {{{{"subnet", "10.9.0.0/24"}}}}}};
}

TEST(Reconcile, ReportsEachRangeSetOfTheNetwork) {
  TempDir tmp;
  auto report = reconcile_network({"rail0", section(tmp.path()), {}});
  ASSERT_TRUE(report) << report.error().msg();
  EXPECT_FALSE(report->cluster);
  ASSERT_EQ(report->pools.size(), 1U);
  EXPECT_EQ(report->pools[0].where, "ipam.ranges[0]");
  EXPECT_EQ(report->pools[0].size, 253);
  EXPECT_EQ(report->pools[0].used, 0U);
  EXPECT_FALSE(report->silent_nodes) << "node mode lists no block owners";
  EXPECT_TRUE(report->etcd_error.empty());
}

// The agent runs reconcile in its own process: a call that holds the store's lock (a stuck
// ADD, say) fails that network's reconcile after the bound, instead of stalling the round.
TEST(Reconcile, AStoreLockHeldByAnotherCallFailsAfterTheWait) {
  TempDir tmp;
  auto held = Store::open(tmp.path() + "/rail0");
  ASSERT_TRUE(held) << held.error().msg();
  ReconcileRequest request{"rail0", section(tmp.path()), {}};
  request.lock_wait = std::chrono::milliseconds(200);
  const auto start = std::chrono::steady_clock::now();
  auto report = reconcile_network(request);
  const auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(report);
  EXPECT_EQ(report.error().kind(), ErrorKind::kTryAgainLater);
  EXPECT_NE(report.error().msg().find(tmp.path() + "/rail0/lock"), std::string::npos)
      << report.error().msg();
  EXPECT_GE(waited, std::chrono::milliseconds(200));
}

}  // namespace
}  // namespace rdmanet::ipam
