// IP addresses on links over rtnetlink, in the namespace of the given Rtnl socket.
#pragma once

#include <sys/socket.h>

#include <vector>

#include "base/error.h"
#include "netns/ip_address.h"
#include "netns/link.h"
#include "netns/rtnl.h"

namespace rdmanet::netns {

struct AddressOptions {
  // IPv6: usable at once instead of tentative for the duration of duplicate address
  // detection (IFA_F_NODAD).
  bool no_dad = false;
};

Status add_address(Rtnl& rtnl, const LinkInfo& link, const IpPrefix& prefix,
                   const AddressOptions& options = {});
Status delete_address(Rtnl& rtnl, const LinkInfo& link, const IpPrefix& prefix);
// The link's addresses of family (AF_INET, AF_INET6 or AF_UNSPEC for both), including the
// kernel's own IPv6 link-local ones.
Expected<std::vector<IpPrefix>> list_addresses(Rtnl& rtnl, const LinkInfo& link,
                                               int family = AF_UNSPEC);

}  // namespace rdmanet::netns
