// A pod netns nobody can open any more (its pin is gone) may still be dying: the kernel
// deletes its virtual links, and hands its physical devices back to the host, in a work item
// after the last reference went, tens to hundreds of milliseconds later. What DEL sees of such
// a netns is final only after it has looked again for a while; this is that wait, for every
// step that looks.
#pragma once

#include <functional>
#include <string>

#include "base/error.h"
#include "netns/rtnl.h"

namespace rdmanet::plugin {

class Attachment;

// Asks `settled` until it says true: at most kDyingNetnsLooks times, 100 ms apart (about two
// seconds). False when it never did; an error it returns ends the wait.
inline constexpr int kDyingNetnsLooks = 21;
Expected<bool> wait_while_dying(const std::function<Expected<bool>()>& settled);

// Whether the netns the host knows as `netns_id` still has a link at `index` of `kind` (and,
// when given, with the parent `parent_index`): all DEL can ask about a netns it cannot open
// but that the host gave an id at ADD. No id (a record made without one), or an id that
// names no netns: no.
Expected<bool> still_in_unpinned_netns(netns::Rtnl& host_rtnl, int netns_id, int index,
                                       const std::string& kind, int parent_index = 0);

// Waits while the pod's unpinned netns still has that link (still_in_unpinned_netns); once
// it is gone, ok. Still there after the wait: kTryAgainLater (alive_without_pin).
// `what` names the link for that error (asked only then).
Status wait_until_released(const Attachment& a, netns::Rtnl& host_rtnl, int index,
                           const std::string& kind, const std::function<std::string()>& what,
                           int parent_index = 0);

// kTryAgainLater: `what` is in a netns nobody can open, so the record (and the address) stays
// until the device is home or gone.
Error alive_without_pin(const Attachment& a, const std::string& what);

}  // namespace rdmanet::plugin
