// End to end: netdev and macvlan mode ADD and DEL, the result's shape at every spec
// version, and device selection (the fake sysfs of plugin/testing/plugin_fixture.h maps PCI
// and auxiliary ids to veth links).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "plugin/testing/plugin_fixture.h"

namespace rdmanet::plugin::testing {
namespace {

namespace fs = std::filesystem;

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
  // A route without a gateway goes via the IP config's, as the reference plugins do it.
  EXPECT_NE(sh("ip -n " + pod + " route show").find("10.124.0.0/16 via 10.123.0.1 dev net1"),
            std::string::npos)
      << sh("ip -n " + pod + " route show");
  // sourceRouting: the rail's own table and a rule for its address.
  const std::string table = std::to_string(10000 + std::stoi(link_field("net1", "ifindex", pod)));
  EXPECT_NE(sh("ip -n " + pod + " rule show").find("3000:\tfrom 10.123.0.2 lookup " + table),
            std::string::npos)
      << sh("ip -n " + pod + " rule show");
  EXPECT_EQ(sh("ip -n " + pod + " route show table " + table),
            "10.123.0.0/24 dev net1 scope link src 10.123.0.2 \n"
            "10.124.0.0/16 via 10.123.0.1 dev net1 \n");
  EXPECT_EQ(sh("ip netns exec " + pod + " cat /proc/sys/net/ipv4/conf/net1/arp_ignore"), "1\n");
  EXPECT_EQ(sh("ip netns exec " + pod + " cat /proc/sys/net/ipv4/conf/net1/rp_filter"), "2\n");
  EXPECT_EQ(leases().size(), 1u);

  auto del = cni("DEL", "ctr-a", pod, conf({{"device", port}}));
  ASSERT_EQ(del.exit_code, 0) << del.out << del.err;
  ASSERT_TRUE(link_exists(port)) << "device not back in the host under its name";
  EXPECT_FALSE(link_exists("net1", pod));
  EXPECT_EQ(sh("ip -n " + pod + " rule show").find("lookup " + table), std::string::npos)
      << "DEL left the rail's rule behind";
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

}  // namespace
}  // namespace rdmanet::plugin::testing
