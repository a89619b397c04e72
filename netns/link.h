// Links (netdevs) over rtnetlink: find, read, change, move between namespaces, macvlan.
// Every call acts in the namespace of the Rtnl socket it is given.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/names.h"
#include "netns/hw_address.h"
#include "netns/netns.h"
#include "netns/rtnl.h"

struct nlmsghdr;

namespace rdmanet::netns {

// A snapshot of a link. It goes stale when the link changes or moves; read it again.
struct LinkInfo {
  int index = 0;
  std::string name;
  uint32_t mtu = 0;
  uint32_t flags = 0;                 // IFF_*
  uint16_t type = 0;                  // ARPHRD_* (1 Ethernet, 32 InfiniBand)
  HwAddress hwaddr;                   // current address
  HwAddress broadcast;                // link-layer broadcast (needed for IPoIB ARP)
  HwAddress perm_hwaddr;              // factory address; empty when the driver does not report one
  std::string kind;                   // "veth", "macvlan", ...; empty for hardware netdevs
  std::string alias;                  // IFLA_IFALIAS
  std::vector<std::string> altnames;  // alternative names (udev's enp59s0f0v2 and the like)
  int parent_index = 0;  // IFLA_LINK (macvlan parent, veth peer); may be in another netns
  // IFLA_LINK_NETNSID: the id, in this link's netns, of the netns parent_index is in; none
  // when it is the same netns.
  std::optional<int> link_netnsid;
  std::string parent_bus;  // IFLA_PARENT_DEV_BUS_NAME ("pci", "auxiliary"); empty for virtual
  std::string parent_dev;  // IFLA_PARENT_DEV_NAME ("0000:3b:00.2", "mlx5_core.sf.2")

  bool up() const;  // administratively up (IFF_UP)
};

// Checks what the kernel accepts as an interface name (1..15 bytes, no '/', ':' or
// whitespace, not "." or ".."); kInvalidConfig quoting the name otherwise.
Status check_link_name(const std::string& name);

// Decodes one RTM_NEWLINK message; std::nullopt when it is too short to be one. Exposed
// for the fuzz target (tests/fuzz): replies come from the kernel, but are parsed as input.
std::optional<LinkInfo> decode_link(const nlmsghdr* hdr);

// kDeviceNotFound when absent. Also matches alternative names; the result's name is then
// the primary one.
Expected<LinkInfo> find_link_by_name(Rtnl& rtnl, const std::string& name);
Expected<LinkInfo> find_link_by_index(Rtnl& rtnl, int index);
// The one link whose current address is hwaddr; kDeviceNotFound if none, kInvalidConfig
// if several share it (VLANs, bonds), naming them.
Expected<LinkInfo> find_link_by_hwaddr(Rtnl& rtnl, const HwAddress& hwaddr);
Expected<std::vector<LinkInfo>> list_links(Rtnl& rtnl);

// The same questions about the netns that has the id `netnsid` in the socket's netns
// (IFLA_TARGET_NETNSID): a netns nobody can open any more (its pin is gone, a process keeps
// it alive) can still be asked. An id that names no netns is kDeviceNotFound for the first,
// std::nullopt for the second. Replies speak in the socket's netns: a link's link_netnsid is
// the socket netns's id for its peer's netns; parent_index is an index in that netns.
Expected<LinkInfo> find_link_by_index_in(Rtnl& rtnl, int netnsid, int index);
Expected<std::optional<std::vector<LinkInfo>>> list_links_in(Rtnl& rtnl, int netnsid);

Status set_link_up(Rtnl& rtnl, const LinkInfo& link);
Status set_link_down(Rtnl& rtnl, const LinkInfo& link);
// Older kernels refuse (EBUSY) to rename a link that is up (6.18 allows it): bring it down
// first to be portable.
Status rename_link(Rtnl& rtnl, const LinkInfo& link, const std::string& new_name);
Status set_link_mtu(Rtnl& rtnl, const LinkInfo& link, uint32_t mtu);
Status set_link_hwaddr(Rtnl& rtnl, const LinkInfo& link, const HwAddress& hwaddr);
// An empty alias clears it.
Status set_link_alias(Rtnl& rtnl, const LinkInfo& link, const std::string& alias);
Status delete_link(Rtnl& rtnl, const LinkInfo& link);

// Alternative names travel with a link between namespaces, and an altname that clashes with
// a name in the target fails the move (EEXIST) even when renaming: drop them before the
// move and add them back after the way back.
Status add_link_altname(Rtnl& rtnl, const LinkInfo& link, const std::string& altname);
Status delete_link_altname(Rtnl& rtnl, const LinkInfo& link, const std::string& altname);

// Moves link into target (it arrives down). With new_name, the move and the rename are one
// request, so the link never needs its old name in target: a link there already called
// like it does not matter. The ifindex may change on the way: find the link in target by name.
Status move_link(Rtnl& rtnl, const LinkInfo& link, const Netns& target,
                 const std::optional<std::string>& new_name = std::nullopt);

enum class MacvlanMode { kPrivate, kVepa, kBridge, kPassthru };
inline constexpr Name<MacvlanMode> kMacvlanModeNames[] = {{MacvlanMode::kBridge, "bridge"},
                                                          {MacvlanMode::kPrivate, "private"},
                                                          {MacvlanMode::kVepa, "vepa"},
                                                          {MacvlanMode::kPassthru, "passthru"}};

struct MacvlanSpec {
  std::string name;      // name in the target namespace
  int parent_index = 0;  // parent link in the Rtnl socket's namespace
  MacvlanMode mode = MacvlanMode::kBridge;
  const Netns* target = nullptr;  // created here; nullptr: the socket's namespace
  std::optional<HwAddress> hwaddr;
  std::optional<uint32_t> mtu;
};

// Creates a macvlan child of spec.parent_index directly in spec.target (down).
Status create_macvlan(Rtnl& rtnl, const MacvlanSpec& spec);

}  // namespace rdmanet::netns
