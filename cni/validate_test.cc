#include "cni/validate.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/testing/temp_dir.h"

namespace rdmanet::cni {
namespace {

namespace fs = std::filesystem;

class Validate : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(tmp_.path().empty()) << "cannot create a temporary directory";
    dir_ = tmp_.path();
  }
  std::string file(const std::string& name, const std::string& text) {
    std::ofstream(dir_ + "/" + name) << text;
    return dir_ + "/" + name;
  }
  testutil::TempDir tmp_{"rdmanet-validate"};
  std::string dir_;
};

// The checker sees every matching entry, with the list's version and name.
TEST_F(Validate, ChecksEveryMatchingEntryOfAConflist) {
  std::vector<std::string> seen;
  Validator v{"mine", ValidateWhat::kPluginType, [&](const NetConf& c) -> Status {
                seen.push_back(c.name + "@" + c.cni_version);
                if (c.raw.value("bad", false)) {
                  return Error(ErrorKind::kInvalidConfig, "bad: true");
                }
                return ok_status();
              }};
  auto list = file("list.json", R"({"cniVersion":"1.0.0","name":"rail","plugins":[
      {"type":"mine"},{"type":"tuning"},{"type":"mine"}]})");
  auto bad = file("bad.json", R"({"cniVersion":"1.0.0","name":"n","type":"mine","bad":true})");
  auto other = file("other.json", R"({"cniVersion":"1.0.0","name":"n","type":"theirs"})");
  auto broken = file("broken.json", "{");
  std::ostringstream out;
  EXPECT_EQ(validate_main(v, {list}, out), 0) << out.str();
  EXPECT_EQ(seen, (std::vector<std::string>{"rail@1.0.0", "rail@1.0.0"}));
  for (const auto& f : {bad, other, broken}) {
    std::ostringstream o;
    EXPECT_EQ(validate_main(v, {f}, o), 1) << f;
    EXPECT_NE(o.str().find(f + ": error"), std::string::npos) << o.str();
  }
}

TEST_F(Validate, IpamSectionsAreSelectedByIpamType) {
  int checked = 0;
  Validator v{"my-ipam", ValidateWhat::kIpamType, [&](const NetConf& c) -> Status {
                ++checked;
                EXPECT_EQ(c.ipam_type, "my-ipam");
                return ok_status();
              }};
  auto f = file("a.json", R"({"cniVersion":"1.1.0","name":"n","type":"rdmanet",
                               "ipam":{"type":"my-ipam"}})");
  std::ostringstream out;
  EXPECT_EQ(validate_main(v, {f}, out), 0) << out.str();
  EXPECT_EQ(checked, 1);
}

}  // namespace
}  // namespace rdmanet::cni
