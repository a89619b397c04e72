// An rtnetlink socket and the request/dump plumbing the link, address and route calls share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/error.h"
#include "netns/netns.h"

struct nl_sock;
struct nl_msg;
struct nlmsghdr;
struct nlattr;

namespace rdmanet::netns {

// A u32 attribute's value, 0 when the attribute is shorter than that (a reply cut short).
uint32_t attr_u32(const nlattr* attr);

struct NlSockFree {
  void operator()(nl_sock* sock) const;
};
struct NlMsgFree {
  void operator()(nl_msg* msg) const;
};

// A netlink request under construction. A failed put (message too big) is remembered and
// reported when the message is sent, so building code stays a flat list of puts.
class NlRequest {
 public:
  NlRequest(int type, int flags, const void* header, size_t header_len);

  NlRequest& put(int attr, const void* data, size_t len);
  NlRequest& put_u32(int attr, uint32_t value);
  NlRequest& put_string(int attr, const std::string& value);
  // Opens a nested attribute; close it with end_nest(). Returns an opaque handle.
  void* begin_nest(int attr);
  // A nest without NLA_F_NESTED, as iproute2 sends the older nested
  // attributes (IFLA_VFINFO_LIST and its children).
  void* begin_plain_nest(int attr);
  void end_nest(void* nest);

  nl_msg* msg() const { return msg_.get(); }
  bool ok() const { return ok_; }

 private:
  std::unique_ptr<nl_msg, NlMsgFree> msg_;
  bool ok_ = true;
};

// A netlink socket: rtnetlink unless another protocol is asked for (rdma/ uses it for
// NETLINK_RDMA). It talks to the network namespace that was current when it was opened,
// for its whole life: open it inside a namespace (in_netns) to manage that one.
class Rtnl {
 public:
  static Expected<Rtnl> open();
  // A socket of another netlink protocol; `name` is what connection errors call it.
  static Expected<Rtnl> open_protocol(int protocol, const std::string& name);
  // After a send or receive that failed in the middle (not an error answer from the kernel)
  // libnl's sequence numbers no longer match the kernel's, and every later request on the
  // socket would fail: the next request gets a fresh socket in the same netns.

  // Sends req and waits for the kernel's answer. Failures read "<what>: <strerror>", plus
  // the kernel's extended ack message when it gave one.
  Status request(const NlRequest& req, const std::string& what);
  // Sends req (a dump or a get) and calls on_reply for each reply message.
  Status query(const NlRequest& req, const std::string& what,
               const std::function<void(const nlmsghdr*)>& on_reply);
  // A dump (NLM_F_DUMP) that a concurrent change interrupted is done again from the start,
  // after `restart` (which drops what the interrupted one delivered), a few times before
  // it fails with kTryAgainLater: on a busy node other pods' links come and go all the time.
  Status dump(const NlRequest& req, const std::string& what,
              const std::function<void(const nlmsghdr*)>& on_reply,
              const std::function<void()>& restart);

 private:
  Rtnl(std::unique_ptr<nl_sock, NlSockFree> sock, int protocol, std::string name, Netns origin)
      : sock_(std::move(sock)),
        protocol_(protocol),
        name_(std::move(name)),
        origin_(std::move(origin)) {}
  static Expected<std::unique_ptr<nl_sock, NlSockFree>> connect(int protocol,
                                                                const std::string& name);
  Status reopen();
  friend struct RtnlTestPeer;  // netns/link_test.cc: leaves an answer unread

  std::unique_ptr<nl_sock, NlSockFree> sock_;
  int protocol_;
  std::string name_;
  Netns origin_;  // the netns the socket talks to
  bool broken_ = false;
};

}  // namespace rdmanet::netns
