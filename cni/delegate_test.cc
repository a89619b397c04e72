// Delegation against real executables: Debian's reference host-local for the
// success path, and small scripts that behave like broken plugins (garbage
// output, hangs, CNI errors) for the failure paths.
#include "cni/delegate.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/testing/temp_dir.h"
#include "cni/error_code.h"

namespace rdmanet::cni {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class Delegate : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(tmp_.path().empty()) << "cannot create a temporary directory";
    dir_ = tmp_.path();
    fs::create_directory(dir_ + "/bin");
    env_.container_id = "ctr1";
    env_.netns = "/proc/self/ns/net";
    env_.ifname = "net1";
    env_.args = "IgnoreUnknown=1;K8S_POD_NAME=p";
    env_.path = dir_ + "/empty:" + dir_ + "/bin:/usr/lib/cni";
  }

  void script(const std::string& name, const std::string& body) {
    std::string path = dir_ + "/bin/" + name;
    std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
    ::chmod(path.c_str(), 0755);
  }

  testutil::TempDir tmp_{"rdmanet-delegate"};
  std::string dir_;
  Environment env_;
};

TEST_F(Delegate, FindsPluginsAlongCniPath) {
  script("mine", "exit 0");
  EXPECT_EQ(*find_plugin("mine", env_.path), dir_ + "/bin/mine");
  EXPECT_EQ(*find_plugin("host-local", env_.path), "/usr/lib/cni/host-local");
  auto missing = find_plugin("nonexistent", env_.path);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(error_code(missing.error()), 103);
  EXPECT_NE(missing.error().msg().find("nonexistent"), std::string::npos);
  for (const char* bad : {"", ".", "..", "../bin/sh", "/bin/sh"}) {
    auto r = find_plugin(bad, env_.path);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(error_code(r.error()), 7) << bad;
  }
}

TEST_F(Delegate, PassesEnvironmentAndStdin) {
  script("echoer",
         "read -r line\n"
         "printf '{\"cniVersion\":\"1.0.0\",\"ips\":[{\"address\":\"10.0.0.2/24\"}],"
         "\"dns\":{\"search\":[\"%s\",\"%s\",\"%s\",\"%s\",\"%s\",\"%s\"]}}' "
         "\"$CNI_COMMAND\" \"$CNI_CONTAINERID\" \"$CNI_NETNS\" \"$CNI_IFNAME\" \"$CNI_ARGS\" "
         "\"$line\"");
  auto r = delegate_add("echoer", env_, "the-config\n", "1.0.0");
  ASSERT_TRUE(r.ok()) << r.error().msg();
  EXPECT_EQ(r->dns.search,
            (std::vector<std::string>{"ADD", "ctr1", "/proc/self/ns/net", "net1",
                                      "IgnoreUnknown=1;K8S_POD_NAME=p", "the-config"}));
}

TEST_F(Delegate, ReferenceHostLocalRoundTrip) {
  json conf = {{"cniVersion", "1.0.0"},
               {"name", "deleg"},
               {"type", "rdmanet"},
               {"ipam",
                {{"type", "host-local"},
                 {"dataDir", dir_ + "/leases"},
                 {"subnet", "10.88.0.0/24"},
                 {"gateway", "10.88.0.1"}}}};
  auto r = delegate_add("host-local", env_, conf.dump(), "1.0.0");
  ASSERT_TRUE(r.ok()) << r.error().msg();
  ASSERT_EQ(r->ips.size(), 1u);
  EXPECT_EQ(r->ips[0].address, "10.88.0.2/24");
  EXPECT_TRUE(fs::exists(dir_ + "/leases/deleg/10.88.0.2"));
  auto del = delegate_command("host-local", Command::kDel, env_, conf.dump());
  ASSERT_TRUE(del.ok()) << del.error().msg();
  EXPECT_FALSE(fs::exists(dir_ + "/leases/deleg/10.88.0.2"));
}

TEST_F(Delegate, PropagatesTheDelegateErrorCode) {
  script("busy", R"(echo '{"cniVersion":"1.0.0","code":11,"msg":"store locked","details":"d"}'
exit 1)");
  auto r = delegate_add("busy", env_, "{}", "1.0.0");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(error_code(r.error()), 11);
  EXPECT_NE(r.error().msg().find("busy"), std::string::npos);
  EXPECT_NE(r.error().msg().find("store locked"), std::string::npos);
  EXPECT_EQ(r.error().details(), "d");
}

TEST_F(Delegate, GarbageAndCrashesAreNamed) {
  script("garbage", "echo 'this is not json'");
  auto g = delegate_add("garbage", env_, "{}", "1.0.0");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(error_code(g.error()), 103);
  EXPECT_NE(g.error().msg().find("garbage"), std::string::npos);

  script("badresult", R"(echo '{"cniVersion":"1.0.0","ips":[{"address":"nope"}]}')");
  auto b = delegate_add("badresult", env_, "{}", "1.0.0");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(error_code(b.error()), 103);
  EXPECT_NE(b.error().msg().find("address"), std::string::npos);

  script("dies", "echo 'panic: runtime error' >&2; exit 2");
  auto d = delegate_command("dies", Command::kDel, env_, "{}");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(error_code(d.error()), 103);
  EXPECT_NE(d.error().msg().find("panic: runtime error"), std::string::npos);
  EXPECT_NE(d.error().msg().find("status 2"), std::string::npos);
}

TEST_F(Delegate, HangingPluginTimesOut) {
  script("hangs", "exec sleep 30");
  auto start = std::chrono::steady_clock::now();
  auto r =
      delegate_add("hangs", env_, "{}", "1.0.0", DelegateOptions{std::chrono::milliseconds(300)});
  auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(error_code(r.error()), 11);
  EXPECT_NE(r.error().msg().find("hangs"), std::string::npos);
  EXPECT_LT(took, std::chrono::seconds(20)) << "the hung plugin was not killed";
}

TEST_F(Delegate, PluginThatIgnoresStdinDoesNotBlockUs) {
  script("nostdin", R"(echo '{"cniVersion":"1.0.0"}')");
  std::string big(1 << 20, 'x');  // more than a pipe buffer
  auto r = delegate_add("nostdin", env_, big, "1.0.0");
  ASSERT_TRUE(r.ok()) << r.error().msg();
}

}  // namespace
}  // namespace rdmanet::cni
