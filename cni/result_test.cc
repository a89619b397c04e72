#include "cni/result.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/testing/temp_dir.h"
#include "cni/error_code.h"
#include "cni/version.h"

namespace rdmanet::cni {
namespace {

using nlohmann::json;

Result sample() {
  Result r;
  r.interfaces = {{"net1", "02:00:00:00:00:05", 9000, "/run/netns/pod-a", "", "0000:3b:00.2"}};
  r.ips = {{"10.56.0.5/16", "10.56.0.1", 0}, {"fd00:56::5/64", "", 0}};
  Route def{"0.0.0.0/0", "10.56.0.1"};
  def.mtu = 9000;
  def.table = 100;
  r.routes = {def, {"fd00:57::/64", ""}};
  r.dns.nameservers = {"10.56.0.1"};
  r.dns.search = {"cluster.local"};
  return r;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class Golden : public testing::TestWithParam<std::string_view> {};

// The encoded result of each version matches the golden file of that version,
// and decoding it gives back the model (minus fields the version cannot carry).
TEST_P(Golden, EncodeMatchesGoldenAndRoundTrips) {
  std::string version(GetParam());
  std::string path = std::string(RDMANET_TESTDATA) + "/results/" + version + ".json";
  json golden = json::parse(read_file(path));
  json encoded = encode_result(sample(), version);
  EXPECT_EQ(encoded, golden) << "encoded:\n" << encoded.dump(2);

  auto decoded = decode_result(golden, version, "golden");
  ASSERT_TRUE(decoded.ok()) << decoded.error().msg();
  EXPECT_EQ(encode_result(*decoded, version), golden);
  if (version == "1.1.0") {
    EXPECT_EQ(*decoded, sample());
  } else {
    EXPECT_EQ(decoded->interfaces[0].mtu, 0);
    EXPECT_EQ(decoded->ips, sample().ips);
  }
}

INSTANTIATE_TEST_SUITE_P(EveryVersion, Golden, testing::ValuesIn(kSupportedVersions),
                         [](const auto& param_info) {
                           std::string name(param_info.param);
                           std::replace(name.begin(), name.end(), '.', '_');
                           return name;
                         });

TEST(Result, IpVersionFieldOnlyBefore1_0) {
  EXPECT_EQ(encode_result(sample(), "0.3.0")["ips"][0]["version"], "4");
  EXPECT_EQ(encode_result(sample(), "0.4.0")["ips"][1]["version"], "6");
  EXPECT_FALSE(encode_result(sample(), "1.0.0")["ips"][0].contains("version"));
  EXPECT_FALSE(encode_result(sample(), "1.1.0")["ips"][0].contains("version"));
}

TEST(Result, DecodeRejectsInconsistentDocuments) {
  struct Case {
    const char* doc;
    const char* version;
    const char* culprit;
  } cases[] = {
      {R"({"ips":[{"version":"6","address":"10.0.0.1/8"}]})", "0.4.0", "ips[0].version"},
      {R"({"ips":[{"interface":3,"address":"10.0.0.1/8"}]})", "1.0.0", "ips[0].interface"},
      {R"({"ips":[{"address":"10.0.0.1/33"}]})", "1.0.0", "ips[0].address"},
      {R"({"ips":[{"address":"10.0.0.1/8","gateway":"x"}]})", "1.0.0", "ips[0].gateway"},
      {R"({"interfaces":[{"mac":"x"}]})", "1.0.0", "interfaces[0].name"},
      {R"({"routes":[{"dst":"default"}]})", "1.0.0", "routes[0].dst"},
      {R"({"routes":[{"dst":"0.0.0.0/0","table":"main"}]})", "1.1.0", "routes[0].table"},
      {R"({"dns":{"nameservers":["not-an-ip"]}})", "1.0.0", "dns.nameservers"},
      {R"([])", "1.0.0", "JSON object"},
  };
  for (const auto& c : cases) {
    auto r = decode_result(json::parse(c.doc), c.version, "prevResult");
    ASSERT_FALSE(r.ok()) << c.doc;
    EXPECT_EQ(error_code(r.error()), 6) << c.doc;
    EXPECT_NE(r.error().msg().find(c.culprit), std::string::npos) << r.error().msg();
  }
  EXPECT_EQ(error_code(decode_result(json::object(), "0.2.0", "x").error()), 1);
}

TEST(Result, Cidr) {
  EXPECT_TRUE(is_valid_cidr("10.0.0.1/32"));
  EXPECT_TRUE(is_valid_cidr("fd00::1/128"));
  EXPECT_FALSE(is_valid_cidr("10.0.0.1"));
  EXPECT_FALSE(is_valid_cidr("10.0.0.1/"));
  EXPECT_FALSE(is_valid_cidr("10.0.0.1/-1"));
  EXPECT_FALSE(is_valid_cidr("fd00::1/129"));
  EXPECT_FALSE(is_valid_cidr("10.0.0.256/8"));
}

// Runs Debian's reference host-local plugin at every version it supports: our
// decoder must read its result, and our encoder must write the same document
// for the same data.
TEST(Result, InteroperatesWithReferenceHostLocal) {
  const std::string plugin = "/usr/lib/cni/host-local";
  ASSERT_TRUE(std::filesystem::exists(plugin))
      << plugin << " missing: install containernetworking-plugins (tests/tools/deps.sh)";
  rdmanet::testutil::TempDir tmp("rdmanet-hl");
  ASSERT_FALSE(tmp.path().empty()) << "cannot create a temporary directory";
  const std::string& dir = tmp.path();

  int n = 0;
  for (std::string version : {"0.3.0", "0.3.1", "0.4.0", "1.0.0"}) {
    json conf = {{"cniVersion", version},
                 {"name", "interop"},
                 {"type", "host-local"},
                 {"ipam",
                  {{"type", "host-local"},
                   {"dataDir", dir},
                   {"ranges", {{{{"subnet", "10.77.0.0/24"}}}, {{{"subnet", "fd00:77::/64"}}}}},
                   {"routes", {{{"dst", "0.0.0.0/0"}}, {{"dst", "fd00:78::/64"}}}}}}};
    std::string conf_path = dir + "/conf.json";
    std::ofstream(conf_path) << conf.dump();
    std::string cmd = "CNI_COMMAND=ADD CNI_CONTAINERID=c" + std::to_string(n++) +
                      " CNI_NETNS=/proc/self/ns/net CNI_IFNAME=net1 CNI_PATH=/usr/lib/cni " +
                      plugin + " < " + conf_path;
    FILE* p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string out;
    char buf[4096];
    size_t got = 0;
    while ((got = fread(buf, 1, sizeof(buf), p)) > 0) {
      out.append(buf, got);
    }
    int status = pclose(p);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << version << ": " << out;

    json theirs = json::parse(out);
    auto decoded = decode_result(theirs, version, "host-local result");
    ASSERT_TRUE(decoded.ok()) << version << ": " << decoded.error().msg();
    ASSERT_EQ(decoded->ips.size(), 2u) << version;
    EXPECT_FALSE(decoded->ips[0].is_ipv6());
    EXPECT_TRUE(decoded->ips[1].is_ipv6());
    EXPECT_EQ(decoded->ips[0].gateway, "10.77.0.1");
    ASSERT_EQ(decoded->routes.size(), 2u);
    EXPECT_EQ(encode_result(*decoded, version), theirs) << version;
  }
}

}  // namespace
}  // namespace rdmanet::cni
