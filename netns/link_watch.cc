#include "netns/link_watch.h"

#include <linux/if.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <poll.h>
#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <cstring>

namespace rdmanet::netns {

namespace {

std::string link_name(int ifindex) { return "link " + std::to_string(ifindex); }

}  // namespace

bool has_carrier(const LinkInfo& link) { return (link.flags & IFF_LOWER_UP) != 0; }

Expected<LinkWatch> LinkWatch::open(const Netns& ns, int ifindex) {
  TRY_ASSIGN(
      Fd sock, in_netns(ns, []() -> Expected<Fd> {
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
        return fd;
      }));
  LinkWatch watch(std::move(sock), ifindex);
  TRY(watch.ask());
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (watch.ask_pending_) {
    TRY_ASSIGN(bool seen, watch.next(deadline));
    if (!seen) {
      return Error(ErrorKind::kKernel, link_name(ifindex) + ": no answer to RTM_GETLINK");
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
  // Link messages without VF lists (neither a get without RTEXT_FILTER_VF nor a
  // notification asks for them) fit many times over.
  alignas(nlmsghdr) std::array<char, 65536> buf{};
  bool changed = false;
  for (;;) {
    ssize_t n = ::recv(sock_.get(), buf.data(), buf.size(), MSG_TRUNC);
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
    if (static_cast<size_t>(n) > buf.size()) {
      return Error(ErrorKind::kKernel, link_name(ifindex_) + ": a link message of " +
                                           std::to_string(n) + " bytes was cut short");
    }
    auto len = static_cast<int>(n);
    for (const auto* hdr = reinterpret_cast<const nlmsghdr*>(buf.data()); NLMSG_OK(hdr, len);
         hdr = NLMSG_NEXT(hdr, len)) {
      const bool answer = ask_pending_ && hdr->nlmsg_seq == seq_;
      if (hdr->nlmsg_type == NLMSG_ERROR && answer) {
        const auto* err = static_cast<const nlmsgerr*>(NLMSG_DATA(hdr));
        ask_pending_ = false;
        if (hdr->nlmsg_len >= NLMSG_LENGTH(sizeof(nlmsgerr)) && err->error != 0) {
          return sys_error(link_name(ifindex_), -err->error);
        }
        continue;
      }
      if (hdr->nlmsg_type != RTM_NEWLINK && hdr->nlmsg_type != RTM_DELLINK) {
        continue;
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
}

Expected<bool> LinkWatch::next(Deadline deadline) {
  for (;;) {
    TRY_ASSIGN(bool changed, take_messages());
    if (changed) {
      return true;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return false;
    }
    pollfd pfd{sock_.get(), POLLIN, 0};
    int ready = ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left.count() + 1, INT32_MAX)));
    if (ready < 0 && errno != EINTR) {
      return sys_error(link_name(ifindex_) + ": waiting for link notifications", errno);
    }
  }
}

}  // namespace rdmanet::netns
