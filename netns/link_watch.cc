#include "netns/link_watch.h"

#include <linux/if.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <climits>

namespace rdmanet::netns {

namespace {

using std::chrono::steady_clock;

std::string link_name(int ifindex) { return "link " + std::to_string(ifindex); }

// Datagrams read per take_messages(): the pod can change its own links as fast as it likes,
// and the caller's deadline is checked between calls.
constexpr int kReadsPerCall = 64;

// The largest errno an NLMSG_ERROR can carry; anything else is not the kernel's.
constexpr int kMaxErrno = 4095;

}  // namespace

bool has_carrier(const LinkInfo& link) { return (link.flags & IFF_LOWER_UP) != 0; }

Expected<LinkWatch> LinkWatch::open(const Netns& ns, int ifindex, Deadline deadline) {
  uint32_t port_id = 0;
  TRY_ASSIGN(
      Fd sock, in_netns(ns, [&]() -> Expected<Fd> {
        Fd fd(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_ROUTE));
        if (!fd.valid()) {
          return sys_error("rtnetlink socket", errno);
        }
        sockaddr_nl local{};
        local.nl_family = AF_NETLINK;
        local.nl_groups = RTMGRP_LINK;
        if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&local), sizeof(local)) != 0) {
          return sys_error("joining the rtnetlink link group", errno);
        }
        socklen_t len = sizeof(local);
        if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local), &len) != 0) {
          return sys_error("rtnetlink socket's port", errno);
        }
        port_id = local.nl_pid;
        return fd;
      }));
  LinkWatch watch(std::move(sock), port_id, ifindex);
  TRY(watch.ask());
  // rtnetlink answers a get before the send returns, so the answer is normally queued
  // already; notifications may be queued before it.
  while (watch.ask_pending_) {
    TRY(watch.next(deadline));
    if (watch.ask_pending_ && steady_clock::now() >= deadline) {
      return Error(ErrorKind::kTryAgainLater,
                   link_name(ifindex) + ": no answer to RTM_GETLINK by the deadline");
    }
  }
  return watch;
}

Status LinkWatch::ask() {
  struct {
    nlmsghdr hdr;
    ifinfomsg ifi;
  } req{};
  req.hdr.nlmsg_len = sizeof(req);
  req.hdr.nlmsg_type = RTM_GETLINK;
  req.hdr.nlmsg_flags = NLM_F_REQUEST;
  req.hdr.nlmsg_seq = ++seq_;
  req.ifi.ifi_family = AF_UNSPEC;
  req.ifi.ifi_index = ifindex_;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (::sendto(sock_.get(), &req, sizeof(req), 0, reinterpret_cast<const sockaddr*>(&kernel),
               sizeof(kernel)) < 0) {
    return sys_error(link_name(ifindex_) + ": RTM_GETLINK", errno);
  }
  ask_pending_ = true;
  return ok_status();
}

Expected<bool> LinkWatch::take_messages() {
  bool changed = false;
  for (int reads = 0; reads < kReadsPerCall; ++reads) {
    sockaddr_nl from{};
    iovec iov{buf_.data(), buf_.size()};
    msghdr msg{};
    msg.msg_name = &from;
    msg.msg_namelen = sizeof(from);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    ssize_t n = ::recvmsg(sock_.get(), &msg, MSG_TRUNC);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        return changed;
      }
      if (errno == ENOBUFS) {  // notifications were dropped: read the link itself again
        TRY(ask());
        continue;
      }
      return sys_error(link_name(ifindex_) + ": reading link notifications", errno);
    }
    if (from.nl_pid != 0) {
      continue;  // not the kernel's: a process in the netns sent it
    }
    if (static_cast<size_t>(n) > buf_.size()) {
      return Error(ErrorKind::kKernel, link_name(ifindex_) + ": a link message of " +
                                           std::to_string(n) + " bytes was cut short");
    }
    auto len = static_cast<int>(n);
    for (const auto* hdr = reinterpret_cast<const nlmsghdr*>(buf_.data()); NLMSG_OK(hdr, len);
         hdr = NLMSG_NEXT(hdr, len)) {
      // The answer to our get is addressed to our port with our sequence number; a
      // notification another process's request caused carries that process's port.
      const bool answer = ask_pending_ && hdr->nlmsg_seq == seq_ && hdr->nlmsg_pid == port_id_;
      if (hdr->nlmsg_type == NLMSG_ERROR && answer) {
        if (hdr->nlmsg_len < NLMSG_LENGTH(sizeof(nlmsgerr))) {
          continue;
        }
        const auto* err = static_cast<const nlmsgerr*>(NLMSG_DATA(hdr));
        ask_pending_ = false;
        if (err->error < 0 && err->error >= -kMaxErrno) {
          return sys_error(link_name(ifindex_), -err->error);
        }
        continue;
      }
      if ((hdr->nlmsg_type != RTM_NEWLINK && hdr->nlmsg_type != RTM_DELLINK) ||
          hdr->nlmsg_len < NLMSG_LENGTH(sizeof(ifinfomsg)) ||
          static_cast<const ifinfomsg*>(NLMSG_DATA(hdr))->ifi_family != AF_UNSPEC) {
        continue;  // not about a link as a whole (a bridge port's messages say AF_BRIDGE)
      }
      auto link = decode_link(hdr);
      if (!link || link->index != ifindex_) {
        continue;  // another link of the netns
      }
      if (hdr->nlmsg_type == RTM_DELLINK) {
        return Error(ErrorKind::kDeviceNotFound,
                     link_name(ifindex_) + " (" + link->name + ") was deleted or left the netns");
      }
      link_ = std::move(*link);
      changed = true;
      if (answer) {
        ask_pending_ = false;
      }
    }
  }
  return changed;
}

Expected<bool> LinkWatch::next(Deadline deadline) {
  for (;;) {
    TRY_ASSIGN(bool changed, take_messages());
    if (changed) {
      return true;
    }
    const auto now = steady_clock::now();
    if (now >= deadline) {
      return false;
    }
    // Rounded up, so the wait never ends before the deadline.
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
    pollfd pfd{sock_.get(), POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left, INT_MAX))) < 0 && errno != EINTR) {
      return sys_error(link_name(ifindex_) + ": waiting for link notifications", errno);
    }
  }
}

}  // namespace rdmanet::netns
