#include "ipam/node_blocks.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "ipam/testing/test_util.h"

namespace rdmanet::ipam {
namespace {

HeldBlock block(const char* prefix, int64_t revision, std::optional<int64_t> empty_since = {}) {
  return {*parse_prefix(prefix), revision, empty_since};
}

TEST(NodeBlocks, RoundTripThroughTheFile) {
  testing::TempDir dir;
  NodeBlocks none = *load_node_blocks(dir.path(), "n1");  // no file: no block
  EXPECT_TRUE(none.held.empty());
  EXPECT_TRUE(none.releasing.empty());
  NodeBlocks blocks;
  blocks.held = {block("10.1.0.64/26", 12, 1700000000), block("fd00::100/120", 13)};
  blocks.releasing = {block("10.1.0.0/26", 9)};
  ASSERT_TRUE(save_node_blocks(dir.path(), "n1", blocks));
  struct stat st {};
  ASSERT_EQ(stat((dir.path() + "/blocks.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600U);
  auto back = load_node_blocks(dir.path(), "n1");
  ASSERT_TRUE(back) << back.error().msg();
  ASSERT_EQ(back->held.size(), 2U);
  EXPECT_EQ(back->held[0].block.str(), "10.1.0.64/26");
  EXPECT_EQ(back->held[0].revision, 12);
  EXPECT_EQ(back->held[0].empty_since, 1700000000);
  EXPECT_FALSE(back->held[1].empty_since);
  ASSERT_EQ(back->releasing.size(), 1U);
  EXPECT_EQ(back->releasing[0].revision, 9);
  EXPECT_TRUE(back->holds(*parse_prefix("fd00::100/120")));
  EXPECT_FALSE(back->holds(*parse_prefix("10.1.0.0/26")));  // releasing is not held
}

TEST(NodeBlocks, DamageAndAnotherNodesFileAreStateErrorsNamingTheFile) {
  for (const char* bad :
       {"", "{", "[]", R"({"node": "n1"})", R"({"node": 1, "blocks": []})",
        R"({"node": "n1", "blocks": {}})", R"({"node": "n1", "blocks": [], "releasing": 3})",
        R"({"node": "n1", "blocks": [{"block": "10.1.0.0/26"}]})",
        R"({"node": "n1", "blocks": [{"block": "x", "revision": 1}]})"}) {
    auto r = parse_node_blocks(bad, "n1", "/s/blocks.json");
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().kind(), ErrorKind::kState);
    EXPECT_EQ(r.error().msg().rfind("/s/blocks.json ", 0), 0U) << r.error().msg();
  }
  auto other = parse_node_blocks(R"({"node": "n2", "blocks": []})", "n1", "/s/blocks.json");
  ASSERT_FALSE(other);
  EXPECT_NE(other.error().msg().find("node n2, this node is n1"), std::string::npos);
  // Written by the node itself: a symlink in its place is not followed.
  testing::TempDir dir;
  std::ofstream(dir.path() + "/elsewhere") << R"({"node": "n1", "blocks": []})";
  ASSERT_EQ(symlink("elsewhere", (dir.path() + "/blocks.json").c_str()), 0);
  auto link = load_node_blocks(dir.path(), "n1");
  ASSERT_FALSE(link);
  EXPECT_EQ(link.error().kind(), ErrorKind::kIo);
}

}  // namespace
}  // namespace rdmanet::ipam
