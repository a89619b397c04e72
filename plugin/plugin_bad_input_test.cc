// End to end: the bad-input matrices. Every bad config, environment and stdin is refused
// with its code and a message naming the culprit, and leaves the node unchanged.
#include <gtest/gtest.h>
#include <linux/netlink.h>
#include <sys/socket.h>

#include <cerrno>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "plugin/testing/plugin_fixture.h"

namespace rdmanet::plugin::testing {
namespace {

TEST_F(Rdmanet, BadInputLeavesTheNodeUnchanged) {
  auto [port, peer] = make_ports();
  std::string pod = make_pod();
  std::ofstream(dir_ + "/not-a-netns") << "x";
  struct Case {
    std::string name;
    std::string netns;
    json config;
    int code;
    std::string culprit;
  } cases[] = {
      {"netns is a file", dir_ + "/not-a-netns", conf({{"device", port}}), 4, "not-a-netns"},
      {"netns is a directory", dir_, conf({{"device", port}}), 4, dir_},
      {"netns missing", "/run/netns/rdmanet-nope", conf({{"device", port}}), 4, "rdmanet-nope"},
      {"netns is the host's", "/proc/self/ns/net", conf({{"device", port}}), 4, "host"},
      {"no such device", pod, conf({{"device", "rdmnope0"}}), 100, "rdmnope0"},
      {"no device selected", pod, conf(json::object()), 7, "device"},
      {"bad mode", pod, conf({{"device", port}, {"mode", "ipvlan"}}), 2, "ipvlan"},
      {"bad mtu", pod, conf({{"device", port}, {"mtu", 10}}), 7, "mtu"},
      {"bad mac", pod, conf({{"device", port}, {"mac", "zz"}}), 7, "mac"},
      {"multicast mac", pod, conf({{"device", port}, {"mac", "01:00:00:00:00:01"}}), 7, "mac"},
      {"VF setting on a non-VF", pod, conf({{"device", port}, {"vlan", 5}}), 7, "vlan"},
      {"vlan out of range", pod, conf({{"device", port}, {"vlan", 5000}}), 7, "vlan"},
      {"bad vlanProto", pod, conf({{"device", port}, {"vlan", 5}, {"vlanProto", "qinq"}}), 2,
       "vlanProto"},
      {"qos without vlan", pod, conf({{"device", port}, {"vlanQoS", 3}}), 7, "vlanQoS"},
      {"bad spoofchk", pod, conf({{"device", port}, {"spoofchk", "yes"}}), 7, "spoofchk"},
      {"bad link_state", pod, conf({{"device", port}, {"link_state", "up"}}), 2, "link_state"},
      {"IPAM missing", pod, conf({{"device", port}, {"ipam", {{"type", "nope-ipam"}}}}), 103,
       "nope-ipam"},
      {"IPAM garbage", pod, conf({{"device", port}, {"ipam", {{"type", "garbage-ipam"}}}}), 103,
       "garbage-ipam"},
      {"relative stateDir", pod, conf({{"device", port}, {"stateDir", "rel"}}), 7, "stateDir"},
      {"bad rdmaIsolation", pod, conf({{"device", port}, {"rdmaIsolation", "strict"}}), 7,
       "rdmaIsolation"},
      {"required in macvlan mode", pod,
       conf({{"device", port}, {"mode", "macvlan"}, {"rdmaIsolation", "required"}}), 105,
       "rdmaIsolation"},
      {"gidTimeout too long", pod, conf({{"device", port}, {"gidTimeout", 1000}}), 7, "gidTimeout"},
      {"roce.tos too big", pod, conf({{"device", port}, {"roce", {{"tos", 300}}}}), 7, "roce.tos"},
      {"bad roce.mode", pod, conf({{"device", port}, {"roce", {{"mode", "v3"}}}}), 7, "roce.mode"},
      {"bad DCB policy", pod, conf({{"device", port}, {"roce", {{"dcb", {{"policy", "force"}}}}}}),
       7, "roce.dcb.policy"},
      {"bad PFC priority", pod, conf({{"device", port}, {"roce", {{"dcb", {{"pfc", {3, 9}}}}}}}), 7,
       "roce.dcb.pfc"},
      {"bad DSCP", pod,
       conf({{"device", port}, {"roce", {{"dcb", {{"dscpPriority", {{"64", 3}}}}}}}}), 7,
       "roce.dcb.dscpPriority"},
      {"malformed GUID", pod,
       conf({{"device", port}, {"runtimeConfig", {{"infinibandGUID", "zz:11"}}}}), 7,
       "runtimeConfig.infinibandGUID"},
      {"all-zero GUID", pod,
       conf({{"device", port}, {"args", {{"cni", {{"guid", "00:00:00:00:00:00:00:00"}}}}}}), 7,
       "args.cni.guid"},
      {"GUID for a non-VF", pod,
       conf({{"device", port}, {"runtimeConfig", {{"infinibandGUID", "02:00:00:00:00:00:00:01"}}}}),
       7, "not an SR-IOV VF"},
      // The PF's driver (veth here) has no DCB: verify cannot read it, apply cannot set it.
      {"DCB verify without DCB", pod, conf({{"device", port}, {"roce", {{"dcb", {{"pfc", {3}}}}}}}),
       102, "no DCB support"},
      {"DCB apply without DCB", pod,
       conf({{"device", port},
             {"roce", {{"dcb", {{"policy", "apply"}, {"dscpPriority", {{"26", 3}}}}}}}}),
       102, "no DCB support"},
      // This host kernel has no RDMA subsystem (checked below); the QEMU lab covers kernels
      // that have one.
      {"isolation required without RDMA", pod,
       conf({{"device", port}, {"rdmaIsolation", "required"}}), 105, "no RDMA subsystem"},
      {"softRoce without RDMA", pod, conf({{"device", port}, {"softRoce", true}}), 102, "softRoce"},
  };
  int rdma_socket = socket(AF_NETLINK, SOCK_RAW, NETLINK_RDMA);
  int rdma_errno = errno;
  ASSERT_LT(rdma_socket, 0) << "this kernel has RDMA netlink: the last two cases assume none";
  ASSERT_EQ(rdma_errno, EPROTONOSUPPORT);
  std::string before = sh("ip -br link show dev " + port);
  for (const auto& c : cases) {
    auto add = cni("ADD", "bad", c.netns, c.config);
    EXPECT_EQ(add.exit_code, 1) << c.name;
    EXPECT_EQ(add.code(), c.code) << c.name << ": " << add.out;
    EXPECT_NE(add.msg().find(c.culprit), std::string::npos) << c.name << ": " << add.msg();
    EXPECT_EQ(sh("ip -br link show dev " + port), before) << c.name;
    EXPECT_TRUE(state_files().empty()) << c.name;
    EXPECT_TRUE(leases().empty()) << c.name;
  }
}

// The rest of the bad-input matrix: what reaches the binary through its
// environment and stdin, each refused with its code and a message naming the
// culprit, before anything on the node changes.
TEST_F(Rdmanet, HostileEnvironmentAndStdinLeaveTheNodeUnchanged) {
  auto [port, peer] = make_ports();
  std::string pod = make_pod();
  const std::string netns = "/run/netns/" + pod;
  const std::string good = conf({{"device", port}}).dump();
  // 70,000 nested objects, well inside the 4 MiB stdin limit: crashed both binaries.
  std::string deep = good.substr(0, good.size() - 1) + ",\"deep\":";
  for (int i = 0; i < 70000; ++i) {
    deep += "{\"a\":";
  }
  deep += "1" + std::string(70000, '}') + "}";
  std::string big_id(size_t{10} * 1024, 'c');
  json wrong_version = conf({{"device", port}});
  wrong_version["cniVersion"] = "9.9.9";
  json no_version = conf({{"device", port}});
  no_version.erase("cniVersion");
  json name_number = conf({{"device", port}});
  name_number["name"] = 42;
  json bad_prev = conf({{"device", port}});
  bad_prev["prevResult"] = {{"interfaces", "eth0"}};
  std::string huge = conf({{"device", port}, {"padding", std::string(5 << 20, 'x')}}).dump();

  struct Case {
    std::string name;
    std::map<std::string, std::string> env;  // overrides; "" removes the variable
    std::string stdin_text;
    int code;
    std::string culprit;
  };
  std::vector<Case> cases = {
      {"no CNI_COMMAND", {{"CNI_COMMAND", ""}}, good, 4, "CNI_COMMAND"},
      {"unknown CNI_COMMAND", {{"CNI_COMMAND", "EXPLODE"}}, good, 4, "EXPLODE"},
      {"no CNI_CONTAINERID", {{"CNI_CONTAINERID", ""}}, good, 3, "CNI_CONTAINERID"},
      {"no CNI_NETNS", {{"CNI_NETNS", ""}}, good, 4, "CNI_NETNS"},
      {"no CNI_IFNAME", {{"CNI_IFNAME", ""}}, good, 4, "CNI_IFNAME"},
      {"no CNI_PATH", {{"CNI_PATH", ""}}, good, 4, "CNI_PATH"},
      {"container id with /", {{"CNI_CONTAINERID", "a/../../etc"}}, good, 4, "a/../../etc"},
      {"container id ..", {{"CNI_CONTAINERID", ".."}}, good, 4, "CNI_CONTAINERID"},
      {"container id with a control char",
       {{"CNI_CONTAINERID",
         "ab\x01"
         "cd"}},
       good,
       4,
       "CNI_CONTAINERID"},
      {"container id starting with -", {{"CNI_CONTAINERID", "-rf"}}, good, 4, "-rf"},
      {"ifname with /", {{"CNI_IFNAME", "a/b"}}, good, 4, "a/b"},
      {"ifname .", {{"CNI_IFNAME", "."}}, good, 4, "CNI_IFNAME"},
      {"ifname of 16 chars", {{"CNI_IFNAME", "abcdefghijklmnop"}}, good, 4, "abcdefghijklmnop"},
      {"ifname with a space", {{"CNI_IFNAME", "net 1"}}, good, 4, "net 1"},
      {"ifname with :", {{"CNI_IFNAME", "net:1"}}, good, 4, "net:1"},
      // The kernel would create net0 from net%d: rollback and DEL would look for "net%d".
      {"ifname with %", {{"CNI_IFNAME", "net%d"}}, good, 4, "net%d"},
      {"ifname not UTF-8", {{"CNI_IFNAME", "net\xff"}}, good, 4, "not UTF-8"},
      {"CNI_ARGS without =", {{"CNI_ARGS", "FOO"}}, good, 4, "FOO"},
      {"unknown CNI_ARGS key", {{"CNI_ARGS", "BAR=1"}}, good, 4, "BAR"},
      {"empty stdin", {}, "", 6, "stdin"},
      {"malformed JSON", {}, "{\"cniVersion\": ", 6, "JSON"},
      {"truncated config", {}, good.substr(0, good.size() / 2), 6, "JSON"},
      {"a JSON array", {}, "[1, 2]", 6, "object"},
      {"70,000 nested objects", {}, deep, 6, "deeper than 64"},
      {"name of the wrong type", {}, name_number.dump(), 7, "name"},
      {"unknown cniVersion", {}, wrong_version.dump(), 1, "9.9.9"},
      {"no cniVersion", {}, no_version.dump(), 1, "cniVersion"},
      {"stdin over 4 MiB", {}, huge, 6, "MiB"},
      {"malformed prevResult", {}, bad_prev.dump(), 6, "prevResult"},
  };
  std::string before = sh("ip -br link show dev " + port) + sh("ip -br addr show dev " + port) +
                       sh("ip -n " + pod + " -br link");
  for (const auto& c : cases) {
    std::map<std::string, std::string> env = {
        {"CNI_COMMAND", "ADD"},        {"CNI_CONTAINERID", "hostile"},
        {"CNI_NETNS", netns},          {"CNI_IFNAME", "net1"},
        {"CNI_PATH", dir_ + "/bin"},   {"CNI_ARGS", "IgnoreUnknown=0;K8S_POD_NAME=p"},
        {"PATH", "/usr/sbin:/usr/bin"}};
    for (const auto& [key, value] : c.env) {
      if (value.empty()) {
        env.erase(key);
      } else {
        env[key] = value;
      }
    }
    auto out = run_raw(env, c.stdin_text);
    EXPECT_EQ(out.exit_code, 1) << c.name << ": " << out.out.substr(0, 300);
    EXPECT_EQ(out.code(), c.code) << c.name << ": " << out.out.substr(0, 300);
    EXPECT_NE(out.msg().find(c.culprit), std::string::npos)
        << c.name << ": " << out.msg().substr(0, 300);
    EXPECT_EQ(sh("ip -br link show dev " + port) + sh("ip -br addr show dev " + port) +
                  sh("ip -n " + pod + " -br link"),
              before)
        << c.name;
    EXPECT_TRUE(state_files().empty()) << c.name;
    EXPECT_TRUE(leases().empty()) << c.name;
  }
}

}  // namespace
}  // namespace rdmanet::plugin::testing
