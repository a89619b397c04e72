#include "netns/link.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <netlink/netlink.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>

#include "netns/address.h"
#include "netns/testing/test_util.h"

namespace rdmanet::netns {

// Sends a request on an Rtnl's socket without reading its answer, as an exchange cut
// short leaves one queued.
struct RtnlTestPeer {
  static int send_unanswered(Rtnl& rtnl, const NlRequest& req) {
    return nl_send_auto(rtnl.sock_.get(), req.msg());
  }
};

namespace {

using testing::KernelTest;
using testing::must;
using testing::TestNetns;

class LinkTest : public KernelTest {};

bool has_link(Rtnl& rtnl, const std::string& name) { return find_link_by_name(rtnl, name).ok(); }

// Names the kernel would not keep verbatim are refused before any request: '%' (expanded
// to a number), white space including the byte 0xA0 (the kernel's isspace holds for it).
TEST(LinkName, RefusesWhatTheKernelWouldNotKeep) {
  EXPECT_TRUE(check_link_name("net1").ok());
  EXPECT_TRUE(check_link_name("ens1f0v3").ok());
  for (const std::string& bad :
       {std::string("net%d"), std::string("a b"), std::string("a\xa0"), std::string("a/b"),
        std::string("a:b"), std::string(""), std::string("."), std::string(16, 'x')}) {
    auto s = check_link_name(bad);
    EXPECT_FALSE(s.ok()) << bad;
    if (!s.ok()) {
      EXPECT_EQ(s.error().kind(), ErrorKind::kInvalidConfig);
    }
  }
}

// An answer of an earlier exchange still queued on the socket (seen under heavy link churn
// on the host) is skipped, not taken for this request's: libnl's own check failed the
// next request with "sequence number mismatch" after the kernel had done it.
TEST_F(LinkTest, AStaleAnswerOnTheSocketDoesNotFailTheNextRequest) {
  auto& a = make_netns();
  make_veth(a, "v0", a, "v1");
  Rtnl rtnl = a.rtnl();
  auto v0 = find_link_by_name(rtnl, "v0");
  ASSERT_OK(v0);
  ifinfomsg ifi{};
  ifi.ifi_index = v0->index;
  NlRequest stale(RTM_GETLINK, NLM_F_REQUEST, &ifi, sizeof ifi);
  ASSERT_GE(RtnlTestPeer::send_unanswered(rtnl, stale), 0);
  ASSERT_OK(set_link_mtu(rtnl, *v0, 1400));
  auto again = find_link_by_index(rtnl, v0->index);
  ASSERT_OK(again);
  EXPECT_EQ(again->mtu, 1400U);
}

TEST_F(LinkTest, FindsByNameIndexAndHwaddr) {
  auto& a = make_netns();
  make_veth(a, "v0", a, "v1");
  Rtnl rtnl = a.rtnl();

  auto v0 = find_link_by_name(rtnl, "v0");
  ASSERT_OK(v0);
  EXPECT_EQ(v0->name, "v0");
  EXPECT_EQ(v0->kind, "veth");
  EXPECT_EQ(v0->mtu, 1500u);
  EXPECT_EQ(v0->hwaddr.bytes().size(), 6u);
  EXPECT_EQ(v0->broadcast.str(), "ff:ff:ff:ff:ff:ff");
  EXPECT_FALSE(v0->up());

  auto by_index = find_link_by_index(rtnl, v0->index);
  ASSERT_OK(by_index);
  EXPECT_EQ(by_index->name, "v0");

  auto by_mac = find_link_by_hwaddr(rtnl, v0->hwaddr);
  ASSERT_OK(by_mac);
  EXPECT_EQ(by_mac->index, v0->index);

  auto links = list_links(rtnl);
  ASSERT_OK(links);
  EXPECT_EQ(links->size(), 3u);  // lo, v0, v1

  auto missing = find_link_by_name(rtnl, "nope0");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().kind(), ErrorKind::kDeviceNotFound);
  EXPECT_EQ(missing.error().msg(), "find link \"nope0\": No such device");
  EXPECT_EQ(find_link_by_index(rtnl, 9999).error().kind(), ErrorKind::kDeviceNotFound);
  EXPECT_EQ(find_link_by_hwaddr(rtnl, *HwAddress::parse("02:00:00:00:00:99")).error().kind(),
            ErrorKind::kDeviceNotFound);
  EXPECT_EQ(find_link_by_name(rtnl, "../x").error().kind(), ErrorKind::kInvalidConfig);
}

TEST_F(LinkTest, ChangesUpMtuHwaddrAlias) {
  auto& a = make_netns();
  make_veth(a, "v0", a, "v1");
  Rtnl rtnl = a.rtnl();
  auto v0 = must(find_link_by_name(rtnl, "v0"));
  auto mac = must(HwAddress::parse("02:aa:bb:cc:dd:01"));

  ASSERT_OK(set_link_mtu(rtnl, v0, 9000));
  ASSERT_OK(set_link_hwaddr(rtnl, v0, mac));
  ASSERT_OK(set_link_alias(rtnl, v0, "rdmanet:orig=ens1f0v3"));
  ASSERT_OK(set_link_up(rtnl, v0));

  auto now = must(find_link_by_name(rtnl, "v0"));
  EXPECT_EQ(now.mtu, 9000u);
  EXPECT_EQ(now.hwaddr, mac);
  EXPECT_EQ(now.alias, "rdmanet:orig=ens1f0v3");
  EXPECT_TRUE(now.up());
  std::string shown = a.ip("link show v0");
  EXPECT_NE(shown.find("mtu 9000"), std::string::npos) << shown;
  EXPECT_NE(shown.find("02:aa:bb:cc:dd:01"), std::string::npos) << shown;
  EXPECT_NE(shown.find("alias rdmanet:orig=ens1f0v3"), std::string::npos) << shown;

  ASSERT_OK(set_link_alias(rtnl, v0, ""));
  ASSERT_OK(set_link_down(rtnl, v0));
  now = must(find_link_by_name(rtnl, "v0"));
  EXPECT_EQ(now.alias, "");
  EXPECT_FALSE(now.up());

  auto too_big = set_link_mtu(rtnl, v0, 70000);
  ASSERT_FALSE(too_big.ok());
  EXPECT_NE(too_big.error().msg().find("set mtu 70000 on link \"v0\": Invalid argument"),
            std::string::npos)
      << too_big.error().msg();
}

TEST_F(LinkTest, Renames) {
  auto& a = make_netns();
  make_veth(a, "v0", a, "v1");
  Rtnl rtnl = a.rtnl();
  auto v0 = must(find_link_by_name(rtnl, "v0"));

  // Recent kernels rename a running link; older ones refuse, and must say so clearly.
  ASSERT_OK(set_link_up(rtnl, v0));
  auto live = rename_link(rtnl, v0, "live0");
  if (live.ok()) {
    ASSERT_OK(rename_link(rtnl, must(find_link_by_name(rtnl, "live0")), "v0"));
  } else {
    EXPECT_EQ(live.error().msg(), "rename link \"v0\" to \"live0\": Device or resource busy");
    EXPECT_EQ(live.error().kind(), ErrorKind::kDeviceBusy);
  }

  ASSERT_OK(set_link_down(rtnl, v0));
  ASSERT_OK(rename_link(rtnl, v0, "net1"));
  EXPECT_EQ(must(find_link_by_index(rtnl, v0.index)).name, "net1");
  EXPECT_FALSE(has_link(rtnl, "v0"));

  auto bad = rename_link(rtnl, v0, "this-name-is-too-long");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().kind(), ErrorKind::kInvalidConfig);
}

TEST_F(LinkTest, MovesToAnotherNetns) {
  auto& host = make_netns();
  auto& pod = make_netns();
  make_veth(host, "eth9", host, "peer9");
  Rtnl host_rtnl = host.rtnl();
  Rtnl pod_rtnl = pod.rtnl();
  auto eth9 = must(find_link_by_name(host_rtnl, "eth9"));
  ASSERT_OK(set_link_up(host_rtnl, eth9));

  ASSERT_OK(move_link(host_rtnl, eth9, pod.ns()));
  EXPECT_FALSE(has_link(host_rtnl, "eth9"));
  auto moved = find_link_by_name(pod_rtnl, "eth9");
  ASSERT_OK(moved);
  EXPECT_FALSE(moved->up()) << "a moved link arrives down";
  EXPECT_NE(pod.ip("link show eth9").find("eth9"), std::string::npos);
}

TEST_F(LinkTest, RenameAndMoveSurvivesANameClashInTheTarget) {
  auto& host = make_netns();
  auto& pod = make_netns();
  make_veth(host, "eth9", host, "peer9");
  // The pod already has an "eth9" (its own interface), as happens with eth0/net1 clashes.
  make_veth(pod, "eth9", pod, "podpeer");
  Rtnl host_rtnl = host.rtnl();
  Rtnl pod_rtnl = pod.rtnl();
  auto eth9 = must(find_link_by_name(host_rtnl, "eth9"));

  auto plain = move_link(host_rtnl, eth9, pod.ns());
  ASSERT_FALSE(plain.ok());
  EXPECT_EQ(plain.error().msg().find("move link \"eth9\" to netns " + pod.path() + ": File exists"),
            0u)
      << plain.error().msg();
  EXPECT_TRUE(has_link(host_rtnl, "eth9")) << "a failed move leaves the link where it was";

  ASSERT_OK(move_link(host_rtnl, eth9, pod.ns(), "net1"));
  EXPECT_FALSE(has_link(host_rtnl, "eth9"));
  auto net1 = find_link_by_name(pod_rtnl, "net1");
  ASSERT_OK(net1);
  EXPECT_EQ(net1->hwaddr, eth9.hwaddr);
  EXPECT_EQ(must(find_link_by_name(pod_rtnl, "eth9")).kind, "veth");  // the pod's own, untouched

  // And back, restoring the original name (DEL), with no clash this time.
  auto back = must(find_link_by_name(pod_rtnl, "net1"));
  ASSERT_OK(move_link(pod_rtnl, back, host.ns(), "eth9"));
  EXPECT_EQ(must(find_link_by_name(host_rtnl, "eth9")).hwaddr, eth9.hwaddr);
  EXPECT_FALSE(has_link(pod_rtnl, "net1"));
}

TEST_F(LinkTest, AltnamesMustGoBeforeAMoveIntoANetnsThatUsesThem) {
  auto& host = make_netns();
  auto& pod = make_netns();
  make_veth(host, "eth9", host, "peer9");
  make_veth(pod, "enp59s0f0v2", pod, "podpeer");
  Rtnl host_rtnl = host.rtnl();
  auto eth9 = must(find_link_by_name(host_rtnl, "eth9"));
  ASSERT_OK(add_link_altname(host_rtnl, eth9, "enp59s0f0v2"));
  eth9 = must(find_link_by_name(host_rtnl, "enp59s0f0v2"));  // lookups see altnames too
  EXPECT_EQ(eth9.name, "eth9");
  EXPECT_EQ(eth9.altnames, std::vector<std::string>{"enp59s0f0v2"});

  auto clash = move_link(host_rtnl, eth9, pod.ns(), "net1");
  ASSERT_FALSE(clash.ok());
  EXPECT_NE(clash.error().msg().find("File exists"), std::string::npos) << clash.error().msg();

  ASSERT_OK(delete_link_altname(host_rtnl, eth9, "enp59s0f0v2"));
  EXPECT_TRUE(must(find_link_by_name(host_rtnl, "eth9")).altnames.empty());
  ASSERT_OK(move_link(host_rtnl, eth9, pod.ns(), "net1"));
  Rtnl pod_rtnl = pod.rtnl();
  EXPECT_TRUE(must(find_link_by_name(pod_rtnl, "net1")).altnames.empty());
}

TEST_F(LinkTest, DeletesALink) {
  auto& a = make_netns();
  make_veth(a, "v0", a, "v1");
  Rtnl rtnl = a.rtnl();
  ASSERT_OK(delete_link(rtnl, must(find_link_by_name(rtnl, "v0"))));
  EXPECT_FALSE(has_link(rtnl, "v0"));
  EXPECT_FALSE(has_link(rtnl, "v1"));
}

// Sends one UDP datagram from one namespace to another and returns what arrived.
std::string udp_roundtrip(const TestNetns& from, const TestNetns& to, const std::string& to_ip) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(4791);  // the RoCE v2 port, for flavour
  inet_pton(AF_INET, to_ip.c_str(), &addr.sin_addr);
  auto receiver = in_netns(to.ns(), [&]() -> Expected<Fd> {
    Fd fd(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      return sys_error("bind", errno);
    }
    return fd;
  });
  if (!receiver.ok()) {
    return "receiver: " + receiver.error().msg();
  }
  Status sent = in_netns(from.ns(), [&]() -> Status {
    Fd fd(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (sendto(fd.get(), "hello", 5, 0, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 5) {
      return sys_error("sendto", errno);
    }
    return ok_status();
  });
  if (!sent.ok()) {
    return "sender: " + sent.error().msg();
  }
  pollfd pfd{receiver->get(), POLLIN, 0};
  if (poll(&pfd, 1, 3000) != 1) {
    return "nothing received";
  }
  char buf[16] = {};
  ssize_t n = recv(receiver->get(), buf, sizeof buf, 0);
  return std::string(buf, n > 0 ? static_cast<size_t>(n) : 0);
}

TEST_F(LinkTest, CreatesAMacvlanOverAVethInTheTargetNetnsAndItCarriesTraffic) {
  auto& host = make_netns();
  auto& pod = make_netns();
  auto& peer = make_netns();
  make_veth(host, "rdma0", peer, "wire0");
  Rtnl host_rtnl = host.rtnl();
  Rtnl pod_rtnl = pod.rtnl();
  Rtnl peer_rtnl = peer.rtnl();
  auto parent = must(find_link_by_name(host_rtnl, "rdma0"));
  ASSERT_OK(set_link_up(host_rtnl, parent));

  MacvlanSpec spec;
  spec.name = "net1";
  spec.parent_index = parent.index;
  spec.mode = MacvlanMode::kBridge;
  spec.target = &pod.ns();
  spec.hwaddr = must(HwAddress::parse("02:00:0a:09:00:02"));
  spec.mtu = 1400;
  ASSERT_OK(create_macvlan(host_rtnl, spec));

  EXPECT_FALSE(has_link(host_rtnl, "net1")) << "created in the pod, never in the host";
  auto net1 = find_link_by_name(pod_rtnl, "net1");
  ASSERT_OK(net1);
  EXPECT_EQ(net1->kind, "macvlan");
  EXPECT_EQ(net1->hwaddr, *spec.hwaddr);
  EXPECT_EQ(net1->mtu, 1400u);
  EXPECT_NE(pod.ip("-d link show net1").find("macvlan mode bridge"), std::string::npos);

  ASSERT_OK(add_address(pod_rtnl, *net1, must(IpPrefix::parse("10.9.0.2/24"))));
  ASSERT_OK(set_link_up(pod_rtnl, *net1));
  auto wire0 = must(find_link_by_name(peer_rtnl, "wire0"));
  ASSERT_OK(add_address(peer_rtnl, wire0, must(IpPrefix::parse("10.9.0.1/24"))));
  ASSERT_OK(set_link_up(peer_rtnl, wire0));
  EXPECT_EQ(udp_roundtrip(pod, peer, "10.9.0.1"), "hello");
  EXPECT_EQ(udp_roundtrip(peer, pod, "10.9.0.2"), "hello");

  // A second one with the same name in the same pod is refused, naming it.
  auto again = create_macvlan(host_rtnl, spec);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.error().msg().find("create macvlan \"net1\""), std::string::npos);
  EXPECT_NE(again.error().msg().find("File exists"), std::string::npos) << again.error().msg();
}

TEST_F(LinkTest, CreatesEveryMacvlanMode) {
  auto& host = make_netns();
  auto& pod = make_netns();
  make_veth(host, "rdma0", host, "wire0");
  Rtnl host_rtnl = host.rtnl();
  Rtnl pod_rtnl = pod.rtnl();
  auto parent = must(find_link_by_name(host_rtnl, "rdma0"));
  const std::pair<MacvlanMode, const char*> modes[] = {{MacvlanMode::kPrivate, "private"},
                                                       {MacvlanMode::kVepa, "vepa"},
                                                       {MacvlanMode::kBridge, "bridge"},
                                                       {MacvlanMode::kPassthru, "passthru"}};
  for (const auto& [mode, name] : modes) {
    MacvlanSpec spec;
    spec.name = "mv0";
    spec.parent_index = parent.index;
    spec.mode = mode;
    spec.target = &pod.ns();
    ASSERT_OK(create_macvlan(host_rtnl, spec));
    EXPECT_NE(pod.ip("-d link show mv0").find(std::string("macvlan mode ") + name),
              std::string::npos)
        << name;
    ASSERT_OK(delete_link(pod_rtnl, must(find_link_by_name(pod_rtnl, "mv0"))));
  }

  MacvlanSpec bad;
  bad.name = "mv1";
  bad.parent_index = 4242;
  bad.target = &pod.ns();
  auto missing_parent = create_macvlan(host_rtnl, bad);
  ASSERT_FALSE(missing_parent.ok());
  EXPECT_NE(missing_parent.error().msg().find("parent index 4242"), std::string::npos);
}

}  // namespace
}  // namespace rdmanet::netns
