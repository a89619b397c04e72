#include "netns/rtnl.h"

#include <linux/netlink.h>
#include <netlink/attr.h>
#include <netlink/handlers.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace rdmanet::netns {

uint32_t attr_u32(const nlattr* attr) {
  uint32_t value = 0;
  if (nla_len(attr) >= static_cast<int>(sizeof value)) {
    std::memcpy(&value, nla_data(attr), sizeof value);
  }
  return value;
}

void NlSockFree::operator()(nl_sock* sock) const { nl_socket_free(sock); }
void NlMsgFree::operator()(nl_msg* msg) const { nlmsg_free(msg); }

NlRequest::NlRequest(int type, int flags, const void* header, size_t header_len)
    : msg_(nlmsg_alloc_simple(type, flags)) {
  ok_ = msg_ != nullptr &&
        nlmsg_append(msg_.get(), const_cast<void*>(header), header_len, NLMSG_ALIGNTO) == 0;
}

NlRequest& NlRequest::put(int attr, const void* data, size_t len) {
  ok_ = ok_ && nla_put(msg_.get(), attr, static_cast<int>(len), data) == 0;
  return *this;
}

NlRequest& NlRequest::put_u32(int attr, uint32_t value) { return put(attr, &value, sizeof value); }

NlRequest& NlRequest::put_string(int attr, const std::string& value) {
  return put(attr, value.c_str(), value.size() + 1);
}

void* NlRequest::begin_nest(int attr) {
  nlattr* nest = ok_ ? nla_nest_start(msg_.get(), attr) : nullptr;
  ok_ = nest != nullptr;
  return nest;
}

void* NlRequest::begin_plain_nest(int attr) {
  auto* nest = static_cast<nlattr*>(begin_nest(attr));
  if (nest != nullptr) {
    nest->nla_type &= ~NLA_F_NESTED;
  }
  return nest;
}

void NlRequest::end_nest(void* nest) {
  ok_ = ok_ && nla_nest_end(msg_.get(), static_cast<nlattr*>(nest)) == 0;
}

namespace {

struct CbFree {
  void operator()(nl_cb* cb) const { nl_cb_put(cb); }
};

// What the receive loop learned; filled by the libnl callbacks below.
struct Exchange {
  const std::function<void(const nlmsghdr*)>* on_reply = nullptr;
  uint32_t seq = 0;  // the request's sequence number
  bool done = false;
  int error = 0;        // positive errno from the kernel's NLMSG_ERROR
  std::string ext_ack;  // the kernel's explanation, when it sends one
};

int on_valid(nl_msg* msg, void* arg) {
  auto* ex = static_cast<Exchange*>(arg);
  if (ex->on_reply != nullptr && *ex->on_reply) {
    (*ex->on_reply)(nlmsg_hdr(msg));
  }
  return NL_OK;
}

// Only the answers to this request count. A message of an earlier exchange still queued
// (seen under heavy link churn on the host: a late ACK after a dump's NLMSG_DONE) is
// dropped; libnl's own check would fail the request with "sequence number mismatch"
// after the kernel had carried it out.
int on_seq_check(nl_msg* msg, void* arg) {
  const auto* ex = static_cast<Exchange*>(arg);
  return nlmsg_hdr(msg)->nlmsg_seq == ex->seq ? NL_OK : NL_SKIP;
}

// The kernel's explanation among the attributes that follow an error or a dump's end.
std::string ext_ack_of(void* attrs, int len) {
  nlattr* pos = nullptr;
  int rem = 0;
  nla_for_each_attr(pos, static_cast<nlattr*>(attrs), len, rem) {
    if (nla_type(pos) == NLMSGERR_ATTR_MSG && nla_len(pos) > 0) {
      const char* text = static_cast<const char*>(nla_data(pos));
      return {text, strnlen(text, nla_len(pos))};
    }
  }
  return {};
}

// A dump that fails part way (an IFLA_TARGET_NETNSID no netns has, a table gone) ends with
// NLMSG_DONE carrying the negative errno, not with NLMSG_ERROR: taking it as the end of a
// short list would report an error as "nothing there".
int on_done(nl_msg* msg, void* arg) {
  auto* ex = static_cast<Exchange*>(arg);
  ex->done = true;
  const nlmsghdr* hdr = nlmsg_hdr(msg);
  int payload = static_cast<int>(hdr->nlmsg_len) - NLMSG_HDRLEN;
  if (payload >= static_cast<int>(sizeof(int))) {
    int status = 0;
    std::memcpy(&status, nlmsg_data(hdr), sizeof status);
    if (status < 0) {
      ex->error = -status;
      if ((hdr->nlmsg_flags & NLM_F_ACK_TLVS) != 0) {
        ex->ext_ack = ext_ack_of(static_cast<char*>(nlmsg_data(hdr)) + sizeof status,
                                 payload - static_cast<int>(sizeof status));
      }
    }
  }
  return NL_STOP;
}

// libnl would translate the errno into its own codes and lose strerror(); keep the original.
int on_error(sockaddr_nl* /*nla*/, nlmsgerr* err, void* arg) {
  auto* ex = static_cast<Exchange*>(arg);
  ex->done = true;
  ex->error = -err->error;
  auto* hdr = reinterpret_cast<nlmsghdr*>(reinterpret_cast<char*>(err) - NLMSG_HDRLEN);
  if ((hdr->nlmsg_flags & NLM_F_ACK_TLVS) != 0) {
    // With NETLINK_CAP_ACK the echoed request is only its header.
    size_t offset = sizeof(nlmsgerr);
    if ((hdr->nlmsg_flags & NLM_F_CAPPED) == 0) {
      offset += err->msg.nlmsg_len - sizeof(nlmsghdr);
    }
    int remaining = static_cast<int>(hdr->nlmsg_len) - NLMSG_HDRLEN - static_cast<int>(offset);
    ex->ext_ack = ext_ack_of(reinterpret_cast<char*>(err) + offset, remaining);
  }
  return NL_STOP;
}

}  // namespace

Expected<Rtnl> Rtnl::open() { return open_protocol(NETLINK_ROUTE, "rtnetlink"); }

Expected<std::unique_ptr<nl_sock, NlSockFree>> Rtnl::connect(int protocol,
                                                             const std::string& name) {
  std::unique_ptr<nl_sock, NlSockFree> sock(nl_socket_alloc());
  if (!sock) {
    return Error(ErrorKind::kInternal, "allocate netlink socket: out of memory");
  }
  errno = 0;
  int err = nl_connect(sock.get(), protocol);
  if (err < 0) {
    // libnl folds the errno into its own codes; callers need the errno to tell "this
    // kernel has no such protocol" (EPROTONOSUPPORT) apart, so keep it.
    if (errno != 0) {
      return sys_error("connect " + name, errno);
    }
    return Error(ErrorKind::kKernel, "connect " + name + ": " + nl_geterror(err));
  }
  int fd = nl_socket_get_fd(sock.get());
  int one = 1;
  // Best effort: kernels without extended acks still report the errno.
  setsockopt(fd, SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof one);
  setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof one);
  nl_socket_enable_msg_peek(sock.get());
  return sock;
}

Expected<Rtnl> Rtnl::open_protocol(int protocol, const std::string& name) {
  TRY_ASSIGN(auto sock, connect(protocol, name));
  TRY_ASSIGN(auto origin, Netns::current());
  return Rtnl(std::move(sock), protocol, name, std::move(origin));
}

Status Rtnl::reopen() {
  TRY_ASSIGN(sock_, in_netns(origin_, [&] {
                      return connect(protocol_, name_);
                    }).with_context("fresh " + name_ + " socket after a failed request"));
  broken_ = false;
  return ok_status();
}

Status Rtnl::request(const NlRequest& req, const std::string& what) { return query(req, what, {}); }

Status Rtnl::query(const NlRequest& req, const std::string& what,
                   const std::function<void(const nlmsghdr*)>& on_reply) {
  if (!req.ok()) {
    return Error(ErrorKind::kInternal, what + ": netlink message too large");
  }
  if (broken_) {
    TRY(reopen());
  }
  std::unique_ptr<nl_cb, CbFree> cb(nl_cb_alloc(NL_CB_DEFAULT));
  if (!cb) {
    return Error(ErrorKind::kInternal, what + ": out of memory");
  }
  Exchange ex;
  ex.on_reply = &on_reply;
  nl_cb_set(cb.get(), NL_CB_VALID, NL_CB_CUSTOM, on_valid, &ex);
  nl_cb_set(cb.get(), NL_CB_ACK, NL_CB_CUSTOM, on_done, &ex);
  nl_cb_set(cb.get(), NL_CB_FINISH, NL_CB_CUSTOM, on_done, &ex);
  nl_cb_err(cb.get(), NL_CB_CUSTOM, on_error, &ex);
  nl_cb_set(cb.get(), NL_CB_SEQ_CHECK, NL_CB_CUSTOM, on_seq_check, &ex);

  // nl_send_auto adds NLM_F_ACK, so a get or a change always ends with an ack and a dump
  // with NLMSG_DONE.
  int err = nl_send_auto(sock_.get(), req.msg());
  if (err < 0) {
    broken_ = true;
    return Error(ErrorKind::kKernel, what + ": send: " + nl_geterror(err));
  }
  ex.seq = nlmsg_hdr(req.msg())->nlmsg_seq;  // set by nl_send_auto
  while (!ex.done) {
    err = nl_recvmsgs(sock_.get(), cb.get());
    if (ex.error != 0) {
      Error e = sys_error(what, ex.error);
      if (!ex.ext_ack.empty()) {
        return e.append(" (" + ex.ext_ack + ")");
      }
      return e;
    }
    if (err == -NLE_DUMP_INTR) {
      broken_ = true;  // the rest of the dump may still be queued
      return Error(ErrorKind::kTryAgainLater, what + ": dump interrupted by a concurrent change");
    }
    if (err < 0) {
      broken_ = true;
      return Error(ErrorKind::kKernel, what + ": receive: " + nl_geterror(err));
    }
  }
  return ok_status();
}

Status Rtnl::dump(const NlRequest& req, const std::string& what,
                  const std::function<void(const nlmsghdr*)>& on_reply,
                  const std::function<void()>& restart) {
  constexpr int kAttempts = 8;
  for (int attempt = 1;; ++attempt) {
    auto s = query(req, what, on_reply);
    if (s || s.error().kind() != ErrorKind::kTryAgainLater || attempt == kAttempts) {
      return s;
    }
    restart();
  }
}

}  // namespace rdmanet::netns
