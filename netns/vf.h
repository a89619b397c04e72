// SR-IOV VF settings, read and written through the PF over rtnetlink
// (IFLA_VFINFO_LIST), with the meaning and names sriov-cni users know.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "cni/error.h"
#include "netns/hw_address.h"
#include "netns/link.h"
#include "netns/rtnl.h"

namespace rdmanet::netns {

enum class VfLinkState : uint32_t { kAuto = 0, kEnable = 1, kDisable = 2 };

// Settings to apply to one VF; unset fields are left as they are.
struct VfConfig {
  std::optional<HwAddress> mac;
  std::optional<uint32_t> vlan;        // 0..4095; 0 clears VLAN
  std::optional<uint32_t> qos;         // 0..7, needs vlan
  std::optional<uint16_t> vlan_proto;  // ETH_P_8021Q or ETH_P_8021AD (host order)
  std::optional<bool> spoofchk;
  std::optional<bool> trust;
  std::optional<VfLinkState> link_state;
  std::optional<uint32_t> min_tx_rate;  // Mbps; both rates go together
  std::optional<uint32_t> max_tx_rate;

  bool empty() const;
};

// A VF's settings as the PF reports them; as a VfConfig it restores them.
struct VfState {
  HwAddress mac;
  uint32_t vlan = 0;
  uint32_t qos = 0;
  uint16_t vlan_proto = 0x8100;
  bool spoofchk = true;
  bool trust = false;
  VfLinkState link_state = VfLinkState::kAuto;
  uint32_t min_tx_rate = 0;
  uint32_t max_tx_rate = 0;

  VfConfig as_config() const;
};

// Reads VF `vf` of the PF with ifindex pf_index. kDeviceNotFound when the PF
// reports no such VF.
Expected<VfState> read_vf(Rtnl& rtnl, int pf_index, const std::string& pf_name, int vf);

// Applies cfg to VF `vf` of pf in one request.
Status set_vf(Rtnl& rtnl, const LinkInfo& pf, int vf, const VfConfig& cfg);

// The IFLA_VFINFO_LIST attribute set_vf sends, as bytes: attributes in the
// order mac, vlan, spoofchk, trust, link state, rate (iproute2's order for
// `ip link set ... vf N mac .. vlan .. qos .. proto .. spoofchk .. trust ..
// state .. min_tx_rate .. max_tx_rate ..`).
std::vector<uint8_t> encode_vf_config(int vf, const VfConfig& cfg);

}  // namespace rdmanet::netns
