#include "cni/version.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cni/error_code.h"

namespace rdmanet::cni {
namespace {

TEST(Version, ParsesAndCompares) {
  auto v = parse_version("1.1.0");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->str(), "1.1.0");
  EXPECT_LT(*parse_version("0.4.0"), *parse_version("1.0.0"));
  EXPECT_LT(*parse_version("0.3.1"), *parse_version("0.4.0"));
  EXPECT_LT(*parse_version("0.9.0"), *parse_version("0.10.0"));
}

TEST(Version, RejectsGarbage) {
  for (const char* bad : {"", "1", "1.0", "1.0.0.0", "a.b.c", "1.0.x", "-1.0.0", "1..0"}) {
    auto v = parse_version(bad);
    ASSERT_FALSE(v.ok()) << bad;
    EXPECT_EQ(error_code(v.error()), 6);
  }
}

TEST(Version, InfoListsEverySupportedVersion) {
  auto info = nlohmann::json::parse(version_info_json());
  EXPECT_EQ(info["cniVersion"], "1.1.0");
  EXPECT_EQ(info["supportedVersions"],
            nlohmann::json::array({"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"}));
  EXPECT_TRUE(is_supported("0.4.0"));
  EXPECT_FALSE(is_supported("0.2.0"));
  EXPECT_FALSE(is_supported("1.2.0"));
}

}  // namespace
}  // namespace rdmanet::cni
