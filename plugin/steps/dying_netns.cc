#include "plugin/steps/dying_netns.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "netns/link.h"
#include "plugin/attachment.h"

namespace rdmanet::plugin {

Expected<bool> wait_while_dying(const std::function<Expected<bool>()>& settled) {
  for (int look = 1;; ++look) {
    TRY_ASSIGN(bool done, settled());
    if (done || look == kDyingNetnsLooks) {
      return done;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

Expected<bool> still_in_unpinned_netns(netns::Rtnl& host_rtnl, int netns_id, int index,
                                       const std::string& kind, int parent_index) {
  if (netns_id < 0) {
    return false;
  }
  TRY_ASSIGN(auto links, netns::list_links_in(host_rtnl, netns_id));
  if (!links) {
    return false;
  }
  return std::any_of(links->begin(), links->end(), [&](const netns::LinkInfo& link) {
    return link.index == index && link.kind == kind &&
           (parent_index == 0 || link.parent_index == parent_index);
  });
}

Status wait_until_released(const Attachment& a, netns::Rtnl& host_rtnl, int index,
                           const std::string& kind, const std::function<std::string()>& what,
                           int parent_index) {
  TRY_ASSIGN(bool released, wait_while_dying([&]() -> Expected<bool> {
               TRY_ASSIGN(bool alive, still_in_unpinned_netns(host_rtnl, a.rec().netns_id, index,
                                                              kind, parent_index));
               return !alive;
             }));
  return released ? ok_status() : Status(alive_without_pin(a, what()));
}

Error alive_without_pin(const Attachment& a, const std::string& what) {
  return Error(ErrorKind::kTryAgainLater,
               what + " is still in a netns nobody can open: the pod netns " + a.rec().netns +
                   " outlived its pin (a process holds it) or the pin now holds another netns. "
                   "The record (and the address) stays until the device is home or gone");
}

}  // namespace rdmanet::plugin
