// SR-IOV VF settings, read and written through the PF over rtnetlink
// (IFLA_VFINFO_LIST), with the meaning and names sriov-cni users know.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/names.h"
#include "netns/hw_address.h"
#include "netns/link.h"
#include "netns/rtnl.h"

namespace rdmanet::netns {

enum class VfLinkState : uint32_t { kAuto = 0, kEnable = 1, kDisable = 2 };
// As sriov-cni's link_state and `ip link set ... vf N state` name them.
inline constexpr Name<VfLinkState> kVfLinkStateNames[] = {{VfLinkState::kAuto, "auto"},
                                                          {VfLinkState::kEnable, "enable"},
                                                          {VfLinkState::kDisable, "disable"}};

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
  std::optional<uint64_t> node_guid;  // InfiniBand VFs; the GUID's first byte is the high one
  std::optional<uint64_t> port_guid;

  bool empty() const;
  // Takes every field `other` sets.
  void merge(const VfConfig& other);
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
  // Only when the PF reports them (newer kernels, IPoIB PFs) and they were ever assigned: a
  // VF without a GUID reads as 0, which cannot be set back.
  std::optional<uint64_t> node_guid;
  std::optional<uint64_t> port_guid;

  VfConfig as_config() const;
};

// The settings of a VF, one kernel attribute each (IFLA_VF_MAC, IFLA_VF_VLAN_LIST, ...), as
// `ip link set <pf> vf N <setting>` sends them; named as sriov-cni's config keys. A driver
// takes some and refuses others (igb: no link state), so they are set one request each.
enum class VfAttribute { kMac, kVlan, kSpoofchk, kTrust, kLinkState, kRate, kNodeGuid, kPortGuid };
inline constexpr Name<VfAttribute> kVfAttributeNames[] = {{VfAttribute::kMac, "mac"},
                                                          {VfAttribute::kVlan, "vlan"},
                                                          {VfAttribute::kSpoofchk, "spoofchk"},
                                                          {VfAttribute::kTrust, "trust"},
                                                          {VfAttribute::kLinkState, "link_state"},
                                                          {VfAttribute::kRate, "tx rate"},
                                                          {VfAttribute::kNodeGuid, "node GUID"},
                                                          {VfAttribute::kPortGuid, "port GUID"}};

// The attributes cfg sets, in the order set_vf applies them (the order above). vlanQoS and
// vlanProto belong to the vlan attribute, min_tx_rate and max_tx_rate to the rate.
std::vector<VfAttribute> attributes_of(const VfConfig& cfg);
// cfg's value of one attribute alone.
VfConfig only(const VfConfig& cfg, VfAttribute attribute);
// Whether the VF has cfg's value of the attribute already (an unset qos or protocol counts
// as 0 and 802.1Q, an unset rate as unchanged).
bool has_setting(const VfState& state, const VfConfig& cfg, VfAttribute attribute);
// What the VF has now for the attributes cfg sets: the config that puts them back. An
// attribute the PF does not report (a GUID never assigned) is left out; it cannot be put
// back.
VfConfig settings_for(const VfState& state, const VfConfig& cfg);

// Reads VF `vf` of the PF with ifindex pf_index. kDeviceNotFound when the PF
// reports no such VF.
Expected<VfState> read_vf(Rtnl& rtnl, int pf_index, const std::string& pf_name, int vf);

// Applies one attribute of cfg to VF `vf` of pf, in one request. The error names the VF, the
// PF and the attribute: `set VF 3 of PF "enp1s0" link_state: Operation not supported`.
Status set_vf_attribute(Rtnl& rtnl, const LinkInfo& pf, int vf, const VfConfig& cfg,
                        VfAttribute attribute);
// Applies cfg one attribute per request, in attributes_of() order, stopping at the first one
// that fails: the ones before it stay applied.
Status set_vf(Rtnl& rtnl, const LinkInfo& pf, int vf, const VfConfig& cfg);

// The IFLA_VFINFO_LIST attribute set_vf sends, as bytes: attributes in the
// order mac, vlan, spoofchk, trust, link state, rate (iproute2's order for
// `ip link set ... vf N mac .. vlan .. qos .. proto .. spoofchk .. trust ..
// state .. min_tx_rate .. max_tx_rate ..`). Each GUID follows in an
// IFLA_VF_INFO of its own, as `ip link set ... vf N node_guid G` sends it: the
// kernel applies only the first GUID of an IFLA_VF_INFO and ignores the rest.
std::vector<uint8_t> encode_vf_config(int vf, const VfConfig& cfg);

// A GUID as users write it: 8 colon-separated hex bytes (00:11:22:33:44:55:66:77, as `ip link`
// prints it and ib-sriov-cni takes it), 4 colon-separated groups of 4 hex digits
// (0011:2233:4455:6677, as sysfs and ibv_devinfo print it), or 16 hex digits with or without
// 0x (0x0011223344556677, as ibstat and OpenSM's partitions.conf write it). The all-zero and
// all-ones GUIDs are refused (drivers read them as "no GUID"). kInvalidConfig names field.
Expected<uint64_t> parse_guid(const std::string& text, const std::string& field);

// 00:11:22:33:44:55:66:77.
std::string format_guid(uint64_t guid);

}  // namespace rdmanet::netns
