// End to end: CHECK, STATUS and GC, and chaining with Debian's reference tuning plugin.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "plugin/testing/plugin_fixture.h"

namespace rdmanet::plugin::testing {
namespace {

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

  // A sysctl ADD set (multiRailSysctls), changed in the pod: as the reference tuning
  // plugin's CHECK, rdmanet's says which and what it should be.
  sh("ip netns exec " + pod + " sysctl -qw net.ipv4.conf.net1.arp_ignore=0");
  auto sysctl = cni("CHECK", "chk", pod, with_prev);
  EXPECT_EQ(sysctl.code(), 102) << sysctl.out;
  EXPECT_NE(sysctl.msg().find("net.ipv4.conf.net1.arp_ignore is 0, ADD set 1"), std::string::npos)
      << sysctl.msg();
  sh("ip netns exec " + pod + " sysctl -qw net.ipv4.conf.net1.arp_ignore=1");
  ASSERT_EQ(cni("CHECK", "chk", pod, with_prev).exit_code, 0);

  sh("ip -n " + pod + " addr del 10.123.0.2/24 dev net1");
  auto bad = cni("CHECK", "chk", pod, with_prev);
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.msg().find("10.123.0.2/24"), std::string::npos) << bad.out;

  auto unknown = cni("CHECK", "nobody", pod, with_prev);
  EXPECT_EQ(unknown.code(), 3) << unknown.out;
}

// What the pod (or anything else) changed after ADD: a route's gateway, the MTU.
TEST_F(Rdmanet, CheckComparesRouteGatewaysAndTheMtu) {
  auto [port, peer] = make_ports();
  std::string pod = make_pod();
  json c = conf({{"device", port}});
  c["ipam"]["routes"] = {{{"dst", "10.124.0.0/16"}, {"gw", "10.123.0.1"}}};
  auto add = cni("ADD", "chk2", pod, c);
  ASSERT_EQ(add.exit_code, 0) << add.out << add.err;
  json with_prev = c;
  with_prev["prevResult"] = add.doc();
  // A 1.1.0 result carries the MTU (host-local, the IPAM peer here, stops at 1.0.0).
  with_prev["prevResult"]["interfaces"][0]["mtu"] = std::stoi(link_field("net1", "mtu", pod));
  ASSERT_EQ(cni("CHECK", "chk2", pod, with_prev).exit_code, 0);

  sh("ip -n " + pod + " route replace 10.124.0.0/16 via 10.123.0.9 dev net1");
  auto gw = cni("CHECK", "chk2", pod, with_prev);
  EXPECT_EQ(gw.exit_code, 1);
  EXPECT_NE(gw.msg().find("10.124.0.0/16 via 10.123.0.1"), std::string::npos) << gw.out;
  sh("ip -n " + pod + " route replace 10.124.0.0/16 via 10.123.0.1 dev net1");
  ASSERT_EQ(cni("CHECK", "chk2", pod, with_prev).exit_code, 0);

  sh("ip -n " + pod + " link set net1 mtu 1280");
  auto mtu = cni("CHECK", "chk2", pod, with_prev);
  EXPECT_EQ(mtu.exit_code, 1);
  EXPECT_NE(mtu.msg().find("MTU 1280"), std::string::npos) << mtu.out;
  EXPECT_EQ(cni("DEL", "chk2", pod, c).exit_code, 0);
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
}  // namespace rdmanet::plugin::testing
