#include "netns/link_identity.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "netns/testing/test_util.h"

namespace rdmanet::netns {
namespace {

using testing::KernelTest;
using testing::must;
using testing::TestNetns;

// A "host" netns with a port (one end of a veth pair, the other end stays in the host) and
// a "pod" netns it moves into, as ADD does; then the pod plays every trick it can with
// CAP_NET_ADMIN in its own netns.
class LinkIdentityTest : public KernelTest {
 protected:
  void SetUp() override {
    KernelTest::SetUp();
    if (HasFatalFailure()) {
      return;
    }
    host_ = &make_netns();
    pod_ = &make_netns();
    host_->ip("link add port type veth peer name peer");
    auto rtnl = host_->rtnl();
    id_ = identity_of(must(find_link_by_name(rtnl, "port")));
    mac_ = must(find_link_by_name(rtnl, "port")).hwaddr.str();
    host_->ip("link set port netns " + pod_->name() + " name net1");
  }

  std::vector<LinkInfo> in(TestNetns& ns) {
    auto rtnl = ns.rtnl();
    return must(find_links(rtnl, ns.ns(), host_->ns(), id_));
  }

  TestNetns* host_ = nullptr;
  TestNetns* pod_ = nullptr;
  LinkIdentity id_;
  std::string mac_;
};

TEST_F(LinkIdentityTest, AVethPortIsKnownByItsPeerInTheHost) {
  EXPECT_TRUE(id_.strong());
  EXPECT_EQ(id_.kind, "veth");
  EXPECT_NE(id_.host_peer, 0);
  auto found = in(*pod_);
  ASSERT_EQ(found.size(), 1U);
  EXPECT_EQ(found[0].name, "net1");
  EXPECT_TRUE(in(*host_).empty());
}

TEST_F(LinkIdentityTest, FoundUnderAnyNameThePodGivesIt) {
  pod_->ip("link set net1 name sneaky");
  auto found = in(*pod_);
  ASSERT_EQ(found.size(), 1U);
  EXPECT_EQ(found[0].name, "sneaky");
}

// The pod hides the port in a netns of its own and puts a veth of its own in its place:
// same name, same MAC, even the same ifindex. Nothing in the pod is the port any more.
TEST_F(LinkIdentityTest, AnImpostorWithTheSameNameMacAndIndexIsNotThePort) {
  TestNetns& nested = make_netns();
  std::string index = std::to_string(id_.index);
  pod_->ip("link set net1 netns " + nested.name());
  pod_->ip("link add net1 index " + index + " address " + mac_ + " type veth peer name x1");
  EXPECT_TRUE(in(*pod_).empty());
  // Its peer in the nested netns, with the host peer's ifindex: still not the host.
  pod_->ip("link del net1");
  pod_->ip("link add net1 index " + index + " address " + mac_ + " type veth peer name x1 index " +
           std::to_string(id_.host_peer) + " netns " + nested.name());
  EXPECT_TRUE(in(*pod_).empty());
  // Back in the host, the port is found there.
  nested.ip("link set net1 netns " + host_->name() + " name port");
  auto home = in(*host_);
  ASSERT_EQ(home.size(), 1U);
  EXPECT_EQ(home[0].name, "port");
}

// A NIC that is a veth whose peer sits in a third netns (a switch): nothing of it in the pod
// is out of the pod's reach but its peer, which the host asks where the device is
// (IFLA_TARGET_NETNSID), and through which a netns nobody can open is still seen into.
TEST_F(LinkIdentityTest, AVethWithAFarPeerIsLocatedByItsPeer) {
  TestNetns& sw = make_netns();
  host_->ip("link add nic type veth peer name far netns " + sw.name());
  auto rtnl = host_->rtnl();
  LinkIdentity id = identity_of(must(find_link_by_name(rtnl, "nic")));
  EXPECT_TRUE(id.strong());
  EXPECT_EQ(id.host_peer, 0);
  EXPECT_NE(id.far_peer, 0);
  EXPECT_GE(id.far_netnsid, 0);

  auto home = must(locate_by_far_peer(rtnl, id));
  ASSERT_TRUE(home.paired);
  EXPECT_EQ(home.device_index, id.index);
  EXPECT_EQ(home.device_netnsid, must(netns_id(rtnl, host_->ns())));

  const int pod_id = must(assign_netns_id(rtnl, pod_->ns()));
  EXPECT_EQ(must(assign_netns_id(rtnl, pod_->ns())), pod_id) << "an id is assigned once";
  host_->ip("link set nic netns " + pod_->name() + " name net2");
  pod_->ip("link set net2 name sneaky address 02:00:00:00:00:42");
  auto in_pod = must(locate_by_far_peer(rtnl, id));
  ASSERT_TRUE(in_pod.paired);
  EXPECT_EQ(in_pod.device_netnsid, pod_id);
  auto pod_links = must(list_links_in(rtnl, pod_id));
  ASSERT_TRUE(pod_links.has_value());
  auto sneaky = std::find_if(pod_links->begin(), pod_links->end(),
                             [&](const LinkInfo& l) { return l.index == in_pod.device_index; });
  ASSERT_NE(sneaky, pod_links->end()) << "the peer names the pod's link";
  EXPECT_EQ(sneaky->name, "sneaky");
  EXPECT_EQ(must(find_link_by_index_in(rtnl, pod_id, in_pod.device_index)).name, "sneaky");

  pod_->ip("link del sneaky");
  EXPECT_FALSE(must(locate_by_far_peer(rtnl, id)).paired) << "a veth pair dies as one";
  EXPECT_FALSE(must(list_links_in(rtnl, 9999)).has_value()) << "an id no netns has";
  auto none = find_link_by_index_in(rtnl, 9999, 1);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().kind(), ErrorKind::kDeviceNotFound);
}

TEST(LinkIdentity, HardwareIsKnownByItsParentDeviceAndPermanentAddress) {
  LinkInfo vf;
  vf.index = 12;
  vf.parent_bus = "pci";
  vf.parent_dev = "0000:3b:00.2";
  vf.perm_hwaddr = *HwAddress::parse("02:00:00:00:00:02");
  LinkIdentity id = identity_of(vf);
  EXPECT_TRUE(id.strong());
  EXPECT_EQ(id.host_peer, 0);
  Vantage pod{false, 3};
  LinkInfo returned = vf;
  returned.index = 40;
  returned.name = "dev40";
  EXPECT_TRUE(is_same_link(returned, id, Vantage{}));
  LinkInfo other = vf;
  other.parent_dev = "0000:3b:00.3";
  EXPECT_FALSE(is_same_link(other, id, pod));
  LinkInfo impostor;
  impostor.index = 12;
  impostor.kind = "veth";
  impostor.hwaddr = vf.perm_hwaddr;
  EXPECT_FALSE(is_same_link(impostor, id, pod));
  // igbvf takes the MAC its PF pinned as its permanent address when it resets: the parent
  // device alone says which link it is.
  LinkInfo reset = vf;
  reset.perm_hwaddr = *HwAddress::parse("02:11:22:33:44:55");
  EXPECT_TRUE(is_same_link(reset, id, pod));
  // Without a parent device the permanent address is all there is, and it must match.
  LinkIdentity no_parent = id;
  no_parent.parent_bus.clear();
  no_parent.parent_dev.clear();
  LinkInfo orphan = reset;
  orphan.parent_bus.clear();
  orphan.parent_dev.clear();
  EXPECT_FALSE(is_same_link(orphan, no_parent, pod));
  orphan.perm_hwaddr = vf.perm_hwaddr;
  EXPECT_TRUE(is_same_link(orphan, no_parent, pod));
}

// Records of rdmanet 0.1 carry no identity: index, one of the names and one of the MACs.
TEST(LinkIdentity, AWeakIdentityNeedsIndexNameAndMac) {
  LinkIdentity weak;
  weak.index = 7;
  LinkInfo link;
  link.index = 7;
  link.name = "net1";
  link.hwaddr = *HwAddress::parse("02:00:00:00:00:07");
  EXPECT_FALSE(weak.strong());
  EXPECT_TRUE(is_same_link(link, weak, Vantage{}, {"ens1", "net1"}, {"02:00:00:00:00:07"}));
  EXPECT_FALSE(is_same_link(link, weak, Vantage{}, {"ens1"}, {"02:00:00:00:00:07"}));
  EXPECT_FALSE(is_same_link(link, weak, Vantage{}, {"net1"}, {"02:00:00:00:00:99"}));
  link.index = 8;
  EXPECT_FALSE(is_same_link(link, weak, Vantage{}, {"net1"}, {"02:00:00:00:00:07"}));
}

}  // namespace
}  // namespace rdmanet::netns
