#include "ipam/index.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "ipam/testing/test_util.h"

namespace rdmanet::ipam {
namespace {

using nlohmann::json;

using testing::ip;

// 10.1.0.1-10.1.0.254 with the gateway .1 reserved: ordinal n is 10.1.0.(n+1).
std::vector<Pool> pools(const std::string& exclude = "10.9.0.0/24") {
  auto c = parse_ipam_config(json::parse(R"({"ranges": [[{"subnet": "10.1.0.0/24"}]],
                                             "exclude": [")" +
                                         exclude + R"("]})"));
  EXPECT_TRUE(c) << c.error().msg();
  return {Pool(c->range_sets[0], c->exclude)};
}

class IndexTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = Store::open(tmp_.path() + "/net");
    ASSERT_TRUE(s) << s.error().msg();
    store_.emplace(std::move(*s));
    for (const char* a : {"10.1.0.2", "10.1.0.3"}) {
      ASSERT_TRUE(*store_->claim(Lease{ip(a), {"c", "eth0"}}));
    }
  }
  std::string file() const { return tmp_.path() + "/net/index/0"; }
  u128 next_free(AllocationIndex& index, u128 from = 0) {
    auto n = index.next_free(*store_, 0, from);
    EXPECT_TRUE(n) << n.error().msg();
    return n && *n ? **n : ~u128{0};
  }

  testing::TempDir tmp_;
  std::optional<Store> store_;
};

TEST_F(IndexTest, AMissingIndexIsRebuiltFromTheLeases) {
  auto p = pools();
  AllocationIndex index;
  index.reset(&p);
  EXPECT_EQ(next_free(index), 3U);  // .1 is the gateway, .2 and .3 are leased
  EXPECT_EQ(*index.cursor(*store_, 0), 0U);
  EXPECT_TRUE(std::filesystem::exists(file()));
}

TEST_F(IndexTest, MarksAndTheCursorPersistForTheNextProcess) {
  auto p = pools();
  {
    AllocationIndex index;
    index.reset(&p);
    ASSERT_EQ(next_free(index), 3U);
    index.mark(*store_, 0, 3, true, true);    // .4 handed out
    index.mark(*store_, 0, 1, false, false);  // .2 released
  }
  AllocationIndex index;
  index.reset(&p);
  EXPECT_EQ(*index.cursor(*store_, 0), 4U);
  EXPECT_EQ(next_free(index, 3), 4U);
  EXPECT_EQ(next_free(index), 1U);
  index.mark(*store_, 0, 253, true, true);  // the last ordinal: the cursor wraps
  AllocationIndex again;
  again.reset(&p);
  EXPECT_EQ(*again.cursor(*store_, 0), 0U);
}

// The leases always win: an index made for another configuration, or torn, is
// rebuilt from them (a taken bit without a lease is free again).
TEST_F(IndexTest, AnIndexForAnotherConfigOrTornIsRebuilt) {
  auto p = pools();
  {
    AllocationIndex index;
    index.reset(&p);
    ASSERT_EQ(next_free(index), 3U);
    index.mark(*store_, 0, 3, true, false);
  }
  auto other = pools("10.1.0.100");
  AllocationIndex changed;
  changed.reset(&other);
  EXPECT_EQ(next_free(changed), 3U);
  EXPECT_EQ(next_free(changed, 99), 100U);  // ordinal 99, 10.1.0.100, is excluded now
  // Torn (a crash, a full disk): not trusted either.
  AllocationIndex marked;
  marked.reset(&other);
  marked.mark(*store_, 0, 3, true, false);
  ASSERT_EQ(truncate(file().c_str(), 70), 0);
  AllocationIndex torn;
  torn.reset(&other);
  EXPECT_EQ(next_free(torn), 3U);
}

// DEL marks addresses free without an index: it never reads every lease to make one.
TEST_F(IndexTest, MarkingWithoutAnIndexOnDiskWritesNothing) {
  auto p = pools();
  AllocationIndex index;
  index.reset(&p);
  index.mark(*store_, 0, 1, false, false);
  EXPECT_FALSE(std::filesystem::exists(file()));
}

TEST_F(IndexTest, PoolsTooLargeForABitmapKeepOnlyTheCursor) {
  auto c = parse_ipam_config(json::parse(R"({"ranges": [[{"subnet": "fd00::/64"}]]})"));
  ASSERT_TRUE(c);
  std::vector<Pool> p{Pool(c->range_sets[0], c->exclude)};
  ASSERT_FALSE(p[0].has_bitmap());
  {
    AllocationIndex index;
    index.reset(&p);
    ASSERT_EQ(*index.cursor(*store_, 0), 0U);
    index.mark(*store_, 0, u128{1} << 40, true, true);
  }
  EXPECT_EQ(std::filesystem::file_size(file()), 64U);  // the header alone
  AllocationIndex index;
  index.reset(&p);
  EXPECT_EQ(*index.cursor(*store_, 0), (u128{1} << 40) + 1);
}

}  // namespace
}  // namespace rdmanet::ipam
