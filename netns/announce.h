// Announcing an address after it moved to a new link, so neighbours update their caches.
// Sockets are made in the calling thread's namespace: call inside the link's namespace.
#pragma once

#include "base/error.h"
#include "netns/ip_address.h"
#include "netns/link.h"

namespace rdmanet::netns {

// Broadcasts one gratuitous ARP request (sender = target = addr) from an up Ethernet or
// IPoIB link.
Status send_gratuitous_arp(const LinkInfo& link, const IpAddress& addr);
// Sends one unsolicited neighbour advertisement for addr to ff02::1 (override flag, target
// link-layer address option). addr must not be tentative: add it with no_dad or after DAD.
Status send_unsolicited_na(const LinkInfo& link, const IpAddress& addr);
// Either of the above, by the family of addr.
Status announce_address(const LinkInfo& link, const IpAddress& addr);

}  // namespace rdmanet::netns
