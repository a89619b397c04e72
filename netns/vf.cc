#include "netns/vf.h"

#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>

#include <cstring>

namespace rdmanet::netns {

namespace {

// Puts the VF attributes into req, nested as the kernel expects.
void put_vf_config(NlRequest& req, int vf, const VfConfig& cfg) {
  auto index = static_cast<uint32_t>(vf);
  void* list = req.begin_plain_nest(IFLA_VFINFO_LIST);
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
      default:
        break;
    }
  }
  return vf;
}

}  // namespace

bool VfConfig::empty() const {
  return !mac && !vlan && !qos && !vlan_proto && !spoofchk && !trust && !link_state &&
         !min_tx_rate && !max_tx_rate;
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

Status set_vf(Rtnl& rtnl, const LinkInfo& pf, int vf, const VfConfig& cfg) {
  ifinfomsg ifi = pf_header(pf.index);
  NlRequest req(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK, &ifi, sizeof ifi);
  put_vf_config(req, vf, cfg);
  return rtnl.request(req, "set VF " + std::to_string(vf) + " of PF \"" + pf.name + "\"");
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

}  // namespace rdmanet::netns
