// Waiting for a link's state by the kernel's notifications: an rtnetlink socket in the link's
// netns that has joined the link group (RTNLGRP_LINK) wakes the waiter when the link changes
// (carrier, flags, netns), so nothing sleeps a guessed time and nothing polls.
#pragma once

#include <chrono>

#include "base/error.h"
#include "base/fd.h"
#include "netns/link.h"
#include "netns/netns.h"

namespace rdmanet::netns {

class LinkWatch {
 public:
  using Deadline = std::chrono::steady_clock::time_point;

  // Joins the link group in ns, then reads the link once (a get of one link, not a dump):
  // joined before the read, so no change after the read goes unseen. kDeviceNotFound when
  // no link has that index there.
  static Expected<LinkWatch> open(const Netns& ns, int ifindex);

  // The link as last seen.
  const LinkInfo& link() const { return link_; }

  // Waits for the next notification about the link and updates link(); false when the
  // deadline passed first. kDeviceNotFound when the link was deleted or left the netns.
  // When the kernel dropped notifications (the socket's buffer overran), the link is read
  // again instead.
  Expected<bool> next(Deadline deadline);

 private:
  LinkWatch(Fd sock, int ifindex) : sock_(std::move(sock)), ifindex_(ifindex) {}
  Status ask();  // RTM_GETLINK for ifindex_
  // Reads what is queued and applies what concerns the link; true when something did.
  Expected<bool> take_messages();

  Fd sock_;
  int ifindex_;
  uint32_t seq_ = 0;  // of the last get; its answer is awaited while ask_pending_
  bool ask_pending_ = false;
  LinkInfo link_;
};

// Whether the link is up and has carrier (IFF_LOWER_UP: running and carrier on).
bool has_carrier(const LinkInfo& link);

}  // namespace rdmanet::netns
