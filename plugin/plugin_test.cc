// rdmanet end to end: the real binary, driven through the CNI protocol,
// against the real kernel in throwaway network namespaces with real veth and
// macvlan links; Debian's reference host-local (and tuning) as peers. A fake
// sysfs tree maps PCI and auxiliary device ids to the veth links, because
// this machine has no PCI NICs to spare.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/if_packet.h>
#include <linux/netlink.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "base/testing/process.h"
#include "base/testing/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Output {
  int exit_code = -1;
  std::string out;
  std::string err;
  json doc() const { return json::parse(out, nullptr, false); }
  int code() const {
    json d = doc();
    return d.is_object() && d.contains("code") ? d["code"].get<int>() : 0;
  }
  std::string msg() const {
    json d = doc();
    return d.is_object() && d.contains("msg") ? d["msg"].get<std::string>() : "";
  }
};

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs a shell command to set up or observe; returns stdout.
std::string sh(const std::string& cmd, bool must_succeed = true) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) {
    out.append(buf, n);
  }
  int status = pclose(p);
  if (must_succeed && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
    ADD_FAILURE() << "command failed: " << cmd << "\n" << out;
  }
  return out;
}

bool link_exists(const std::string& name, const std::string& netns = "") {
  std::string cmd =
      (netns.empty() ? "ip" : "ip -n " + netns) + " link show dev " + name + " >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

class Rdmanet : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(geteuid(), 0u) << "rdmanet integration tests need root (CAP_NET_ADMIN, "
                                "CAP_SYS_ADMIN): run them as root, they do not skip";
    static std::atomic<int> counter{0};
    tag_ = std::to_string(getpid() % 100000) + "x" + std::to_string(counter++);
    ASSERT_FALSE(tmp_.path().empty()) << "cannot create a temporary directory";
    dir_ = tmp_.path();
    fs::create_directories(dir_ + "/bin");
    fs::create_symlink(RDMANET_BINARY, dir_ + "/bin/rdmanet");
    for (const char* p : {"host-local", "tuning"}) {
      fs::create_symlink(std::string("/usr/lib/cni/") + p, dir_ + "/bin/" + p);
    }
    // A plugin that fails like a broken IPAM plugin would.
    std::ofstream(dir_ + "/bin/garbage-ipam") << "#!/bin/sh\necho 'not json'\n";
    fs::permissions(dir_ + "/bin/garbage-ipam", fs::perms::owner_all);
  }

  void TearDown() override {
    for (const auto& ns : netns_) {
      sh("ip netns del " + ns, false);
    }
    for (const auto& link : links_) {
      sh("ip link del " + link + " >/dev/null 2>&1", false);
    }
  }

  // A pod network namespace; returns its name (path /run/netns/<name>).
  std::string make_pod() {
    std::string name = "rdmt-" + tag_ + "-" + std::to_string(netns_.size());
    sh("ip netns add " + name);
    netns_.push_back(name);
    return name;
  }

  // A veth pair in the host standing in for two NIC ports; returns the names.
  std::pair<std::string, std::string> make_ports() {
    std::string a = "rt" + tag_ + "p" + std::to_string(links_.size());
    std::string b = a + "b";
    a += "a";
    sh("ip link add " + a + " type veth peer name " + b);
    links_.push_back(a);
    links_.push_back(b);
    return {a, b};
  }

  json conf(const json& extra, const std::string& version = "1.0.0") {
    json c = {{"cniVersion", version},
              {"name", "rail0"},
              {"type", "rdmanet"},
              {"stateDir", dir_ + "/state"},
              {"ipam",
               {{"type", "host-local"},
                {"dataDir", dir_ + "/ipam"},
                {"ranges", {{{{"subnet", "10.123.0.0/24"}}}}},
                {"routes", {{{"dst", "10.124.0.0/16"}}}}}}};
    c.update(extra);
    return c;
  }

  Output cni(const std::string& command, const std::string& container, const std::string& pod,
             const json& config, const std::string& ifname = "net1") {
    std::string input = dir_ + "/stdin-" + std::to_string(calls_++) + ".json";
    std::ofstream(input) << config.dump();
    std::string netns = pod.empty() ? "" : (pod[0] == '/' ? pod : "/run/netns/" + pod);
    std::string cmd = "CNI_COMMAND=" + command + " CNI_CONTAINERID='" + container +
                      "' CNI_NETNS='" + netns + "' CNI_IFNAME='" + ifname + "' CNI_PATH='" + dir_ +
                      "/bin' CNI_ARGS='IgnoreUnknown=1;K8S_POD_NAME=p' " + dir_ +
                      "/bin/rdmanet < " + input + " 2>" + input + ".err";
    FILE* p = popen(cmd.c_str(), "r");
    Output o;
    char buf[4096];
    size_t n = 0;
    while ((n = fread(buf, 1, sizeof(buf), p)) > 0) {
      o.out.append(buf, n);
    }
    int status = pclose(p);
    o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    o.err = read_all(input + ".err");
    return o;
  }

  // Runs the binary with exactly this environment and stdin.
  Output run_raw(const std::map<std::string, std::string>& env, const std::string& stdin_text) {
    auto run = rdmanet::testutil::run(dir_ + "/bin/rdmanet", env, stdin_text, dir_);
    Output o;
    o.exit_code = run.status;
    o.out = std::move(run.out);
    return o;
  }

  // Files left in the state dir, other than lock files.
  std::vector<std::string> state_files() {
    std::vector<std::string> out;
    if (!fs::exists(dir_ + "/state")) {
      return out;
    }
    for (const auto& e : fs::recursive_directory_iterator(dir_ + "/state")) {
      if (e.is_regular_file() && e.path().extension() != ".lock") {
        out.push_back(e.path().string());
      }
    }
    return out;
  }

  std::vector<std::string> leases() {
    std::vector<std::string> out;
    if (!fs::exists(dir_ + "/ipam/rail0")) {
      return out;
    }
    for (const auto& e : fs::directory_iterator(dir_ + "/ipam/rail0")) {
      std::string name = e.path().filename();
      if (name.rfind("10.", 0) == 0) {
        out.push_back(name);
      }
    }
    return out;
  }

  std::string link_field(const std::string& name, const std::string& field,
                         const std::string& netns = "") {
    json j =
        json::parse(sh((netns.empty() ? "ip" : "ip -n " + netns) + " -j link show dev " + name));
    return j[0].contains(field) ? j[0][field].dump() : "";
  }

  void fake_pci(const std::string& pci, const std::string& netdev, const std::string& driver) {
    std::string dev = dir_ + "/sys/bus/pci/devices/" + pci;
    fs::create_directories(dev);
    fs::create_directories(dir_ + "/sys/bus/pci/drivers/" + driver);
    fs::create_symlink("../../drivers/" + driver, dev + "/driver");
    if (!netdev.empty()) {
      fs::create_directories(dev + "/net/" + netdev);
    }
  }

  std::string tag_;
  rdmanet::testutil::TempDir tmp_{"rdmanet-plugin-test"};
  std::string dir_;
  std::vector<std::string> netns_;
  std::vector<std::string> links_;
  int calls_ = 0;
};

TEST_F(Rdmanet, NetdevModeMovesTheDeviceAndBringsItBack) {
  auto [port, peer] = make_ports();
  sh("ip link set " + port + " mtu 1400");
  std::string mac = link_field(port, "address");
  std::string pod = make_pod();

  auto add = cni("ADD", "ctr-a", pod, conf({{"device", port}, {"mtu", 1300}}));
  ASSERT_EQ(add.exit_code, 0) << add.out << add.err;
  json r = add.doc();
  ASSERT_EQ(r["interfaces"].size(), 1u);
  EXPECT_EQ(r["interfaces"][0]["name"], "net1");
  EXPECT_EQ(r["interfaces"][0]["sandbox"], "/run/netns/" + pod);
  EXPECT_EQ("\"" + r["interfaces"][0]["mac"].get<std::string>() + "\"", mac);
  EXPECT_EQ(r["ips"][0]["interface"], 0);
  EXPECT_EQ(r["ips"][0]["address"], "10.123.0.2/24");

  EXPECT_FALSE(link_exists(port)) << "device still in the host";
  ASSERT_TRUE(link_exists("net1", pod));
  EXPECT_EQ(link_field("net1", "mtu", pod), "1300");
  EXPECT_NE(sh("ip -n " + pod + " addr show dev net1").find("10.123.0.2/24"), std::string::npos);
  EXPECT_NE(sh("ip -n " + pod + " route show").find("10.124.0.0/16 dev net1"), std::string::npos);
  EXPECT_EQ(sh("ip netns exec " + pod + " cat /proc/sys/net/ipv4/conf/net1/arp_ignore"), "1\n");
  EXPECT_EQ(sh("ip netns exec " + pod + " cat /proc/sys/net/ipv4/conf/net1/rp_filter"), "2\n");
  EXPECT_EQ(leases().size(), 1u);

  auto del = cni("DEL", "ctr-a", pod, conf({{"device", port}}));
  ASSERT_EQ(del.exit_code, 0) << del.out << del.err;
  ASSERT_TRUE(link_exists(port)) << "device not back in the host under its name";
  EXPECT_FALSE(link_exists("net1", pod));
  EXPECT_EQ(link_field(port, "mtu"), "1400");
  EXPECT_EQ(link_field(port, "address"), mac);
  EXPECT_TRUE(state_files().empty());
  EXPECT_TRUE(leases().empty());

  auto again = cni("DEL", "ctr-a", pod, conf({{"device", port}}));
  EXPECT_EQ(again.exit_code, 0) << again.out;
  auto no_netns = cni("DEL", "ctr-a", "", conf({{"device", port}}));
  EXPECT_EQ(no_netns.exit_code, 0) << no_netns.out;
}

// Neighbours learn the pod's address at once: the kernel sends the gratuitous
// ARP when ADD brings the link up (arp_notify; see attach.cc for why not us).
TEST_F(Rdmanet, AddAnnouncesTheAddressWithAGratuitousArp) {
  auto [port, peer] = make_ports();
  sh("ip link set " + peer + " up");
  std::string pod = make_pod();
  // A capture on the peer, in the test's netns, open before ADD.
  int capture = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ARP));
  ASSERT_GE(capture, 0);
  sockaddr_ll ll{};
  ll.sll_family = AF_PACKET;
  ll.sll_protocol = htons(ETH_P_ARP);
  ll.sll_ifindex = static_cast<int>(if_nametoindex(peer.c_str()));
  ASSERT_EQ(bind(capture, reinterpret_cast<sockaddr*>(&ll), sizeof ll), 0);

  auto add = cni("ADD", "ctr-garp", pod, conf({{"device", port}}));
  ASSERT_EQ(add.exit_code, 0) << add.out << add.err;
  EXPECT_EQ(sh("ip netns exec " + pod + " cat /proc/sys/net/ipv4/conf/net1/arp_notify"), "1\n");
  in_addr pod_ip{};
  ASSERT_EQ(inet_pton(AF_INET, "10.123.0.2", &pod_ip), 1);
  bool seen = false;
  for (int i = 0; i < 50 && !seen; ++i) {
    pollfd pfd{capture, POLLIN, 0};
    if (poll(&pfd, 1, 2000) != 1) {
      break;
    }
    uint8_t f[2048];
    ssize_t n = recv(capture, f, sizeof f, 0);
    if (n < 14 + 28) {
      continue;
    }
    const uint8_t* arp = f + 14;
    bool broadcast = std::memcmp(f, "\xff\xff\xff\xff\xff\xff", 6) == 0;
    bool request = arp[6] == 0 && arp[7] == 1;
    bool spa = std::memcmp(arp + 14, &pod_ip, 4) == 0;
    bool tpa = std::memcmp(arp + 24, &pod_ip, 4) == 0;
    seen = broadcast && request && spa && tpa;
  }
  close(capture);
  EXPECT_TRUE(seen) << "no gratuitous ARP for 10.123.0.2 reached the peer";
  auto del = cni("DEL", "ctr-garp", pod, conf({{"device", port}}));
  EXPECT_EQ(del.exit_code, 0) << del.out << del.err;
}

TEST_F(Rdmanet, EverySpecVersionGetsItsResultShape) {
  for (std::string version : {"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"}) {
    auto [port, peer] = make_ports();
    std::string pod = make_pod();
    json c = conf({{"device", port}}, version);
    if (version == "1.1.0") {
      c["ipam"]["type"] = "rdmanet-ipam-missing";  // host-local stops at 1.0.0
      c.erase("ipam");
    }
    auto add = cni("ADD", "ctr-" + std::to_string(calls_), pod, c);
    ASSERT_EQ(add.exit_code, 0) << version << ": " << add.out << add.err;
    json r = add.doc();
    EXPECT_EQ(r["cniVersion"], version);
    if (r.contains("ips")) {
      EXPECT_EQ(r["ips"][0].contains("version"), version[0] == '0') << version;
    }
    EXPECT_EQ(r["interfaces"][0].contains("mtu"), version == "1.1.0") << version;
  }
}

TEST_F(Rdmanet, MacvlanModeCreatesAChildAndLeavesTheParent) {
  auto [parent, peer] = make_ports();
  std::string pod = make_pod();
  auto add = cni("ADD", "ctr-m", pod,
                 conf({{"mode", "macvlan"}, {"device", parent}, {"mac", "02:aa:bb:cc:dd:01"}}));
  ASSERT_EQ(add.exit_code, 0) << add.out << add.err;
  EXPECT_TRUE(link_exists(parent));
  json details = json::parse(sh("ip -n " + pod + " -d -j link show dev net1"));
  EXPECT_EQ(details[0]["linkinfo"]["info_kind"], "macvlan");
  EXPECT_EQ(details[0]["linkinfo"]["info_data"]["mode"], "bridge");
  EXPECT_EQ(details[0]["address"], "02:aa:bb:cc:dd:01");

  // A second pod shares the same parent: macvlan mode holds no device.
  std::string pod2 = make_pod();
  auto add2 = cni("ADD", "ctr-m2", pod2, conf({{"mode", "macvlan"}, {"device", parent}}));
  ASSERT_EQ(add2.exit_code, 0) << add2.out << add2.err;

  ASSERT_EQ(cni("DEL", "ctr-m", pod, conf({{"mode", "macvlan"}, {"device", parent}})).exit_code, 0);
  EXPECT_FALSE(link_exists("net1", pod));
  EXPECT_TRUE(link_exists("net1", pod2));
  EXPECT_TRUE(link_exists(parent));
}

TEST_F(Rdmanet, SelectsByHwaddrPciAuxiliaryInPrecedence) {
  auto [a, b] = make_ports();
  auto [c, d] = make_ports();
  fake_pci("0000:3b:00.2", a, "mlx5_core");
  fs::create_directories(dir_ + "/sys/bus/auxiliary/devices/mlx5_core.sf.4/net/" + c);
  std::string sys = dir_ + "/sys";

  struct Case {
    json extra;
    std::string expect_moved;
  } cases[] = {
      {{{"pciBusID", "0000:3b:00.2"}, {"sysfsRoot", sys}, {"device", c}}, a},
      {{{"deviceID", "mlx5_core.sf.4"}, {"sysfsRoot", sys}, {"pciBusID", "0000:3b:00.2"}}, c},
      {{{"runtimeConfig", {{"deviceID", "0000:3b:00.2"}}},
        {"deviceID", "mlx5_core.sf.4"},
        {"sysfsRoot", sys}},
       a},
      {{{"hwaddr", json::parse(link_field(d, "address"))}}, d},
  };
  for (const auto& tc : cases) {
    std::string pod = make_pod();
    auto add = cni("ADD", "sel", pod, conf(tc.extra));
    ASSERT_EQ(add.exit_code, 0) << tc.extra.dump() << add.out << add.err;
    EXPECT_FALSE(link_exists(tc.expect_moved)) << tc.extra.dump();
    ASSERT_EQ(cni("DEL", "sel", pod, conf(tc.extra)).exit_code, 0);
    EXPECT_TRUE(link_exists(tc.expect_moved)) << tc.extra.dump();
  }
}

TEST_F(Rdmanet, DeviceInfoFileNamesThePciFunctionAndGoesWithDel) {
  auto [a, b] = make_ports();
  fake_pci("0000:3b:00.2", a, "mlx5_core");
  std::string info = dir_ + "/devinfo/cni/rail-ctr-net1";
  // What the device plugin wrote (Multus copies it here before ADD): kept.
  fs::create_directories(dir_ + "/devinfo/cni");
  std::ofstream(info) << R"({"type":"pci","version":"1.0.0","pci":{"pci-address":"0000:3b:00.2",)"
                      << R"("vhost-net":"/dev/vhost-net"}})";
  json c = conf({{"sysfsRoot", dir_ + "/sys"},
                 {"runtimeConfig", {{"deviceID", "0000:3b:00.2"}, {"CNIDeviceInfoFile", info}}}});
  std::string pod = make_pod();
  auto add = cni("ADD", "devinfo", pod, c);
  ASSERT_EQ(add.exit_code, 0) << add.out << add.err;
  std::ifstream in(info);
  json doc = json::parse(in, nullptr, false);
  EXPECT_EQ(doc["type"], "pci") << doc.dump();
  EXPECT_EQ(doc["version"], "1.1.0") << doc.dump();
  EXPECT_EQ(doc["pci"]["pci-address"], "0000:3b:00.2") << doc.dump();
  EXPECT_EQ(doc["pci"]["vhost-net"], "/dev/vhost-net") << "the device plugin's keys stay";
  EXPECT_FALSE(doc["pci"].contains("rdma-device")) << "this kernel has no RDMA device to name";
  ASSERT_EQ(cni("DEL", "devinfo", pod, c).exit_code, 0);
  EXPECT_FALSE(fs::exists(info)) << "DEL removes the file it wrote";
  EXPECT_EQ(cni("DEL", "devinfo", pod, c).exit_code, 0);
}

TEST_F(Rdmanet, DeviceWithoutNetdevIsAClearError) {
  fake_pci("0000:3b:00.3", "", "vfio-pci");
  std::string pod = make_pod();
  auto add =
      cni("ADD", "vfio", pod, conf({{"pciBusID", "0000:3b:00.3"}, {"sysfsRoot", dir_ + "/sys"}}));
  EXPECT_EQ(add.exit_code, 1);
  EXPECT_EQ(add.code(), 100) << add.out;
  EXPECT_NE(add.msg().find("vfio-pci"), std::string::npos) << add.msg();
  EXPECT_NE(add.msg().find("0000:3b:00.3"), std::string::npos) << add.msg();
  EXPECT_TRUE(state_files().empty());
  EXPECT_TRUE(leases().empty());
}

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
       conf({{"device", port}, {"mode", "macvlan"}, {"rdmaIsolation", "required"}}), 7,
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

// A DEL of nothing must not fail only because the IPAM plugin is not installed
// (kubelet would retry it forever); an IPAM plugin that fails to DEL is still an error.
TEST_F(Rdmanet, DelOfNothingSucceedsWithoutItsIpamPlugin) {
  std::string pod = make_pod();
  auto missing =
      cni("DEL", "gone", pod, conf({{"device", "x"}, {"ipam", {{"type", "nope-ipam"}}}}));
  EXPECT_EQ(missing.exit_code, 0) << missing.out << missing.err;
  EXPECT_NE(missing.err.find("nope-ipam"), std::string::npos) << missing.err;
  std::ofstream(dir_ + "/bin/busy-ipam")
      << "#!/bin/sh\necho '{\"cniVersion\":\"1.0.0\",\"code\":11,\"msg\":\"busy\"}'\nexit 1\n";
  fs::permissions(dir_ + "/bin/busy-ipam", fs::perms::owner_all);
  auto busy = cni("DEL", "gone", pod, conf({{"device", "x"}, {"ipam", {{"type", "busy-ipam"}}}}));
  EXPECT_EQ(busy.exit_code, 1) << busy.out;
  EXPECT_EQ(busy.code(), 11) << busy.out;
  EXPECT_TRUE(state_files().empty());
}

// The rest of the bad-input matrix: what reaches the binary through its
// environment and stdin, each refused with its code and a message naming the
// culprit, before anything on the node changes.
TEST_F(Rdmanet, HostileEnvironmentAndStdinLeaveTheNodeUnchanged) {
  auto [port, peer] = make_ports();
  std::string pod = make_pod();
  const std::string netns = "/run/netns/" + pod;
  const std::string good = conf({{"device", port}}).dump();
  std::string big_id(10 * 1024, 'c');
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
      {"CNI_ARGS without =", {{"CNI_ARGS", "FOO"}}, good, 4, "FOO"},
      {"unknown CNI_ARGS key", {{"CNI_ARGS", "BAR=1"}}, good, 4, "BAR"},
      {"empty stdin", {}, "", 6, "stdin"},
      {"malformed JSON", {}, "{\"cniVersion\": ", 6, "JSON"},
      {"truncated config", {}, good.substr(0, good.size() / 2), 6, "JSON"},
      {"a JSON array", {}, "[1, 2]", 6, "object"},
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

TEST_F(Rdmanet, AnExhaustedPoolIsRefusedAndRolledBack) {
  auto [first, other] = make_ports();
  auto [second, other2] = make_ports();
  // host-local in a /30 has one usable address besides the gateway.
  auto pool = [&](const std::string& dev) {
    json c = conf({{"device", dev}});
    c["ipam"]["ranges"] = {{{{"subnet", "10.125.0.0/30"}}}};
    c["ipam"].erase("routes");
    return c;
  };
  std::string pod1 = make_pod();
  std::string pod2 = make_pod();
  ASSERT_EQ(cni("ADD", "first", pod1, pool(first)).exit_code, 0);
  std::string mac = link_field(second, "address");
  auto add = cni("ADD", "second", pod2, pool(second));
  EXPECT_EQ(add.exit_code, 1);
  EXPECT_NE(add.code(), 0) << add.out;
  EXPECT_NE(add.msg().find("no IP addresses available"), std::string::npos) << add.msg();
  EXPECT_TRUE(link_exists(second)) << "the device of the refused pod is back in the host";
  EXPECT_EQ(link_field(second, "address"), mac);
  EXPECT_FALSE(link_exists("net1", pod2));
  EXPECT_EQ(cni("DEL", "second", pod2, pool(second)).exit_code, 0);
  EXPECT_EQ(cni("DEL", "first", pod1, pool(first)).exit_code, 0);
}

TEST_F(Rdmanet, FailedAddRollsEverythingBack) {
  auto [port, peer] = make_ports();
  std::string mac = link_field(port, "address");
  std::string pod = make_pod();
  // The route's gateway is unreachable from the pod, so the last step fails
  // after the device moved and IPAM allocated.
  json c = conf({{"device", port}});
  c["ipam"]["routes"] = {{{"dst", "10.200.0.0/16"}, {"gw", "10.55.0.1"}}};
  auto add = cni("ADD", "rb", pod, c);
  EXPECT_EQ(add.exit_code, 1);
  EXPECT_NE(add.msg().find("10.200.0.0/16"), std::string::npos) << add.msg();
  EXPECT_TRUE(link_exists(port)) << "device not returned";
  EXPECT_EQ(link_field(port, "address"), mac);
  EXPECT_FALSE(link_exists("net1", pod));
  EXPECT_TRUE(leases().empty()) << "IPAM lease not released";
  EXPECT_TRUE(state_files().empty());
  // The runtime calls DEL after a failed ADD: it must succeed.
  EXPECT_EQ(cni("DEL", "rb", pod, c).exit_code, 0);
}

TEST_F(Rdmanet, MacvlanRollbackRemovesTheChild) {
  auto [parent, peer] = make_ports();
  std::string pod = make_pod();
  json c = conf({{"device", parent}, {"mode", "macvlan"}});
  c["ipam"]["routes"] = {{{"dst", "10.200.0.0/16"}, {"gw", "10.55.0.1"}}};
  EXPECT_EQ(cni("ADD", "rbm", pod, c).exit_code, 1);
  EXPECT_FALSE(link_exists("net1", pod));
  EXPECT_TRUE(leases().empty());
  EXPECT_TRUE(state_files().empty());
}

TEST_F(Rdmanet, EveryFailingStepIsRolledBack) {
  auto [port, peer] = make_ports();
  std::string mac = link_field(port, "address");
  struct Case {
    std::string name;
    json config;
    std::function<void(const std::string& pod)> prepare;
    std::string culprit;
  } cases[] = {
      // move+rename: the pod already has a link called net1.
      {"move", conf({{"device", port}}),
       [&](const std::string& pod) {
         sh("ip -n " + pod + " link add net1 type veth peer name x1");
       },
       "net1"},
      // macvlan creation: an MTU above the parent's.
      {"macvlan", conf({{"device", port}, {"mode", "macvlan"}, {"mtu", 9000}}),
       [](const std::string&) {}, port},
      // IPAM after the move: the pool has no free address.
      {"ipam",
       conf({{"device", port},
             {"ipam",
              {{"type", "host-local"},
               {"dataDir", dir_ + "/ipam"},
               {"ranges",
                {{{{"subnet", "10.127.0.0/30"},
                   {"rangeStart", "10.127.0.2"},
                   {"rangeEnd", "10.127.0.2"}}}}}}}}),
       [&](const std::string& pod) {
         std::string other = make_pod();
         auto [p2, b2] = make_ports();
         json c = conf({{"device", p2}});
         c["ipam"]["ranges"] = {{{{"subnet", "10.127.0.0/30"},
                                  {"rangeStart", "10.127.0.2"},
                                  {"rangeEnd", "10.127.0.2"}}}};
         ASSERT_EQ(cni("ADD", "filler", other, c).exit_code, 0);
         (void)pod;
       },
       "10.127.0.2"},
      // pod-side configuration: a route whose gateway is unreachable.
      {"route", conf({{"device", port}}), [](const std::string&) {}, "10.200.0.0/16"},
  };
  cases[3].config["ipam"]["routes"] = {{{"dst", "10.200.0.0/16"}, {"gw", "10.55.0.1"}}};
  for (auto& c : cases) {
    std::string pod = make_pod();
    c.prepare(pod);
    size_t leases_before = leases().size();
    auto states_before = state_files();
    auto add = cni("ADD", "step-" + c.name, pod, c.config);
    EXPECT_EQ(add.exit_code, 1) << c.name << ": " << add.out;
    EXPECT_NE(add.msg().find(c.culprit), std::string::npos) << c.name << ": " << add.msg();
    EXPECT_TRUE(link_exists(port)) << c.name << ": device not in the host";
    EXPECT_EQ(link_field(port, "address"), mac) << c.name;
    EXPECT_EQ(leases().size(), leases_before) << c.name << ": lease leaked";
    EXPECT_EQ(state_files(), states_before) << c.name << ": state leaked";
    EXPECT_EQ(cni("DEL", "step-" + c.name, pod, c.config).exit_code, 0) << c.name;
  }
}

TEST_F(Rdmanet, DelAfterRebootRestoresTheDevice) {
  // This test puts the pod interface into the host netns: a unique name keeps
  // parallel tests apart.
  const std::string ifname = "n" + tag_;
  auto [port, peer] = make_ports();
  std::string mac = link_field(port, "address");
  std::string pod = make_pod();
  json c = conf({{"device", port}});
  ASSERT_EQ(cni("ADD", "boot", pod, c, ifname).exit_code, 0);
  // After a reboot the pod netns is gone and the device is in the host under
  // whatever name it came back with; only the state file remembers.
  sh("ip -n " + pod + " link set " + ifname + " netns 1");
  sh("ip link set " + ifname + " up");
  sh("ip netns del " + pod);
  auto del = cni("DEL", "boot", pod, c, ifname);
  ASSERT_EQ(del.exit_code, 0) << del.out << del.err;
  ASSERT_TRUE(link_exists(port));
  EXPECT_FALSE(link_exists(ifname));
  EXPECT_EQ(link_field(port, "address"), mac);
  EXPECT_TRUE(state_files().empty());
  EXPECT_TRUE(leases().empty());
  EXPECT_EQ(cni("DEL", "boot", "", c, ifname).exit_code, 0);
}

TEST_F(Rdmanet, AltnamesNeitherBlockTheMoveNorGetLost) {
  auto [port, peer] = make_ports();
  std::string altname = "enp" + tag_ + "s0v2";
  sh("ip link property add dev " + port + " altname " + altname);
  std::string pod = make_pod();
  // The pod already has a link answering to the same altname: a plain move
  // fails with "File exists" (sriov-cni's and host-device's complaint).
  sh("ip -n " + pod + " link add x0 type veth peer name x1");
  sh("ip -n " + pod + " link property add dev x0 altname " + altname);

  json c = conf({{"device", port}});
  auto add = cni("ADD", "alt", pod, c);
  ASSERT_EQ(add.exit_code, 0) << add.out << add.err;
  EXPECT_EQ(link_field("net1", "altnames", pod), "") << "host altnames leaked into the pod";

  ASSERT_EQ(cni("DEL", "alt", pod, c).exit_code, 0);
  ASSERT_TRUE(link_exists(port));
  EXPECT_NE(link_field(port, "altnames").find(altname), std::string::npos)
      << "altname not restored";
}

// SR-IOV VF settings go through the PF. No driver here has VFs, so the fake
// sysfs tree makes a veth end a "VF" of another veth end; the real kernel
// then answers for the PF, and that answer must fail the ADD cleanly.
TEST_F(Rdmanet, VfSettingsGoThroughThePfAndFailCleanlyWithoutSriov) {
  auto [vf, pf] = make_ports();
  fake_pci("0000:3b:00.0", pf, "mlx5_core");
  fake_pci("0000:3b:00.5", vf, "mlx5_core");
  std::string devs = dir_ + "/sys/bus/pci/devices/";
  fs::create_directory_symlink("../0000:3b:00.5", devs + "0000:3b:00.0/virtfn3");
  fs::create_directory_symlink("../0000:3b:00.0", devs + "0000:3b:00.5/physfn");
  std::string pod = make_pod();
  std::string before = sh("ip -br link show dev " + vf);

  json c = conf(
      {{"pciBusID", "0000:3b:00.5"}, {"sysfsRoot", dir_ + "/sys"}, {"vlan", 100}, {"trust", "on"}});
  auto add = cni("ADD", "vf", pod, c);
  EXPECT_EQ(add.exit_code, 1);
  EXPECT_EQ(add.code(), 100) << add.out;
  EXPECT_NE(add.msg().find("VF 3 of PF \"" + pf + "\""), std::string::npos) << add.msg();
  EXPECT_EQ(sh("ip -br link show dev " + vf), before);
  EXPECT_TRUE(state_files().empty());
  EXPECT_TRUE(leases().empty());

  // Without VF settings the same VF attaches like any netdev.
  json plain = conf({{"pciBusID", "0000:3b:00.5"}, {"sysfsRoot", dir_ + "/sys"}});
  auto ok = cni("ADD", "vf", pod, plain);
  ASSERT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_FALSE(link_exists(vf));
  ASSERT_EQ(cni("DEL", "vf", pod, plain).exit_code, 0);
  EXPECT_TRUE(link_exists(vf));
}

TEST_F(Rdmanet, ADeviceHeldByALivePodIsBusy) {
  auto [port, peer] = make_ports();
  std::string pod1 = make_pod();
  std::string pod2 = make_pod();
  ASSERT_EQ(cni("ADD", "first", pod1, conf({{"device", port}})).exit_code, 0);
  auto second = cni("ADD", "second", pod2, conf({{"device", port}}));
  EXPECT_EQ(second.exit_code, 1);
  EXPECT_EQ(second.code(), 101) << second.out;
  EXPECT_NE(second.msg().find("first"), std::string::npos) << second.msg();
  EXPECT_TRUE(link_exists("net1", pod1)) << "the failed ADD disturbed the holder";
}

TEST_F(Rdmanet, AStaleHoldIsReclaimed) {
  // This test puts the pod interface into the host netns: a unique name keeps
  // parallel tests apart.
  const std::string ifname = "n" + tag_;
  auto [port, peer] = make_ports();
  std::string hw = json::parse(link_field(port, "address"));
  std::string pod1 = make_pod();
  ASSERT_EQ(cni("ADD", "old", pod1, conf({{"hwaddr", hw}}), ifname).exit_code, 0);
  // The node loses the old pod without DEL. The kernel returns physical
  // devices to the host when their netns dies; a veth would die with it, so
  // do what the kernel does by hand: move it out under its pod name.
  sh("ip -n " + pod1 + " link set " + ifname + " netns 1");
  sh("ip netns del " + pod1);
  ASSERT_TRUE(link_exists(ifname));
  std::string pod2 = make_pod();
  auto add = cni("ADD", "new", pod2, conf({{"hwaddr", hw}}), ifname);
  ASSERT_EQ(add.exit_code, 0) << add.out << add.err;
  EXPECT_TRUE(link_exists(ifname, pod2));
  EXPECT_FALSE(link_exists(ifname));
  EXPECT_EQ(leases().size(), 1u) << "the stale attachment's lease was not released";
  ASSERT_EQ(cni("DEL", "new", pod2, conf({{"hwaddr", hw}}), ifname).exit_code, 0);
  EXPECT_TRUE(link_exists(port)) << "device not restored under its original name";
  EXPECT_TRUE(state_files().empty());
}

// A pod netns path can come to name another namespace: a netns recreated under the same
// name, or /proc/<pid>/ns/net after pid reuse. DEL must not touch the new one's links.
TEST_F(Rdmanet, DelNeverActsInANewNamespaceAtTheOldPath) {
  auto [parent, peer] = make_ports();
  std::string pod = make_pod();
  json c = conf({{"mode", "macvlan"}, {"device", parent}});
  ASSERT_EQ(cni("ADD", "ctr-old", pod, c).exit_code, 0);
  sh("ip netns del " + pod);  // the macvlan child dies with it; no DEL yet
  // Once the kernel has freed the old namespace, a new one often gets its inode
  // number: only the netns cookie tells the two apart.
  usleep(200 * 1000);
  sh("ip netns add " + pod);
  sh("ip link add link " + parent + " name rt" + tag_ + "n type macvlan mode bridge");
  sh("ip link set rt" + tag_ + "n netns " + pod + " name net1");

  auto del = cni("DEL", "ctr-old", pod, c);
  ASSERT_EQ(del.exit_code, 0) << del.out << del.err;
  EXPECT_TRUE(link_exists("net1", pod)) << "DEL deleted a link of the namespace now at the path";
  EXPECT_NE(del.err.find("no longer the pod's"), std::string::npos) << del.err;
  EXPECT_TRUE(state_files().empty());
  EXPECT_TRUE(leases().empty());
}

// The same for a device hold: a holder whose netns path now names another namespace is
// gone, so its device is reclaimed rather than busy forever.
TEST_F(Rdmanet, AHoldWhoseNetnsPathWasReusedIsReclaimed) {
  const std::string ifname = "n" + tag_;
  auto [port, peer] = make_ports();
  std::string hw = json::parse(link_field(port, "address"));
  std::string pod1 = make_pod();
  ASSERT_EQ(cni("ADD", "old", pod1, conf({{"hwaddr", hw}}), ifname).exit_code, 0);
  sh("ip -n " + pod1 + " link set " + ifname + " netns 1");  // what the kernel does, see above
  sh("ip netns del " + pod1);
  usleep(200 * 1000);  // see DelNeverActsInANewNamespaceAtTheOldPath
  sh("ip netns add " + pod1);
  std::string pod2 = make_pod();
  auto add = cni("ADD", "new", pod2, conf({{"hwaddr", hw}}), ifname);
  ASSERT_EQ(add.exit_code, 0) << add.out << add.err;
  EXPECT_TRUE(link_exists(ifname, pod2));
  EXPECT_EQ(leases().size(), 1u) << "the old attachment's lease was not released";
  ASSERT_EQ(cni("DEL", "new", pod2, conf({{"hwaddr", hw}}), ifname).exit_code, 0);
  EXPECT_TRUE(link_exists(port));
  EXPECT_TRUE(state_files().empty());
}

// The old pod's DEL racing the new pod's ADD for the same device (the node
// lost the old pod's netns): the device ends with the new pod, never with
// both, and the old DEL does not take it back.
TEST_F(Rdmanet, OldDelRacingNewAddLeavesTheDeviceWithTheNewPod) {
  // This test puts the pod interface into the host netns: a unique name keeps
  // parallel tests apart.
  const std::string ifname = "n" + tag_;
  for (int round = 0; round < 3; ++round) {
    auto [port, peer] = make_ports();
    std::string hw = json::parse(link_field(port, "address"));
    json c = conf({{"hwaddr", hw}});
    std::string old_pod = make_pod();
    std::string old_id = "old" + std::to_string(round);
    std::string new_id = "new" + std::to_string(round);
    ASSERT_EQ(cni("ADD", old_id, old_pod, c, ifname).exit_code, 0);
    sh("ip -n " + old_pod + " link set " + ifname + " netns 1");
    sh("ip netns del " + old_pod);
    std::string new_pod = make_pod();
    Output del;
    Output add;
    std::thread t1([&] { del = cni("DEL", old_id, old_pod, c, ifname); });
    std::thread t2([&] { add = cni("ADD", new_id, new_pod, c, ifname); });
    t1.join();
    t2.join();
    EXPECT_EQ(del.exit_code, 0) << del.out << del.err;
    ASSERT_EQ(add.exit_code, 0) << add.out << add.err;
    EXPECT_TRUE(link_exists(ifname, new_pod)) << "round " << round;
    EXPECT_FALSE(link_exists(ifname)) << "round " << round;
    EXPECT_FALSE(link_exists(port)) << "round " << round;
    ASSERT_EQ(cni("DEL", new_id, new_pod, c, ifname).exit_code, 0);
    EXPECT_TRUE(link_exists(port));
    EXPECT_TRUE(state_files().empty());
    EXPECT_TRUE(leases().empty());
  }
}

// udev (or anyone) took the device's host name while it was in the pod: it
// comes back under a name derived from its index, never lost in the pod.
TEST_F(Rdmanet, DeviceComesHomeEvenWhenItsNameWasTaken) {
  auto [port, peer] = make_ports();
  std::string pod = make_pod();
  json c = conf({{"device", port}});
  auto add = cni("ADD", "taken", pod, c);
  ASSERT_EQ(add.exit_code, 0) << add.out;
  sh("ip link set " + peer + " name " + port);  // the peer now holds the name
  std::string index = sh("ip -n " + pod + " -o link show dev net1 | cut -d: -f1");
  index.erase(index.find_last_not_of(" \n") + 1);
  auto del = cni("DEL", "taken", pod, c);
  ASSERT_EQ(del.exit_code, 0) << del.out << del.err;
  EXPECT_FALSE(link_exists("net1", pod));
  EXPECT_TRUE(link_exists("rdmanet" + index)) << sh("ip -br link", false);
  sh("ip link set " + port + " name " + peer);
  sh("ip link set rdmanet" + index + " name " + port);
  EXPECT_TRUE(state_files().empty());
}

TEST_F(Rdmanet, ConcurrentAddsForOneDeviceHandItToOnePod) {
  auto [port, peer] = make_ports();
  constexpr int kPods = 4;
  std::vector<std::string> pods;
  for (int i = 0; i < kPods; ++i) {
    pods.push_back(make_pod());
  }
  std::vector<Output> results(kPods);
  std::vector<std::thread> threads;
  for (int i = 0; i < kPods; ++i) {
    // (clang 14 cannot capture a structured binding.)
    threads.emplace_back([&, i, device = port] {
      results[i] = cni("ADD", "race" + std::to_string(i), pods[i], conf({{"device", device}}));
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  int won = 0;
  for (int i = 0; i < kPods; ++i) {
    if (results[i].exit_code == 0) {
      ++won;
      EXPECT_TRUE(link_exists("net1", pods[i]));
    } else {
      EXPECT_TRUE(results[i].code() == 101 || results[i].code() == 100) << results[i].out;
      EXPECT_FALSE(link_exists("net1", pods[i]));
    }
  }
  EXPECT_EQ(won, 1);
  EXPECT_EQ(leases().size(), 1u);
}

TEST_F(Rdmanet, CheckVerifiesAgainstPrevResult) {
  auto [port, peer] = make_ports();
  std::string pod = make_pod();
  json c = conf({{"device", port}}, "1.0.0");
  auto add = cni("ADD", "chk", pod, c);
  ASSERT_EQ(add.exit_code, 0) << add.out;
  json with_prev = c;
  with_prev["prevResult"] = add.doc();
  auto ok = cni("CHECK", "chk", pod, with_prev);
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;

  sh("ip -n " + pod + " addr del 10.123.0.2/24 dev net1");
  auto bad = cni("CHECK", "chk", pod, with_prev);
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.msg().find("10.123.0.2/24"), std::string::npos) << bad.out;

  auto unknown = cni("CHECK", "nobody", pod, with_prev);
  EXPECT_EQ(unknown.code(), 3) << unknown.out;
}

TEST_F(Rdmanet, StatusAndGc) {
  auto [a, b] = make_ports();
  std::string pod_a = make_pod();
  std::string pod_b = make_pod();
  json c = conf({{"mode", "macvlan"}, {"device", a}}, "1.1.0");
  c.erase("ipam");
  ASSERT_EQ(cni("ADD", "keep", pod_a, c).exit_code, 0);
  ASSERT_EQ(cni("ADD", "drop", pod_b, c).exit_code, 0);

  EXPECT_EQ(cni("STATUS", "", "", c, "").exit_code, 0);
  json gc = c;
  gc["cni.dev/valid-attachments"] = {{{"containerID", "keep"}, {"ifname", "net1"}}};
  auto out = cni("GC", "", "", gc, "");
  ASSERT_EQ(out.exit_code, 0) << out.out << out.err;
  EXPECT_TRUE(link_exists("net1", pod_a));
  EXPECT_FALSE(link_exists("net1", pod_b));
  EXPECT_EQ(state_files().size(), 1u);

  std::ofstream(dir_ + "/file") << "x";
  json broken = c;
  broken["stateDir"] = dir_ + "/file/state";
  auto status = cni("STATUS", "", "", broken, "");
  EXPECT_EQ(status.code(), 50) << status.out;
}

TEST_F(Rdmanet, ChainsWithTheReferenceTuningPlugin) {
  auto [port, peer] = make_ports();
  std::string pod = make_pod();
  json c = conf({{"device", port}}, "1.0.0");
  auto add = cni("ADD", "chain", pod, c);
  ASSERT_EQ(add.exit_code, 0) << add.out;
  // tuning runs next in the chain with our result as prevResult.
  json tuning = {{"cniVersion", "1.0.0"},
                 {"name", "rail0"},
                 {"type", "tuning"},
                 {"mac", "02:11:22:33:44:55"},
                 {"sysctl", {{"net.ipv4.conf.net1.arp_announce", "1"}}},
                 {"prevResult", add.doc()}};
  std::string input = dir_ + "/tuning.json";
  std::ofstream(input) << tuning.dump();
  std::string out = sh("CNI_COMMAND=ADD CNI_CONTAINERID=chain CNI_NETNS=/run/netns/" + pod +
                       " CNI_IFNAME=net1 CNI_PATH=" + dir_ + "/bin /usr/lib/cni/tuning < " + input);
  json tuned = json::parse(out.substr(out.find('{')));
  EXPECT_EQ(tuned["interfaces"][0]["mac"], "02:11:22:33:44:55");
  EXPECT_EQ(sh("ip netns exec " + pod + " cat /proc/sys/net/ipv4/conf/net1/arp_announce"), "1\n");

  // A second rdmanet attachment chained after the first extends its result.
  auto [port2, peer2] = make_ports();
  json second = conf({{"device", port2}}, "1.0.0");
  second["prevResult"] = tuned;
  second["ipam"]["ranges"] = {{{{"subnet", "10.125.0.0/24"}}}};
  second["ipam"]["routes"] = {{{"dst", "10.126.0.0/16"}}};
  auto add2 = cni("ADD", "chain", pod, second, "net2");
  ASSERT_EQ(add2.exit_code, 0) << add2.out << add2.err;
  json r2 = add2.doc();
  ASSERT_EQ(r2["interfaces"].size(), 2u);
  EXPECT_EQ(r2["interfaces"][1]["name"], "net2");
  EXPECT_EQ(r2["ips"].back()["interface"], 1);
  EXPECT_EQ(r2["ips"][0]["address"], "10.123.0.2/24");

  // DEL in reverse order: tuning restores the MAC, rdmanet the device.
  sh("CNI_COMMAND=DEL CNI_CONTAINERID=chain CNI_NETNS=/run/netns/" + pod +
     " CNI_IFNAME=net1 CNI_PATH=" + dir_ + "/bin /usr/lib/cni/tuning < " + input);
  ASSERT_EQ(cni("DEL", "chain", pod, second, "net2").exit_code, 0);
  ASSERT_EQ(cni("DEL", "chain", pod, c).exit_code, 0);
  EXPECT_TRUE(link_exists(port));
  EXPECT_TRUE(link_exists(port2));
}

}  // namespace
