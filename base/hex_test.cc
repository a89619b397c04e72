#include "base/hex.h"

#include <gtest/gtest.h>

#include <set>

namespace rdmanet {
namespace {

TEST(Hex, RoundTripsEveryByteAndRefusesWhatIsNotLowerCaseHexPairs) {
  std::string all;
  for (int c = 0; c < 256; ++c) {
    all += static_cast<char>(c);
  }
  EXPECT_EQ(hex("net1"), "6e657431");
  EXPECT_EQ(hex(std::string("\0\xff", 2)), "00ff");
  EXPECT_EQ(unhex(hex(all)), all);
  for (const char* bad : {"0", "6E", "zz", "6e6", "6e 65"}) {
    EXPECT_EQ(unhex(bad), "") << bad;
  }
}

TEST(Fnv1a64, IsTheStandardHashSoNamesOnDiskSurviveUpgrades) {
  // Published FNV-1a 64 test vectors: files named by it must not change across builds.
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ULL);
}

TEST(BoundedName, KeepsShortNamesAndHashesLongOnesApart) {
  EXPECT_EQ(bounded_name("pod-1234"), "pod-1234");
  std::string a(300, 'a');
  std::string b = a;
  b.back() = 'b';
  EXPECT_EQ(bounded_name(a).size(), 64U + 1 + 16);
  EXPECT_EQ(bounded_name(a).substr(0, 65), std::string(64, 'a') + "~");
  EXPECT_NE(bounded_name(a), bounded_name(b));
  EXPECT_EQ(bounded_name(std::string(128, 'x')), std::string(128, 'x'));
  EXPECT_NE(bounded_name(std::string(129, 'x')), std::string(129, 'x'));
}

TEST(Base64, RoundTripsEveryLengthAndByte) {
  std::string all;
  for (int c = 0; c < 256; ++c) {
    all += static_cast<char>(c);
  }
  for (size_t n = 0; n <= all.size(); n += 37) {
    auto text = all.substr(0, n);
    auto back = base64_decode(base64_encode(text));
    ASSERT_TRUE(back);
    EXPECT_EQ(*back, text);
  }
  EXPECT_EQ(base64_encode("/x/a"), "L3gvYQ==");
  EXPECT_EQ(base64_encode(""), "");
  // The last one: non-canonical (padding drops set bits), found by etcd_fuzz.
  for (const char* bad : {"L3gvYQ=", "L3g*YQ==", "=3gvYQ==", "L3gvYQ=a", "L3JkvsFwLjE1aY=="}) {
    EXPECT_FALSE(base64_decode(bad)) << bad;
  }
}

}  // namespace
}  // namespace rdmanet
