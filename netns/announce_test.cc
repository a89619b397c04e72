#include "netns/announce.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <netinet/icmp6.h>
#include <netinet/ip6.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <functional>

#include "netns/address.h"
#include "netns/testing/test_util.h"

namespace rdmanet::netns {
namespace {

using testing::KernelTest;
using testing::must;

class AnnounceTest : public KernelTest {
 protected:
  void SetUp() override {
    KernelTest::SetUp();
    if (HasFatalFailure()) {
      return;
    }
    pod_ = &make_netns();
    peer_ = &make_netns();
    make_veth(*pod_, "net1", *peer_, "wire0");
    pod_rtnl_.emplace(pod_->rtnl());
    Rtnl peer_rtnl = peer_->rtnl();
    net1_ = must(find_link_by_name(*pod_rtnl_, "net1"));
    wire0_ = must(find_link_by_name(peer_rtnl, "wire0"));
    ASSERT_OK(set_link_up(*pod_rtnl_, net1_));
    ASSERT_OK(set_link_up(peer_rtnl, wire0_));
    // Until the kernel's link watch has run for net1 (asynchronously, later under load),
    // its queue is the noop qdisc, which drops what is sent without an error.
    ASSERT_TRUE(running(*pod_rtnl_, "net1")) << "net1 never came up";
    ASSERT_TRUE(running(peer_rtnl, "wire0")) << "wire0 never came up";
  }

  // Waits up to five seconds for the link's operational state to be up (IFF_RUNNING).
  static bool running(Rtnl& rtnl, const std::string& name) {
    for (int i = 0; i < 100; ++i) {
      auto link = find_link_by_name(rtnl, name);
      if (link.ok() && (link->flags & IFF_RUNNING) != 0) {
        return true;
      }
      poll(nullptr, 0, 50);
    }
    return false;
  }

  // A raw packet socket on wire0, in the peer namespace, opened before anything is sent.
  Fd capture(uint16_t ethertype) {
    return must(in_netns(peer_->ns(), [&]() -> Expected<Fd> {
      Fd fd(socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ethertype)));
      sockaddr_ll ll{};
      ll.sll_family = AF_PACKET;
      ll.sll_protocol = htons(ethertype);
      ll.sll_ifindex = wire0_.index;
      if (!fd.valid() || bind(fd.get(), reinterpret_cast<sockaddr*>(&ll), sizeof ll) != 0) {
        return sys_error("capture socket", errno);
      }
      return fd;
    }));
  }

  // Frames on fd until one satisfies match, or two seconds pass.
  bool wait_for(const Fd& fd, const std::function<bool(const uint8_t*, size_t)>& match) {
    for (int i = 0; i < 50; ++i) {
      pollfd pfd{fd.get(), POLLIN, 0};
      if (poll(&pfd, 1, 2000) != 1) {
        return false;
      }
      uint8_t frame[2048];
      ssize_t n = recv(fd.get(), frame, sizeof frame, 0);
      if (n > 0 && match(frame, static_cast<size_t>(n))) {
        return true;
      }
    }
    return false;
  }

  testing::TestNetns* pod_ = nullptr;
  testing::TestNetns* peer_ = nullptr;
  std::optional<Rtnl> pod_rtnl_;
  LinkInfo net1_;
  LinkInfo wire0_;
};

TEST_F(AnnounceTest, GratuitousArpReachesThePeer) {
  auto addr = must(IpAddress::parse("10.7.0.5"));
  Fd cap = capture(ETH_P_ARP);
  ASSERT_OK(in_netns(pod_->ns(), [&] { return send_gratuitous_arp(net1_, addr); }));

  bool seen = wait_for(cap, [&](const uint8_t* f, size_t n) {
    if (n < 14 + 28) {
      return false;
    }
    const uint8_t* arp = f + 14;
    bool broadcast = std::memcmp(f, "\xff\xff\xff\xff\xff\xff", 6) == 0;
    bool from_net1 = std::memcmp(f + 6, net1_.hwaddr.bytes().data(), 6) == 0;
    bool request = arp[6] == 0 && arp[7] == 1;
    bool sha = std::memcmp(arp + 8, net1_.hwaddr.bytes().data(), 6) == 0;
    bool spa = std::memcmp(arp + 14, addr.data(), 4) == 0;
    bool tpa = std::memcmp(arp + 24, addr.data(), 4) == 0;
    return broadcast && from_net1 && request && sha && spa && tpa;
  });
  EXPECT_TRUE(seen) << "no gratuitous ARP for 10.7.0.5 arrived on wire0";

  auto down = set_link_down(*pod_rtnl_, net1_);
  ASSERT_OK(down);
  auto failed = in_netns(pod_->ns(), [&] { return send_gratuitous_arp(net1_, addr); });
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.error().msg(),
            "send gratuitous ARP for 10.7.0.5 on link \"net1\": Network is down");
}

TEST_F(AnnounceTest, UnsolicitedNeighbourAdvertisementReachesThePeer) {
  auto prefix = must(IpPrefix::parse("fd00:7::5/64"));
  ASSERT_OK(add_address(*pod_rtnl_, net1_, prefix, {.no_dad = true}));
  Fd cap = capture(ETH_P_IPV6);
  ASSERT_OK(in_netns(pod_->ns(), [&] { return announce_address(net1_, prefix.addr); }));

  bool seen = wait_for(cap, [&](const uint8_t* f, size_t n) {
    if (n < 14 + sizeof(ip6_hdr) + sizeof(nd_neighbor_advert) + 8) {
      return false;
    }
    // Copies: the headers sit at odd offsets in the frame.
    ip6_hdr ip6_copy;
    nd_neighbor_advert na_copy;
    std::memcpy(&ip6_copy, f + 14, sizeof ip6_copy);
    std::memcpy(&na_copy, f + 14 + sizeof(ip6_hdr), sizeof na_copy);
    const ip6_hdr* ip6 = &ip6_copy;
    const nd_neighbor_advert* na = &na_copy;
    const uint8_t* opt = f + 14 + sizeof(ip6_hdr) + sizeof(nd_neighbor_advert);
    in6_addr all_nodes{};
    inet_pton(AF_INET6, "ff02::1", &all_nodes);
    return ip6->ip6_nxt == IPPROTO_ICMPV6 && na->nd_na_type == ND_NEIGHBOR_ADVERT &&
           ip6->ip6_hlim == 255 && std::memcmp(&ip6->ip6_dst, &all_nodes, 16) == 0 &&
           std::memcmp(&na->nd_na_target, prefix.addr.data(), 16) == 0 &&
           (na->nd_na_flags_reserved & ND_NA_FLAG_OVERRIDE) != 0 &&
           (na->nd_na_flags_reserved & ND_NA_FLAG_SOLICITED) == 0 &&
           opt[0] == ND_OPT_TARGET_LINKADDR && opt[1] == 1 &&
           std::memcmp(opt + 2, net1_.hwaddr.bytes().data(), 6) == 0;
  });
  EXPECT_TRUE(seen) << "no unsolicited NA for fd00:7::5 arrived on wire0";

  auto not_ours = in_netns(
      pod_->ns(), [&] { return send_unsolicited_na(net1_, must(IpAddress::parse("fd00:7::99"))); });
  ASSERT_FALSE(not_ours.ok());
  EXPECT_NE(not_ours.error().msg().find("bind to fd00:7::99"), std::string::npos);
}

}  // namespace
}  // namespace rdmanet::netns
