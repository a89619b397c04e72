#include "netns/rule.h"

#include <linux/fib_rules.h>
#include <linux/rtnetlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>
#include <sys/socket.h>

namespace rdmanet::netns {
namespace {

NlRequest rule_request(int type, int flags, const Rule& rule) {
  fib_rule_hdr hdr{};
  hdr.family = static_cast<uint8_t>(rule.from.addr.family());
  hdr.src_len = static_cast<uint8_t>(rule.from.len);
  // The 8-bit field cannot hold tables above 255; FRA_TABLE carries the real one.
  hdr.table = static_cast<uint8_t>(rule.table < 256 ? rule.table : RT_TABLE_UNSPEC);
  hdr.action = FR_ACT_TO_TBL;
  NlRequest req(type, flags, &hdr, sizeof hdr);
  IpAddress from = rule.from.network().addr;
  req.put(FRA_SRC, from.data(), from.size());
  req.put_u32(FRA_TABLE, rule.table);
  req.put_u32(FRA_PRIORITY, rule.priority);
  return req;
}

}  // namespace

std::string Rule::str() const {
  return "from " + from.network().str() + " lookup " + std::to_string(table) + " priority " +
         std::to_string(priority);
}

Status add_rule(Rtnl& rtnl, const Rule& rule) {
  auto req = rule_request(RTM_NEWRULE, NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL, rule);
  return rtnl.request(req, "add rule " + rule.str());
}

Status delete_rule(Rtnl& rtnl, const Rule& rule) {
  auto req = rule_request(RTM_DELRULE, NLM_F_REQUEST, rule);
  return rtnl.request(req, "delete rule " + rule.str());
}

Expected<std::vector<Rule>> list_rules(Rtnl& rtnl, int family) {
  fib_rule_hdr hdr{};
  hdr.family = static_cast<uint8_t>(family);
  NlRequest req(RTM_GETRULE, NLM_F_REQUEST | NLM_F_DUMP, &hdr, sizeof hdr);
  std::vector<Rule> out;
  TRY(rtnl.query(req, "list rules", [&](const nlmsghdr* h) {
    if (h->nlmsg_type != RTM_NEWRULE || h->nlmsg_len < NLMSG_LENGTH(sizeof(fib_rule_hdr))) {
      return;
    }
    const auto* msg = static_cast<const fib_rule_hdr*>(nlmsg_data(h));
    if (msg->family != family || msg->action != FR_ACT_TO_TBL) {
      return;
    }
    nlattr* tb[FRA_MAX + 1] = {};
    nlmsg_parse(const_cast<nlmsghdr*>(h), sizeof(fib_rule_hdr), tb, FRA_MAX, nullptr);
    const size_t len = family == AF_INET ? 4 : 16;
    if (tb[FRA_SRC] == nullptr || nla_len(tb[FRA_SRC]) != static_cast<int>(len)) {
      return;
    }
    Rule rule;
    rule.from.addr = IpAddress::from_bytes(nla_data(tb[FRA_SRC]), len);
    rule.from.len = msg->src_len;
    rule.table = tb[FRA_TABLE] != nullptr ? attr_u32(tb[FRA_TABLE]) : msg->table;
    rule.priority = tb[FRA_PRIORITY] != nullptr ? attr_u32(tb[FRA_PRIORITY]) : 0;
    out.push_back(rule);
  }));
  return out;
}

}  // namespace rdmanet::netns
