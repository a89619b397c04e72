// End to end: the pod holds CAP_NET_ADMIN in its own netns and uses it. Everything in the
// pod netns (names, MACs, new links, nested namespaces) is the attacker's; DEL must bring
// the device home by what the pod cannot forge, never move a link that is not the device,
// and keep its record while it cannot.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "plugin/testing/plugin_fixture.h"

namespace rdmanet::plugin::testing {
namespace {

class Hostile : public Rdmanet {
 protected:
  // The ports' host peer, the pod, a config, and an ADD that worked.
  void attach(const json& extra = json::object()) {
    std::tie(port_, peer_) = make_ports();
    mac_ = link_field(port_, "address");
    mtu_ = link_field(port_, "mtu");
    pod_ = make_pod();
    config_ = conf({{"device", port_}});
    config_.update(extra);
    auto add = cni("ADD", "evil", pod_, config_);
    ASSERT_EQ(add.exit_code, 0) << add.out << add.err;
  }

  Output del() { return cni("DEL", "evil", pod_, config_); }

  // `ip -n <pod> ...` as the pod would run it.
  void in_pod(const std::string& cmd) { sh("ip -n " + pod_ + " " + cmd); }

  std::string port_, peer_, mac_, mtu_, pod_;
  json config_;
};

// The pod renames net1 and puts a veth of its own in its place with the device's MAC: DEL
// brings the real device home and leaves the pod's veth where it is.
TEST_F(Hostile, AnImpostorNamedLikeThePodInterfaceIsNotMoved) {
  attach({{"mtu", 1400}});
  in_pod("link set net1 name stolen");
  in_pod("link add net1 address " + mac_ + " type veth peer name fake1");
  in_pod("link set net1 up");
  auto d = del();
  EXPECT_EQ(d.exit_code, 0) << d.out << d.err;
  EXPECT_TRUE(link_exists(port_)) << "the real device is not home";
  EXPECT_EQ(link_field(port_, "mtu"), mtu_);
  EXPECT_EQ(link_field(peer_, "link"), "\"" + port_ + "\"") << "home is the port of this peer";
  EXPECT_TRUE(link_exists("net1", pod_)) << "the pod's own veth was taken";
  EXPECT_FALSE(link_exists("stolen", pod_));
  EXPECT_TRUE(state_files().empty());
}

// Renamed only: found under its new name.
TEST_F(Hostile, ARenamedDeviceStillComesHome) {
  attach();
  in_pod("link set net1 name whatever0");
  EXPECT_EQ(del().exit_code, 0);
  EXPECT_TRUE(link_exists(port_));
  EXPECT_FALSE(link_exists("whatever0", pod_));
  EXPECT_TRUE(state_files().empty());
}

// Hidden in a netns of the pod's own: DEL cannot bring it home, says so (11, naming the
// device), keeps the record and changes nothing; once it is back in the pod, DEL finishes.
TEST_F(Hostile, ADeviceHiddenInANestedNetnsKeepsTheRecordUntilItCanComeHome) {
  attach();
  std::string nested = make_pod();
  in_pod("link set net1 netns " + nested);
  auto d = del();
  EXPECT_EQ(d.exit_code, 1) << d.out;
  EXPECT_EQ(d.code(), 11) << d.out;
  EXPECT_NE(d.msg().find(port_), std::string::npos) << d.msg();
  EXPECT_FALSE(state_files().empty()) << "the record was dropped with the device away";
  EXPECT_EQ(leases().size(), 0U) << "IPAM, undone before the device, is released";
  EXPECT_TRUE(link_exists("net1", nested));

  sh("ip -n " + nested + " link set net1 netns " + pod_);
  auto again = del();
  EXPECT_EQ(again.exit_code, 0) << again.out << again.err;
  EXPECT_TRUE(link_exists(port_));
  EXPECT_TRUE(state_files().empty());
}

// The pod deletes its end of the veth (its host peer goes with it): nothing is left to
// bring home, and DEL can tell, because the peer in the host is gone too.
TEST_F(Hostile, ADeviceThePodDeletedIsGoneAndDelSaysDone) {
  attach();
  in_pod("link del net1");
  EXPECT_EQ(del().exit_code, 0);
  EXPECT_TRUE(state_files().empty());
}

// Back in the host under another name, as the kernel hands back a device of a destroyed
// netns when its name is taken (dev<ifindex>), with what the pod set: found by identity,
// renamed back, its MTU and MAC restored.
TEST_F(Hostile, ADeviceBackAsDevIfindexIsRestored) {
  attach();
  in_pod("link set net1 mtu 1280 address 02:00:00:00:06:66");
  const std::string dev = "dev" + tag_;  // unique: parallel tests share the host
  in_pod("link set net1 netns 1 name " + dev);
  auto d = del();
  EXPECT_EQ(d.exit_code, 0) << d.out << d.err;
  EXPECT_TRUE(link_exists(port_)) << sh("ip -br link", false);
  EXPECT_FALSE(link_exists(dev));
  EXPECT_EQ(link_field(port_, "mtu"), mtu_);
  EXPECT_EQ(link_field(port_, "address"), mac_);
  EXPECT_TRUE(state_files().empty());
}

// macvlan mode: the pod renames our child and makes a veth named net1; DEL deletes the
// child (known by its parent in the host) and not the pod's veth.
TEST_F(Hostile, MacvlanDelDeletesOurChildNotTheImpostor) {
  attach({{"mode", "macvlan"}});
  in_pod("link set net1 name ours");
  in_pod("link add net1 type veth peer name fake1");
  auto d = del();
  EXPECT_EQ(d.exit_code, 0) << d.out << d.err;
  EXPECT_FALSE(link_exists("ours", pod_));
  EXPECT_TRUE(link_exists("net1", pod_)) << "the pod's own link was deleted";
  EXPECT_TRUE(link_exists(port_)) << "the parent stays in the host";
  EXPECT_TRUE(state_files().empty());
}

}  // namespace
}  // namespace rdmanet::plugin::testing
