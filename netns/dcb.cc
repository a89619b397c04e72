#include "netns/dcb.h"

#include <linux/dcbnl.h>
#include <linux/rtnetlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "netns/link.h"

namespace rdmanet::netns {
namespace {

// "3", "3 and 4", "0, 3 and 4".
std::string join_and(const std::vector<uint8_t>& values) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) {
      out += i + 1 == values.size() ? " and " : ", ";
    }
    out += std::to_string(values[i]);
  }
  return out;
}

// Every dcbnl request is a dcbmsg naming its netdev in DCB_ATTR_IFNAME. `dcb` asks for an ack
// too (Rtnl always does).
NlRequest dcb_request(int type, uint8_t cmd, const std::string& ifname) {
  dcbmsg msg{};
  msg.dcb_family = AF_UNSPEC;
  msg.cmd = cmd;
  NlRequest req(type, NLM_F_REQUEST | NLM_F_ACK, &msg, sizeof msg);
  req.put_string(DCB_ATTR_IFNAME, ifname);
  return req;
}

NlRequest pfc_set_request(const std::string& ifname, const PfcState& pfc) {
  ieee_pfc raw;
  std::memset(&raw, 0, sizeof raw);  // the padding byte after mbc goes out as 0, as with dcb
  raw.pfc_cap = pfc.cap;
  raw.pfc_en = pfc.enable;
  raw.mbc = pfc.mbc;
  raw.delay = pfc.delay;
  std::copy(pfc.requests.begin(), pfc.requests.end(), raw.requests);
  std::copy(pfc.indications.begin(), pfc.indications.end(), raw.indications);
  NlRequest req = dcb_request(RTM_SETDCB, DCB_CMD_IEEE_SET, ifname);
  void* ieee = req.begin_nest(DCB_ATTR_IEEE);
  req.put(DCB_ATTR_IEEE_PFC, &raw, sizeof raw);
  req.end_nest(ieee);
  return req;
}

// cmd is DCB_CMD_IEEE_SET (add) or DCB_CMD_IEEE_DEL (remove).
NlRequest dscp_request(uint8_t cmd, const std::string& ifname,
                       const std::vector<DscpPrio>& entries) {
  NlRequest req = dcb_request(RTM_SETDCB, cmd, ifname);
  void* ieee = req.begin_nest(DCB_ATTR_IEEE);
  void* table = req.begin_nest(DCB_ATTR_IEEE_APP_TABLE);
  for (const auto& entry : entries) {
    dcb_app app{};
    app.selector = IEEE_8021QAZ_APP_SEL_DSCP;
    app.priority = entry.prio;
    app.protocol = entry.dscp;
    req.put(DCB_ATTR_IEEE_APP, &app, sizeof app);
  }
  req.end_nest(table);
  req.end_nest(ieee);
  return req;
}

std::vector<uint8_t> message_bytes(const NlRequest& req) {
  const nlmsghdr* hdr = nlmsg_hdr(req.msg());
  const auto* begin = reinterpret_cast<const uint8_t*>(hdr);
  return {begin, begin + hdr->nlmsg_len};
}

// The kernel refuses every dcbnl request for a netdev without dcbnl ops with EOPNOTSUPP, and
// one for an unknown name with ENODEV.
Error explain(Error error, const std::string& what) {
  const int kernel_errno = error.sys_errno();
  if (kernel_errno == EOPNOTSUPP) {
    return Error(ErrorKind::kKernel,
                 what + ": its driver has no DCB support (" + std::strerror(kernel_errno) + ")");
  }
  if (kernel_errno == ENODEV) {
    return Error(ErrorKind::kDeviceNotFound, what + ": no such interface");
  }
  return error;
}

void parse_pfc(const nlattr* attr, DcbState* state) {
  if (nla_len(attr) < static_cast<int>(sizeof(ieee_pfc))) {
    return;
  }
  ieee_pfc raw;
  std::memcpy(&raw, nla_data(attr), sizeof raw);  // the attribute is only 4-byte aligned
  PfcState pfc;
  pfc.cap = raw.pfc_cap;
  pfc.enable = raw.pfc_en;
  pfc.mbc = raw.mbc;
  pfc.delay = raw.delay;
  std::copy(std::begin(raw.requests), std::end(raw.requests), pfc.requests.begin());
  std::copy(std::begin(raw.indications), std::end(raw.indications), pfc.indications.begin());
  state->pfc = pfc;
}

void parse_app_table(nlattr* table, DcbState* state) {
  nlattr* attr = nullptr;
  int rem = 0;
  nla_for_each_nested(attr, table, rem) {
    if (nla_type(attr) != DCB_ATTR_IEEE_APP || nla_len(attr) < static_cast<int>(sizeof(dcb_app))) {
      continue;
    }
    dcb_app app;
    std::memcpy(&app, nla_data(attr), sizeof app);
    if (app.selector == IEEE_8021QAZ_APP_SEL_DSCP && app.protocol <= kMaxDscp) {
      state->dscp_prio.push_back(
          {static_cast<uint8_t>(app.protocol), static_cast<uint8_t>(app.priority)});
    }
  }
}

}  // namespace

void parse_dcb_reply(const nlmsghdr* hdr, DcbState* state) {
  if (hdr->nlmsg_len < NLMSG_LENGTH(sizeof(dcbmsg))) {
    return;
  }
  nlattr* attr = nullptr;
  int rem = 0;
  nlmsg_for_each_attr(attr, const_cast<nlmsghdr*>(hdr), sizeof(dcbmsg), rem) {
    if (nla_type(attr) != DCB_ATTR_IEEE) {
      continue;
    }
    nlattr* inner = nullptr;
    int rem2 = 0;
    nla_for_each_nested(inner, attr, rem2) {
      if (nla_type(inner) == DCB_ATTR_IEEE_PFC) {
        parse_pfc(inner, state);
      } else if (nla_type(inner) == DCB_ATTR_IEEE_APP_TABLE) {
        parse_app_table(inner, state);
      }
    }
  }
}

namespace {

// dcbnl answers a SET or DEL with a message of its own whose DCB_ATTR_IEEE carries the driver's
// result in one byte: 0, or the negative errno cut to 8 bits.
Status change(Rtnl& rtnl, const NlRequest& req, const std::string& what) {
  std::optional<uint8_t> result;
  auto status = rtnl.query(req, what, [&](const nlmsghdr* hdr) {
    nlattr* attr = nlmsg_find_attr(const_cast<nlmsghdr*>(hdr), sizeof(dcbmsg), DCB_ATTR_IEEE);
    if (attr != nullptr && nla_len(attr) >= 1) {
      result = *static_cast<const uint8_t*>(nla_data(attr));
    }
  });
  if (!status) {
    return explain(std::move(status).error(), what);
  }
  if (!result) {
    return Error(ErrorKind::kKernel, what + ": the kernel's answer carries no result");
  }
  if (*result != 0) {
    // Not sys_error: the driver's ENOENT means a missing APP entry, not a missing device.
    return Error(ErrorKind::kKernel,
                 what + ": the driver refused: " + std::strerror(256 - *result));
  }
  return ok_status();
}

// Entries of want the device lacks, in DSCP order.
std::vector<DscpPrio> missing_dscp(const DcbState& have, const DcbConfig& want) {
  std::vector<DscpPrio> out;
  for (const auto& [dscp, prio] : want.dscp_prio) {
    DscpPrio entry{dscp, prio};
    if (std::find(have.dscp_prio.begin(), have.dscp_prio.end(), entry) == have.dscp_prio.end()) {
      out.push_back(entry);
    }
  }
  return out;
}

// Entries of the device for a DSCP that want maps to another priority.
std::vector<DscpPrio> stale_dscp(const DcbState& have, const DcbConfig& want) {
  std::vector<DscpPrio> out;
  for (const auto& entry : have.dscp_prio) {
    auto it = want.dscp_prio.find(entry.dscp);
    if (it != want.dscp_prio.end() && it->second != entry.prio) {
      out.push_back(entry);
    }
  }
  return out;
}

std::vector<std::string> differences(const DcbState& have, const DcbConfig& want) {
  std::vector<std::string> out;
  if (want.pfc_enable) {
    std::vector<uint8_t> wanted_on;
    for (uint8_t p = 0; p < kDcbPriorities; ++p) {
      if ((*want.pfc_enable >> p) & 1) {
        wanted_on.push_back(p);
      }
    }
    if (!have.pfc) {
      out.push_back("its driver reports no IEEE PFC, the network wants PFC " +
                    (wanted_on.empty() ? std::string("off everywhere")
                                       : "on priority " + join_and(wanted_on)));
    } else {
      for (int p = 0; p < kDcbPriorities; ++p) {
        bool on = (have.pfc->enable >> p) & 1;
        bool wanted = (*want.pfc_enable >> p) & 1;
        if (on != wanted) {
          out.push_back("PFC on priority " + std::to_string(p) + " is " + (on ? "on" : "off") +
                        ", the network wants it " + (wanted ? "on" : "off"));
        }
      }
    }
  }
  for (const auto& [dscp, prio] : want.dscp_prio) {
    std::vector<uint8_t> prios;
    for (const auto& entry : have.dscp_prio) {
      if (entry.dscp == dscp) {
        prios.push_back(entry.prio);
      }
    }
    std::sort(prios.begin(), prios.end());
    std::string name = "DSCP " + std::to_string(dscp);
    std::string wanted = std::to_string(prio);
    if (prios.empty()) {
      out.push_back(name + " has no APP entry, the network wants priority " + wanted);
    } else if (prios.size() == 1 && prios[0] != prio) {
      out.push_back(name + " maps to priority " + join_and(prios) + ", the network wants " +
                    wanted);
    } else if (prios.size() > 1) {
      bool has_wanted = std::find(prios.begin(), prios.end(), prio) != prios.end();
      out.push_back(name + " maps to priorities " + join_and(prios) + ", the network wants " +
                    wanted + (has_wanted ? " only" : ""));
    }
  }
  return out;
}

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    out += (i > 0 ? sep : "") + parts[i];
  }
  return out;
}

}  // namespace

Status check_dcb_config(const DcbConfig& cfg) {
  for (const auto& [dscp, prio] : cfg.dscp_prio) {
    if (dscp > kMaxDscp) {
      return Error(ErrorKind::kInvalidConfig,
                   "DSCP " + std::to_string(dscp) + " is outside 0.." + std::to_string(kMaxDscp));
    }
    if (prio >= kDcbPriorities) {
      return Error(ErrorKind::kInvalidConfig, "DSCP " + std::to_string(dscp) +
                                                  " maps to priority " + std::to_string(prio) +
                                                  ", outside 0..7");
    }
  }
  return ok_status();
}

Expected<DcbState> RtnlDcb::read() {
  const std::string what = "read DCB settings of " + in_quotes(ifname_);
  TRY(check_link_name(ifname_).with_context(what));
  DcbState state;
  NlRequest req = dcb_request(RTM_GETDCB, DCB_CMD_IEEE_GET, ifname_);
  auto status = rtnl_.query(req, what, [&](const nlmsghdr* hdr) { parse_dcb_reply(hdr, &state); });
  if (!status) {
    return explain(std::move(status).error(), what);
  }
  return state;
}

Status RtnlDcb::set_pfc(const PfcState& pfc) {
  return change(rtnl_, pfc_set_request(ifname_, pfc), "set PFC on " + in_quotes(ifname_));
}

Status RtnlDcb::add_dscp(const std::vector<DscpPrio>& entries) {
  if (entries.empty()) {
    return ok_status();
  }
  return change(rtnl_, dscp_request(DCB_CMD_IEEE_SET, ifname_, entries),
                "add DSCP APP entries to " + in_quotes(ifname_));
}

Status RtnlDcb::remove_dscp(const std::vector<DscpPrio>& entries) {
  if (entries.empty()) {
    return ok_status();
  }
  return change(rtnl_, dscp_request(DCB_CMD_IEEE_DEL, ifname_, entries),
                "remove DSCP APP entries from " + in_quotes(ifname_));
}

Expected<DcbState> read_dcb(Rtnl& rtnl, const std::string& ifname) {
  return RtnlDcb(rtnl, ifname).read();
}

Status apply_dcb(DcbDevice& dev, const DcbConfig& cfg) {
  const std::string what = "apply DCB settings to " + in_quotes(dev.name());
  TRY(check_dcb_config(cfg).with_context(what));
  if (cfg.empty()) {
    return ok_status();
  }
  TRY_ASSIGN(DcbState have, dev.read());
  if (cfg.pfc_enable && !have.pfc) {
    return Error(ErrorKind::kKernel, what + ": its driver reports no IEEE PFC to change");
  }
  bool changed = false;
  if (cfg.pfc_enable && have.pfc->enable != *cfg.pfc_enable) {
    PfcState pfc = *have.pfc;
    pfc.enable = *cfg.pfc_enable;
    TRY(dev.set_pfc(pfc));
    changed = true;
  }
  if (auto add = missing_dscp(have, cfg); !add.empty()) {
    TRY(dev.add_dscp(add));
    changed = true;
  }
  // Read again: a driver like mlx5 has already dropped the entries the new ones replace, and
  // removing them once more would fail (ENOENT).
  if (changed) {
    TRY_ASSIGN(have, dev.read());
  }
  if (auto stale = stale_dscp(have, cfg); !stale.empty()) {
    TRY(dev.remove_dscp(stale));
    TRY_ASSIGN(have, dev.read());
  }
  auto diff = differences(have, cfg);
  if (!diff.empty()) {
    return Error(ErrorKind::kKernel,
                 what + ": the driver accepted them, but reading back shows: " + join(diff, "; "));
  }
  return ok_status();
}

Status apply_dcb(Rtnl& rtnl, const std::string& ifname, const DcbConfig& cfg) {
  RtnlDcb dev(rtnl, ifname);
  return apply_dcb(dev, cfg);
}

Status verify_dcb(const DcbState& have, const DcbConfig& want, const std::string& ifname) {
  auto diff = differences(have, want);
  if (diff.empty()) {
    return ok_status();
  }
  return Error(ErrorKind::kKernel,
               "DCB of " + in_quotes(ifname) + " differs from the network's: " + join(diff, "; "));
}

std::vector<uint8_t> encode_dcb_get(const std::string& ifname) {
  return message_bytes(dcb_request(RTM_GETDCB, DCB_CMD_IEEE_GET, ifname));
}

std::vector<uint8_t> encode_pfc_set(const std::string& ifname, const PfcState& pfc) {
  return message_bytes(pfc_set_request(ifname, pfc));
}

std::vector<uint8_t> encode_dscp_add(const std::string& ifname,
                                     const std::vector<DscpPrio>& entries) {
  return message_bytes(dscp_request(DCB_CMD_IEEE_SET, ifname, entries));
}

std::vector<uint8_t> encode_dscp_remove(const std::string& ifname,
                                        const std::vector<DscpPrio>& entries) {
  return message_bytes(dscp_request(DCB_CMD_IEEE_DEL, ifname, entries));
}

}  // namespace rdmanet::netns
