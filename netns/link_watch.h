// Waiting for a link's state by the kernel's notifications: an rtnetlink socket in the link's
// netns that has joined the link group (RTNLGRP_LINK) wakes the waiter when the link changes
// (carrier, flags, netns), so nothing sleeps a guessed time and nothing re-reads on a timer.
//
// A socket of its own rather than libnl's (netns/rtnl.h): it must check who sent each
// message. In a pod's netns the pod may hold CAP_NET_ADMIN, which lets it send to this
// socket and to the link group: only the kernel's messages count (sender port 0), and only
// the kernel's answer to our own request is taken as the answer.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

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
  // no link has that index there; kTryAgainLater when the answer did not come by `deadline`.
  static Expected<LinkWatch> open(const Netns& ns, int ifindex, Deadline deadline);

  // The link as last seen.
  const LinkInfo& link() const { return link_; }

  // Waits for the next notification about the link and updates link(); false when the
  // deadline passed first (also while notifications about other links kept coming).
  // kDeviceNotFound when the link was deleted or left the netns. When the kernel dropped
  // notifications (the socket's buffer overran), the link is read again instead.
  Expected<bool> next(Deadline deadline);

 private:
  LinkWatch(Fd sock, uint32_t port_id, int ifindex)
      : sock_(std::move(sock)), port_id_(port_id), ifindex_(ifindex), buf_(kBufferSize) {}
  Status ask();  // RTM_GETLINK for ifindex_
  // Reads what is queued (a bounded number of datagrams) and applies what the kernel says
  // about the link; true when something did.
  Expected<bool> take_messages();

  // Link messages without VF lists (neither a get without RTEXT_FILTER_VF nor a notification
  // carries them) fit many times over.
  static constexpr size_t kBufferSize = 65536;

  Fd sock_;
  uint32_t port_id_;  // the socket's netlink port: the kernel's answers are addressed to it
  int ifindex_;
  uint32_t seq_ = 0;  // of the last get; its answer is awaited while ask_pending_
  bool ask_pending_ = false;
  LinkInfo link_;
  std::vector<char> buf_;
};

// Whether the link is up and has carrier (IFF_LOWER_UP: running and carrier on).
bool has_carrier(const LinkInfo& link);

}  // namespace rdmanet::netns
