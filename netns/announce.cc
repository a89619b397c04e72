#include "netns/announce.h"

#include <arpa/inet.h>
#include <linux/if_arp.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <netinet/icmp6.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "base/fd.h"

namespace rdmanet::netns {
namespace {

std::string announce_what(const char* kind, const LinkInfo& link, const IpAddress& addr) {
  return std::string("send ") + kind + " for " + addr.str() + " on link \"" + link.name + "\"";
}

void append(std::vector<uint8_t>& out, const void* data, size_t len) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  out.insert(out.end(), bytes, bytes + len);
}

void append_u16(std::vector<uint8_t>& out, uint16_t host_value) {
  uint16_t net = htons(host_value);
  append(out, &net, sizeof net);
}

}  // namespace

Status send_gratuitous_arp(const LinkInfo& link, const IpAddress& addr) {
  std::string what = announce_what("gratuitous ARP", link, addr);
  if (!addr.is_v4()) {
    return Error(ErrorKind::kInternal, what + ": not an IPv4 address");
  }
  // ARP's hardware type numbers are the ARPHRD_ ones for Ethernet (1) and InfiniBand (32).
  if (link.type != ARPHRD_ETHER && link.type != ARPHRD_INFINIBAND) {
    return Error(ErrorKind::kNotAvailable,
                 what + ": link type " + std::to_string(link.type) + " has no ARP");
  }
  const auto& hw = link.hwaddr.bytes();
  const auto& bcast = link.broadcast.bytes();
  if (hw.empty() || bcast.size() != hw.size()) {
    return Error(ErrorKind::kNotAvailable, what + ": link has no hardware or broadcast address");
  }

  std::vector<uint8_t> arp;
  append_u16(arp, link.type);
  append_u16(arp, ETH_P_IP);
  arp.push_back(static_cast<uint8_t>(hw.size()));
  arp.push_back(4);
  append_u16(arp, ARPOP_REQUEST);
  append(arp, hw.data(), hw.size());
  append(arp, addr.data(), 4);
  arp.insert(arp.end(), hw.size(), 0);  // target hardware address: unknown
  append(arp, addr.data(), 4);

  Fd sock(socket(AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC, htons(ETH_P_ARP)));
  if (!sock.valid()) {
    return sys_error(what + ": AF_PACKET socket", errno);
  }
  // sll_addr holds 8 bytes; the kernel reads a longer (IPoIB) address past its end as long
  // as the sockaddr length covers it.
  struct {
    sockaddr_ll ll;
    uint8_t tail[32];
  } to{};
  to.ll.sll_family = AF_PACKET;
  to.ll.sll_protocol = htons(ETH_P_ARP);
  to.ll.sll_ifindex = link.index;
  to.ll.sll_halen = static_cast<uint8_t>(bcast.size());
  std::memcpy(to.ll.sll_addr, bcast.data(), bcast.size());
  socklen_t to_len = static_cast<socklen_t>(offsetof(sockaddr_ll, sll_addr) + bcast.size());
  to_len = std::max<socklen_t>(to_len, sizeof(sockaddr_ll));
  if (sendto(sock.get(), arp.data(), arp.size(), 0, reinterpret_cast<sockaddr*>(&to), to_len) < 0) {
    return sys_error(what, errno);
  }
  return ok_status();
}

Status send_unsolicited_na(const LinkInfo& link, const IpAddress& addr) {
  std::string what = announce_what("unsolicited neighbour advertisement", link, addr);
  if (addr.is_v4()) {
    return Error(ErrorKind::kInternal, what + ": not an IPv6 address");
  }
  const auto& hw = link.hwaddr.bytes();
  if (hw.empty()) {
    return Error(ErrorKind::kNotAvailable, what + ": link has no hardware address");
  }

  nd_neighbor_advert na{};
  na.nd_na_type = ND_NEIGHBOR_ADVERT;
  na.nd_na_flags_reserved = ND_NA_FLAG_OVERRIDE;
  std::memcpy(&na.nd_na_target, addr.data(), 16);
  std::vector<uint8_t> packet;
  append(packet, &na, sizeof na);
  // Option length is in units of 8 bytes, padded with zeros.
  size_t option_len = (2 + hw.size() + 7) / 8 * 8;
  packet.push_back(ND_OPT_TARGET_LINKADDR);
  packet.push_back(static_cast<uint8_t>(option_len / 8));
  append(packet, hw.data(), hw.size());
  packet.resize(sizeof na + option_len, 0);

  // The kernel fills in the ICMPv6 checksum on raw ICMPv6 sockets.
  Fd sock(socket(AF_INET6, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMPV6));
  if (!sock.valid()) {
    return sys_error(what + ": ICMPv6 socket", errno);
  }
  // Receivers drop neighbour discovery packets that did not start with hop limit 255.
  int hops = 255;
  int ifindex = link.index;
  if (setsockopt(sock.get(), IPPROTO_IPV6, IPV6_MULTICAST_HOPS, &hops, sizeof hops) != 0 ||
      setsockopt(sock.get(), IPPROTO_IPV6, IPV6_MULTICAST_IF, &ifindex, sizeof ifindex) != 0) {
    return sys_error(what + ": setsockopt", errno);
  }
  sockaddr_in6 from{};
  from.sin6_family = AF_INET6;
  std::memcpy(&from.sin6_addr, addr.data(), 16);
  from.sin6_scope_id = addr.is_link_local() ? static_cast<uint32_t>(link.index) : 0;
  if (bind(sock.get(), reinterpret_cast<sockaddr*>(&from), sizeof from) != 0) {
    return sys_error(what + ": bind to " + addr.str() + " (tentative or not on the link?)", errno);
  }
  sockaddr_in6 to{};
  to.sin6_family = AF_INET6;
  inet_pton(AF_INET6, "ff02::1", &to.sin6_addr);
  to.sin6_scope_id = static_cast<uint32_t>(link.index);
  if (sendto(sock.get(), packet.data(), packet.size(), 0, reinterpret_cast<sockaddr*>(&to),
             sizeof to) < 0) {
    return sys_error(what, errno);
  }
  return ok_status();
}

Status announce_address(const LinkInfo& link, const IpAddress& addr) {
  return addr.is_v4() ? send_gratuitous_arp(link, addr) : send_unsolicited_na(link, addr);
}

}  // namespace rdmanet::netns
