// What a link is, as far as whoever owns its netns cannot change it.
//
// A pod with CAP_NET_ADMIN in its own netns can rename links, set their MAC, MTU and alias,
// create new ones (even with a chosen ifindex, which is per netns) and move links into
// namespaces nested in its own. It cannot set a link's parent bus device or permanent
// address, and it cannot give a link of its own a veth peer or macvlan parent in the host
// netns. A LinkIdentity records those, so teardown finds the device ADD moved under any
// name, in the pod or back in the host, and never takes another link for it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "netns/link.h"
#include "netns/netns.h"
#include "netns/rtnl.h"

namespace rdmanet::netns {

struct LinkIdentity {
  int index = 0;           // the ifindex at ADD (kept across moves unless taken)
  std::string kind;        // IFLA_INFO_KIND; empty for hardware netdevs
  std::string parent_bus;  // IFLA_PARENT_DEV_BUS_NAME
  std::string parent_dev;  // IFLA_PARENT_DEV_NAME
  std::string perm_mac;    // IFLA_PERM_ADDRESS, when the driver reports one (it may change
                           // with the device's MAC: only matched without a parent device)
  int host_peer = 0;       // the host-side index of its veth peer or macvlan parent
  // A veth whose peer was in a third netns at ADD (a NIC emulated by a veth whose far end
  // is on a switch netns): the peer's index there and the host's id for that netns. The
  // pod cannot reach that netns, and the peer names the device's netns and index wherever
  // it went (locate_by_far_peer). Unless that netns is another pod's (two ends of one wire
  // given to two pods), which may move the peer away: a peer not found proves nothing
  // alone (plugin/steps/netdev_search.cc veth_unlocated).
  int far_peer = 0;
  int far_netnsid = -1;

  // Whether something in it is out of a pod's reach. A weak identity (none of the above
  // but index and kind: what records of rdmanet 0.1 give) is matched by index, names and
  // MACs as well.
  bool strong() const {
    return !parent_dev.empty() || !perm_mac.empty() || host_peer != 0 || far_peer != 0;
  }
};

// The identity of a link in the host netns that is about to move to another netns. Its
// IFLA_LINK (a veth peer) stays behind in the host.
LinkIdentity identity_of(const LinkInfo& host_link);

// Where a link is being looked at from: the host netns itself, or a netns in which the host
// netns has the id `host_nsid` (NETNSA_NSID_NOT_ASSIGNED, -1, when it has none).
struct Vantage {
  bool in_host = true;
  int host_nsid = -1;
  // Whether the veth peer is still in the host (pointing at the device). A test that moves
  // both ends of one pair into two pods takes the peer away: then any link whose peer is in
  // another netns and has the peer's index is taken for the device. Physical devices have
  // no peer; what identifies them (parent device, permanent address) cannot move.
  bool peer_in_host = true;
};

// Whether `link`, seen from `where`, is the link `id` describes. A weak identity also
// needs the ifindex and one of `names` and `macs` (the names and MACs it can have had).
bool is_same_link(const LinkInfo& link, const LinkIdentity& id, const Vantage& where,
                  const std::vector<std::string>& names = {},
                  const std::vector<std::string>& macs = {});

// The id the socket's netns has for `other` (RTM_GETNSID); -1 when it has none.
Expected<int> netns_id(Rtnl& rtnl, const Netns& other);
// The same, giving `other` an id first when it has none (RTM_NEWNSID). The id lasts as long
// as `other` does: through it the socket's netns can still ask about `other` once nobody
// can open it (list_links_in).
Expected<int> assign_netns_id(Rtnl& rtnl, const Netns& other);

// Where the veth `id` (with a far peer) is, as its peer says, asked from the host.
struct FarPeerView {
  bool paired = false;      // the peer is still there, a veth with a peer in another netns
  int device_index = 0;     // the device's index in its netns
  int device_netnsid = -1;  // the host's id for the device's netns
};
Expected<FarPeerView> locate_by_far_peer(Rtnl& host_rtnl, const LinkIdentity& id);

// Whether the veth peer of `id` is still in the host netns and still its peer (socket in
// the host).
Expected<bool> peer_still_in_host(Rtnl& host_rtnl, const LinkIdentity& id);

// Every link of the socket's netns `here` that is `id` (`host`: the host netns, which may be
// `here`). A failed dump is an error: "could not look" is never "absent".
Expected<std::vector<LinkInfo>> find_links(Rtnl& rtnl, const Netns& here, const Netns& host,
                                           const LinkIdentity& id, bool peer_in_host = true,
                                           const std::vector<std::string>& names = {},
                                           const std::vector<std::string>& macs = {});

}  // namespace rdmanet::netns
