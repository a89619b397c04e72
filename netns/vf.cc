#include "netns/vf.h"

#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstring>

namespace rdmanet::netns {

namespace {

// The IFLA_VF_INFO with everything but the GUIDs.
void put_vf_info(NlRequest& req, uint32_t index, const VfConfig& cfg) {
  void* info = req.begin_plain_nest(IFLA_VF_INFO);
  if (cfg.mac) {
    ifla_vf_mac mac{};
    mac.vf = index;
    std::memcpy(mac.mac, cfg.mac->bytes().data(),
                std::min(cfg.mac->bytes().size(), sizeof mac.mac));
    req.put(IFLA_VF_MAC, &mac, sizeof mac);
  }
  if (cfg.vlan) {
    void* vlans = req.begin_plain_nest(IFLA_VF_VLAN_LIST);
    ifla_vf_vlan_info vlan{};
    vlan.vf = index;
    vlan.vlan = *cfg.vlan;
    vlan.qos = cfg.qos.value_or(0);
    vlan.vlan_proto = htons(cfg.vlan_proto.value_or(ETH_P_8021Q));
    req.put(IFLA_VF_VLAN_INFO, &vlan, sizeof vlan);
    req.end_nest(vlans);
  }
  if (cfg.spoofchk) {
    ifla_vf_spoofchk spoof{index, *cfg.spoofchk ? 1U : 0U};
    req.put(IFLA_VF_SPOOFCHK, &spoof, sizeof spoof);
  }
  if (cfg.trust) {
    ifla_vf_trust trust{index, *cfg.trust ? 1U : 0U};
    req.put(IFLA_VF_TRUST, &trust, sizeof trust);
  }
  if (cfg.link_state) {
    ifla_vf_link_state state{index, static_cast<uint32_t>(*cfg.link_state)};
    req.put(IFLA_VF_LINK_STATE, &state, sizeof state);
  }
  if (cfg.min_tx_rate || cfg.max_tx_rate) {
    ifla_vf_rate rate{index, cfg.min_tx_rate.value_or(0), cfg.max_tx_rate.value_or(0)};
    req.put(IFLA_VF_RATE, &rate, sizeof rate);
  }
  req.end_nest(info);
}

// An IFLA_VF_INFO holding one GUID: the kernel's do_setvfinfo returns right after the first
// GUID it finds in an IFLA_VF_INFO, so a second one there would be dropped without a word.
void put_guid_info(NlRequest& req, uint32_t index, int attr, uint64_t guid) {
  void* info = req.begin_plain_nest(IFLA_VF_INFO);
  ifla_vf_guid value;
  std::memset(&value, 0, sizeof value);  // 4 padding bytes after vf
  value.vf = index;
  value.guid = guid;
  req.put(attr, &value, sizeof value);
  req.end_nest(info);
}

// Puts the VF attributes into req, nested as the kernel expects.
void put_vf_config(NlRequest& req, int vf, const VfConfig& cfg) {
  auto index = static_cast<uint32_t>(vf);
  void* list = req.begin_plain_nest(IFLA_VFINFO_LIST);
  // The kernel refuses an empty IFLA_VF_INFO (EINVAL): leave it out when only GUIDs are set.
  VfConfig rest = cfg;
  rest.node_guid.reset();
  rest.port_guid.reset();
  if (!rest.empty() || cfg.empty()) {
    put_vf_info(req, index, cfg);
  }
  if (cfg.node_guid) {
    put_guid_info(req, index, IFLA_VF_IB_NODE_GUID, *cfg.node_guid);
  }
  if (cfg.port_guid) {
    put_guid_info(req, index, IFLA_VF_IB_PORT_GUID, *cfg.port_guid);
  }
  req.end_nest(list);
}

ifinfomsg pf_header(int index) {
  ifinfomsg ifi{};
  ifi.ifi_family = AF_UNSPEC;
  ifi.ifi_index = index;
  return ifi;
}

// Fills state from one IFLA_VF_INFO nest; returns the VF index it describes.
int parse_vf_info(nlattr* info, VfState* state) {
  int vf = -1;
  nlattr* attr = nullptr;
  int rem = 0;
  nla_for_each_nested(attr, info, rem) {
    switch (nla_type(attr)) {
      case IFLA_VF_MAC: {
        const auto* mac = static_cast<const ifla_vf_mac*>(nla_data(attr));
        vf = static_cast<int>(mac->vf);
        state->mac = HwAddress(std::vector<uint8_t>(mac->mac, mac->mac + 6));
        break;
      }
      case IFLA_VF_VLAN: {
        const auto* vlan = static_cast<const ifla_vf_vlan*>(nla_data(attr));
        state->vlan = vlan->vlan;
        state->qos = vlan->qos;
        break;
      }
      case IFLA_VF_VLAN_LIST: {
        nlattr* entry = nullptr;
        int rem2 = 0;
        nla_for_each_nested(entry, attr, rem2) {
          if (nla_type(entry) == IFLA_VF_VLAN_INFO) {
            const auto* v = static_cast<const ifla_vf_vlan_info*>(nla_data(entry));
            state->vlan = v->vlan;
            state->qos = v->qos;
            state->vlan_proto = ntohs(v->vlan_proto);
            break;  // the first entry is the VF's VLAN
          }
        }
        break;
      }
      case IFLA_VF_SPOOFCHK:
        state->spoofchk = static_cast<const ifla_vf_spoofchk*>(nla_data(attr))->setting != 0;
        break;
      case IFLA_VF_TRUST:
        state->trust = static_cast<const ifla_vf_trust*>(nla_data(attr))->setting != 0;
        break;
      case IFLA_VF_LINK_STATE:
        state->link_state = static_cast<VfLinkState>(
            static_cast<const ifla_vf_link_state*>(nla_data(attr))->link_state);
        break;
      case IFLA_VF_RATE: {
        const auto* rate = static_cast<const ifla_vf_rate*>(nla_data(attr));
        state->min_tx_rate = rate->min_tx_rate;
        state->max_tx_rate = rate->max_tx_rate;
        break;
      }
      case IFLA_VF_IB_NODE_GUID:
      case IFLA_VF_IB_PORT_GUID: {
        if (nla_len(attr) < static_cast<int>(sizeof(ifla_vf_guid))) {
          break;
        }
        ifla_vf_guid guid;
        std::memcpy(&guid, nla_data(attr), sizeof guid);  // the attribute is 4-byte aligned
        // 0 and all-ones mean "none assigned" (and are no GUID one could restore).
        if (guid.guid != 0 && guid.guid != ~uint64_t{0}) {
          (nla_type(attr) == IFLA_VF_IB_NODE_GUID ? state->node_guid : state->port_guid) =
              guid.guid;
        }
        break;
      }
      default:
        break;
    }
  }
  return vf;
}

}  // namespace

bool VfConfig::empty() const {
  return !mac && !vlan && !qos && !vlan_proto && !spoofchk && !trust && !link_state &&
         !min_tx_rate && !max_tx_rate && !node_guid && !port_guid;
}

void VfConfig::merge(const VfConfig& other) {
  auto take = [](auto* to, const auto& value) {
    if (value) {
      *to = value;
    }
  };
  take(&mac, other.mac);
  take(&vlan, other.vlan);
  take(&qos, other.qos);
  take(&vlan_proto, other.vlan_proto);
  take(&spoofchk, other.spoofchk);
  take(&trust, other.trust);
  take(&link_state, other.link_state);
  take(&min_tx_rate, other.min_tx_rate);
  take(&max_tx_rate, other.max_tx_rate);
  take(&node_guid, other.node_guid);
  take(&port_guid, other.port_guid);
}

VfConfig VfState::as_config() const {
  VfConfig cfg;
  if (!mac.empty()) {
    cfg.mac = mac;
  }
  cfg.vlan = vlan;
  cfg.qos = qos;
  cfg.vlan_proto = vlan_proto;
  cfg.spoofchk = spoofchk;
  cfg.trust = trust;
  cfg.link_state = link_state;
  cfg.min_tx_rate = min_tx_rate;
  cfg.max_tx_rate = max_tx_rate;
  cfg.node_guid = node_guid;
  cfg.port_guid = port_guid;
  return cfg;
}

std::vector<uint8_t> encode_vf_config(int vf, const VfConfig& cfg) {
  ifinfomsg ifi = pf_header(0);
  NlRequest req(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK, &ifi, sizeof ifi);
  put_vf_config(req, vf, cfg);
  nlmsghdr* hdr = nlmsg_hdr(req.msg());
  const auto* begin = reinterpret_cast<const uint8_t*>(nlmsg_attrdata(hdr, sizeof ifi));
  int len = nlmsg_attrlen(hdr, sizeof ifi);
  return {begin, begin + len};
}

std::vector<VfAttribute> attributes_of(const VfConfig& cfg) {
  std::vector<VfAttribute> out;
  for (const auto& [attribute, name] : kVfAttributeNames) {
    if (!only(cfg, attribute).empty()) {
      out.push_back(attribute);
    }
  }
  return out;
}

VfConfig only(const VfConfig& cfg, VfAttribute attribute) {
  VfConfig one;
  switch (attribute) {
    case VfAttribute::kMac:
      one.mac = cfg.mac;
      break;
    case VfAttribute::kVlan:
      if (cfg.vlan) {
        one.vlan = cfg.vlan;
        one.qos = cfg.qos;
        one.vlan_proto = cfg.vlan_proto;
      }
      break;
    case VfAttribute::kSpoofchk:
      one.spoofchk = cfg.spoofchk;
      break;
    case VfAttribute::kTrust:
      one.trust = cfg.trust;
      break;
    case VfAttribute::kLinkState:
      one.link_state = cfg.link_state;
      break;
    case VfAttribute::kRate:
      one.min_tx_rate = cfg.min_tx_rate;
      one.max_tx_rate = cfg.max_tx_rate;
      break;
    case VfAttribute::kNodeGuid:
      one.node_guid = cfg.node_guid;
      break;
    case VfAttribute::kPortGuid:
      one.port_guid = cfg.port_guid;
      break;
  }
  return one;
}

bool has_setting(const VfState& state, const VfConfig& cfg, VfAttribute attribute) {
  switch (attribute) {
    case VfAttribute::kMac:
      return !cfg.mac || state.mac == *cfg.mac;
    case VfAttribute::kVlan:
      return !cfg.vlan || (state.vlan == *cfg.vlan && state.qos == cfg.qos.value_or(0) &&
                           state.vlan_proto == cfg.vlan_proto.value_or(ETH_P_8021Q));
    case VfAttribute::kSpoofchk:
      return !cfg.spoofchk || state.spoofchk == *cfg.spoofchk;
    case VfAttribute::kTrust:
      return !cfg.trust || state.trust == *cfg.trust;
    case VfAttribute::kLinkState:
      return !cfg.link_state || state.link_state == *cfg.link_state;
    case VfAttribute::kRate:
      return state.min_tx_rate == cfg.min_tx_rate.value_or(state.min_tx_rate) &&
             state.max_tx_rate == cfg.max_tx_rate.value_or(state.max_tx_rate);
    case VfAttribute::kNodeGuid:
      return !cfg.node_guid || state.node_guid == cfg.node_guid;
    case VfAttribute::kPortGuid:
      return !cfg.port_guid || state.port_guid == cfg.port_guid;
  }
  return false;
}

VfConfig settings_for(const VfState& state, const VfConfig& cfg) {
  const VfConfig all = state.as_config();
  VfConfig out;
  for (VfAttribute attribute : attributes_of(cfg)) {
    out.merge(only(all, attribute));
  }
  return out;
}

namespace {

// The attribute and the value being set, as the config names them: "vlan 5 qos 0 proto
// 802.1ad", "tx rate (min_tx_rate 10, max_tx_rate 0)".
std::string describe(const VfConfig& one, VfAttribute attribute) {
  std::string what(name_of(kVfAttributeNames, attribute));
  auto on_off = [](bool on) { return on ? "on" : "off"; };
  switch (attribute) {
    case VfAttribute::kMac:
      return what + " " + one.mac->str();
    case VfAttribute::kVlan:
      return what + " " + std::to_string(*one.vlan) + " qos " +
             std::to_string(one.qos.value_or(0)) + " proto " +
             (one.vlan_proto.value_or(ETH_P_8021Q) == ETH_P_8021AD ? "802.1ad" : "802.1Q");
    case VfAttribute::kSpoofchk:
      return what + " " + on_off(*one.spoofchk);
    case VfAttribute::kTrust:
      return what + " " + on_off(*one.trust);
    case VfAttribute::kLinkState:
      return what + " " + std::string(name_of(kVfLinkStateNames, *one.link_state));
    case VfAttribute::kRate:
      return what + " (min_tx_rate " + std::to_string(*one.min_tx_rate) + ", max_tx_rate " +
             std::to_string(*one.max_tx_rate) + ")";
    case VfAttribute::kNodeGuid:
      return what + " " + format_guid(*one.node_guid);
    case VfAttribute::kPortGuid:
      return what + " " + format_guid(*one.port_guid);
  }
  return what;
}

}  // namespace

Status set_vf_attribute(Rtnl& rtnl, const LinkInfo& pf, int vf, const VfConfig& cfg,
                        VfAttribute attribute) {
  VfConfig one = only(cfg, attribute);
  if (attribute == VfAttribute::kRate) {
    // One attribute carries both rates: the kernel would read a missing one as 0.
    VfState current;
    if (!one.min_tx_rate || !one.max_tx_rate) {
      TRY_ASSIGN(current, read_vf(rtnl, pf.index, pf.name, vf));
    }
    one.min_tx_rate = one.min_tx_rate.value_or(current.min_tx_rate);
    one.max_tx_rate = one.max_tx_rate.value_or(current.max_tx_rate);
  }
  ifinfomsg ifi = pf_header(pf.index);
  NlRequest req(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK, &ifi, sizeof ifi);
  put_vf_config(req, vf, one);
  return rtnl.request(req, "set VF " + std::to_string(vf) + " of PF \"" + pf.name + "\" " +
                               describe(one, attribute));
}

Status set_vf(Rtnl& rtnl, const LinkInfo& pf, int vf, const VfConfig& cfg) {
  for (VfAttribute attribute : attributes_of(cfg)) {
    TRY(set_vf_attribute(rtnl, pf, vf, cfg, attribute));
  }
  return ok_status();
}

Expected<VfState> read_vf(Rtnl& rtnl, int pf_index, const std::string& pf_name, int vf) {
  ifinfomsg ifi = pf_header(pf_index);
  NlRequest req(RTM_GETLINK, NLM_F_REQUEST, &ifi, sizeof ifi);
  req.put_u32(IFLA_EXT_MASK, RTEXT_FILTER_VF | RTEXT_FILTER_SKIP_STATS);
  std::optional<VfState> found;
  const std::string what = "read VF " + std::to_string(vf) + " of PF \"" + pf_name + "\"";
  auto status = rtnl.query(req, what, [&](const nlmsghdr* hdr) {
    auto* mutable_hdr = const_cast<nlmsghdr*>(hdr);
    nlattr* attr = nullptr;
    int rem = 0;
    nlmsg_for_each_attr(attr, mutable_hdr, sizeof(ifinfomsg), rem) {
      if (nla_type(attr) != IFLA_VFINFO_LIST) {
        continue;
      }
      nlattr* info = nullptr;
      int rem2 = 0;
      nla_for_each_nested(info, attr, rem2) {
        VfState state;
        if (nla_type(info) == IFLA_VF_INFO && parse_vf_info(info, &state) == vf) {
          found = state;
        }
      }
    }
  });
  if (!status) {
    return std::move(status).error();
  }
  if (!found) {
    return Error(ErrorKind::kDeviceNotFound, what + ": the PF reports no such VF");
  }
  return *found;
}

namespace {

bool all_hex(const std::string& text) {
  return std::all_of(text.begin(), text.end(),
                     [](unsigned char c) { return std::isxdigit(c) != 0; });
}

// The 16 hex digits of a GUID in one of the accepted spellings; empty when it is none of them.
std::string guid_digits(const std::string& text) {
  // Groups of `width` hex digits separated by single colons.
  auto grouped = [&](size_t width, size_t groups) {
    std::string digits;
    if (text.size() != groups * (width + 1) - 1) {
      return std::string();
    }
    for (size_t i = 0; i < text.size(); ++i) {
      if (i % (width + 1) == width) {
        if (text[i] != ':') {
          return std::string();
        }
      } else {
        digits += text[i];
      }
    }
    return all_hex(digits) ? digits : std::string();
  };
  if (auto digits = grouped(2, 8); !digits.empty()) {
    return digits;
  }
  if (auto digits = grouped(4, 4); !digits.empty()) {
    return digits;
  }
  std::string digits = text;
  if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) {
    digits = digits.substr(2);
  }
  return digits.size() == 16 && all_hex(digits) ? digits : std::string();
}

}  // namespace

Expected<uint64_t> parse_guid(const std::string& text, const std::string& field) {
  std::string digits = guid_digits(text);
  if (digits.empty()) {
    return Error(ErrorKind::kInvalidConfig,
                 field + ": \"" + text +
                     "\" is not a GUID; write it as 00:11:22:33:44:55:66:77, "
                     "0011:2233:4455:6677 or 0x0011223344556677");
  }
  uint64_t guid = 0;
  std::from_chars(digits.data(), digits.data() + digits.size(), guid, 16);
  if (guid == 0 || guid == ~uint64_t{0}) {
    return Error(ErrorKind::kInvalidConfig, field + ": " + format_guid(guid) +
                                                " is not a usable GUID (drivers take it for "
                                                "\"no GUID\")");
  }
  return guid;
}

std::string format_guid(uint64_t guid) {
  char text[24];
  std::snprintf(text, sizeof text, "%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x",
                static_cast<unsigned>(guid >> 56) & 0xff, static_cast<unsigned>(guid >> 48) & 0xff,
                static_cast<unsigned>(guid >> 40) & 0xff, static_cast<unsigned>(guid >> 32) & 0xff,
                static_cast<unsigned>(guid >> 24) & 0xff, static_cast<unsigned>(guid >> 16) & 0xff,
                static_cast<unsigned>(guid >> 8) & 0xff, static_cast<unsigned>(guid) & 0xff);
  return text;
}

}  // namespace rdmanet::netns
