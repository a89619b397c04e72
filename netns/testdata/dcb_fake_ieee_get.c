// Capture aid for dcb_test.cc, not built: what `dcb pfc set` sends, on a machine whose netdevs
// have no DCB support. dcb reads the PFC settings before it writes them and gives up when the
// kernel refuses that read (EOPNOTSUPP). Preloaded into dcb, this answers dcb's
// DCB_CMD_IEEE_GET itself, with the fixed PFC values below, and passes every other message
// (the SET) to the kernel unchanged, where strace records it:
//
//   gcc -shared -fPIC -o fake_get.so dcb_fake_ieee_get.c -ldl
//   ip netns add cap && ip -n cap link add capv0 type veth peer name capv1
//   ip netns exec cap strace -E LD_PRELOAD=$PWD/fake_get.so -e trace=sendto -e write=3
//       dcb pfc set dev capv0 prio-pfc 0:off 3:on 4:on      (one command line)
//   ip netns del cap
#define _GNU_SOURCE
#include <dlfcn.h>
#include <linux/dcbnl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <string.h>
#include <sys/socket.h>

static int pending;
static unsigned int pending_seq;

static void put_attr(char** p, int type, const void* data, int len) {
  struct nlattr* a = (struct nlattr*)*p;
  a->nla_type = type;
  a->nla_len = NLA_HDRLEN + len;
  memcpy(*p + NLA_HDRLEN, data, len);
  *p += NLA_ALIGN(a->nla_len);
}

ssize_t sendto(int fd, const void* buf, size_t len, int flags, const struct sockaddr* to,
               socklen_t tolen) {
  const struct nlmsghdr* h = buf;
  const struct dcbmsg* d = NLMSG_DATA(h);
  if (len >= NLMSG_LENGTH(sizeof *d) && h->nlmsg_type == RTM_GETDCB &&
      d->cmd == DCB_CMD_IEEE_GET) {
    pending = 1;
    pending_seq = h->nlmsg_seq;
    return len;
  }
  ssize_t (*real)(int, const void*, size_t, int, const struct sockaddr*, socklen_t) =
      dlsym(RTLD_NEXT, "sendto");
  return real(fd, buf, len, flags, to, tolen);
}

ssize_t recvmsg(int fd, struct msghdr* msg, int flags) {
  if (!pending) {
    ssize_t (*real)(int, struct msghdr*, int) = dlsym(RTLD_NEXT, "recvmsg");
    return real(fd, msg, flags);
  }
  pending = 0;
  char* start = msg->msg_iov[0].iov_base;
  memset(start, 0, 1024);
  // The answer: DCB_ATTR_IFNAME, DCB_ATTR_IEEE { DCB_ATTR_IEEE_PFC }, as dcbnl_ieee_fill puts it.
  struct nlmsghdr* h = (struct nlmsghdr*)start;
  h->nlmsg_type = RTM_GETDCB;
  h->nlmsg_seq = pending_seq;
  struct dcbmsg* d = NLMSG_DATA(h);
  d->cmd = DCB_CMD_IEEE_GET;
  char* p = start + NLMSG_LENGTH(sizeof *d);
  put_attr(&p, DCB_ATTR_IFNAME, "capv0", 6);
  struct nlattr* ieee = (struct nlattr*)p;
  ieee->nla_type = DCB_ATTR_IEEE;
  p += NLA_HDRLEN;
  struct ieee_pfc pfc;
  memset(&pfc, 0, sizeof pfc);
  pfc.pfc_cap = 8;
  pfc.pfc_en = 0x01;
  pfc.delay = 7;
  for (int i = 0; i < IEEE_8021QAZ_MAX_TCS; i++) {
    pfc.requests[i] = 0x100 + i;
    pfc.indications[i] = 0x200 + i;
  }
  put_attr(&p, DCB_ATTR_IEEE_PFC, &pfc, sizeof pfc);
  ieee->nla_len = p - (char*)ieee;
  h->nlmsg_len = p - start;
  // Then the ack dcb asked for (NLM_F_ACK).
  struct nlmsghdr* ack = (struct nlmsghdr*)p;
  ack->nlmsg_type = NLMSG_ERROR;
  ack->nlmsg_flags = NLM_F_CAPPED;
  ack->nlmsg_seq = pending_seq;
  struct nlmsgerr* e = NLMSG_DATA(ack);
  e->error = 0;
  e->msg = *h;
  ack->nlmsg_len = NLMSG_LENGTH(sizeof *e);
  p += NLMSG_ALIGN(ack->nlmsg_len);
  if (msg->msg_name) {
    struct sockaddr_nl* sa = msg->msg_name;
    memset(sa, 0, sizeof *sa);
    sa->nl_family = AF_NETLINK;
  }
  msg->msg_namelen = sizeof(struct sockaddr_nl);
  msg->msg_flags = 0;
  return p - start;
}
