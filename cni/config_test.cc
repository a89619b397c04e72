#include "cni/config.h"

#include <gtest/gtest.h>

#include "cni/error_code.h"

namespace rdmanet::cni {
namespace {

Expected<NetConf> parse(const std::string& text) { return parse_netconf(text); }

TEST(NetConf, ReadsTheSharedKeys) {
  auto conf = parse(R"({
    "cniVersion": "1.1.0", "name": "rail-0", "type": "rdmanet",
    "somethingUnknown": {"ignored": true},
    "args": {"cni": {"ips": ["10.0.0.5/24"]}},
    "runtimeConfig": {"deviceID": "0000:3b:00.2", "ips": ["10.0.0.5/24"],
                      "mac": "02:00:00:00:00:05", "infinibandGUID": "c2:00:00:00:00:00:00:05",
                      "CNIDeviceInfoFile": "/var/run/k8s.cni.cncf.io/devinfo/x.json"},
    "ipam": {"type": "rdmanet-ipam", "subnet": "10.0.0.0/24"},
    "dns": {"nameservers": ["10.0.0.1"], "search": ["svc"]},
    "cni.dev/valid-attachments": [{"containerID": "abc", "ifname": "net1"}],
    "logFile": "/tmp/x.log", "logLevel": "debug"
  })");
  ASSERT_TRUE(conf.ok()) << conf.error().msg();
  EXPECT_EQ(conf->cni_version, "1.1.0");
  EXPECT_EQ(conf->name, "rail-0");
  EXPECT_EQ(conf->type, "rdmanet");
  EXPECT_EQ(conf->args_cni["ips"][0], "10.0.0.5/24");
  EXPECT_EQ(conf->runtime.device_id, "0000:3b:00.2");
  EXPECT_EQ(conf->runtime.ips, std::vector<std::string>{"10.0.0.5/24"});
  EXPECT_EQ(conf->runtime.mac, "02:00:00:00:00:05");
  EXPECT_EQ(conf->runtime.infiniband_guid, "c2:00:00:00:00:00:00:05");
  EXPECT_EQ(conf->runtime.device_info_file, "/var/run/k8s.cni.cncf.io/devinfo/x.json");
  EXPECT_EQ(conf->ipam_type, "rdmanet-ipam");
  EXPECT_EQ(conf->dns.nameservers, std::vector<std::string>{"10.0.0.1"});
  ASSERT_EQ(conf->valid_attachments.size(), 1u);
  EXPECT_EQ(conf->valid_attachments[0], (AttachmentRef{"abc", "net1"}));
  EXPECT_EQ(conf->log_file, "/tmp/x.log");
  EXPECT_EQ(conf->log_level, LogLevel::kDebug);
  EXPECT_FALSE(conf->prev_result.has_value());
}

TEST(NetConf, MalformedJsonIsCode6) {
  for (const char* bad : {"", "{", "{\"name\": }", "[1,2]", "\"text\"", "{\"a\":1}}"}) {
    auto conf = parse(bad);
    ASSERT_FALSE(conf.ok()) << bad;
    EXPECT_EQ(error_code(conf.error()), 6) << bad;
  }
}

TEST(NetConf, VersionErrorsAreCode1) {
  for (const char* bad : {R"({"name":"n"})", R"({"name":"n","cniVersion":"0.2.0"})",
                          R"({"name":"n","cniVersion":"9.9.9"})"}) {
    auto conf = parse(bad);
    ASSERT_FALSE(conf.ok()) << bad;
    EXPECT_EQ(error_code(conf.error()), 1) << bad;
  }
}

struct BadField {
  const char* json;
  const char* field;  // must appear in the message
  int code;
};

class WrongTypes : public testing::TestWithParam<BadField> {};

TEST_P(WrongTypes, NameTheField) {
  auto conf = parse(GetParam().json);
  ASSERT_FALSE(conf.ok()) << GetParam().json;
  EXPECT_EQ(error_code(conf.error()), GetParam().code) << conf.error().msg();
  EXPECT_NE(conf.error().msg().find(GetParam().field), std::string::npos) << conf.error().msg();
}

#define V R"("cniVersion":"1.0.0")"
INSTANTIATE_TEST_SUITE_P(
    Config, WrongTypes,
    testing::Values(
        BadField{"{" V R"(,"name":5})", "name", 7}, BadField{"{" V R"(,"name":""})", "name", 7},
        BadField{"{" V R"(,"name":"a/b"})", "name", 7},
        BadField{"{" V R"(,"name":"n","type":[]})", "type", 7},
        BadField{R"({"cniVersion":1,"name":"n"})", "cniVersion", 7},
        BadField{"{" V R"(,"name":"n","args":"x"})", "args", 7},
        BadField{"{" V R"(,"name":"n","args":{"cni":[1]}})", "args.cni", 7},
        BadField{"{" V R"(,"name":"n","runtimeConfig":{"deviceID":7}})", "runtimeConfig.deviceID",
                 7},
        BadField{"{" V R"(,"name":"n","runtimeConfig":{"ips":"10.0.0.1"}})", "runtimeConfig.ips",
                 7},
        BadField{"{" V R"(,"name":"n","runtimeConfig":{"ips":[1]}})", "runtimeConfig.ips[0]", 7},
        BadField{"{" V R"(,"name":"n","ipam":[]})", "ipam", 7},
        BadField{"{" V R"(,"name":"n","ipam":{"type":1}})", "ipam.type", 7},
        BadField{"{" V R"(,"name":"n","ipam":{"type":"../x"}})", "ipam.type", 7},
        BadField{"{" V R"(,"name":"n","dns":{"nameservers":"a"}})", "dns.nameservers", 7},
        BadField{"{" V R"(,"name":"n","logLevel":3})", "logLevel", 7},
        BadField{"{" V R"(,"name":"n","logLevel":"loud"})", "logLevel", 2},
        BadField{"{" V R"(,"name":"n","cni.dev/valid-attachments":[{"ifname":"x"}]})",
                 "containerID", 7},
        BadField{"{" V R"(,"name":"n","prevResult":{"ips":[{"address":"nope"}]}})",
                 "prevResult.ips[0].address", 6},
        BadField{"{" V R"(,"name":"n","prevResult":{"ips":{"address":"10.0.0.1/8"}}})",
                 "prevResult.ips", 6}));
#undef V

TEST(NetConf, DecodesPrevResultAtTheConfigVersion) {
  auto conf = parse(R"({"cniVersion":"0.4.0","name":"n","prevResult":{
      "cniVersion":"0.4.0",
      "interfaces":[{"name":"net1","mac":"02:00:00:00:00:01","sandbox":"/run/netns/p"}],
      "ips":[{"version":"4","interface":0,"address":"10.0.0.5/24","gateway":"10.0.0.1"}],
      "routes":[{"dst":"0.0.0.0/0","gw":"10.0.0.1"}],"dns":{}}})");
  ASSERT_TRUE(conf.ok()) << conf.error().msg();
  ASSERT_TRUE(conf->prev_result.has_value());
  ASSERT_EQ(conf->prev_result->ips.size(), 1u);
  EXPECT_EQ(conf->prev_result->ips[0].interface, 0);
  EXPECT_EQ(conf->prev_result->interfaces[0].sandbox, "/run/netns/p");
}

}  // namespace
}  // namespace rdmanet::cni
