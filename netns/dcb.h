// Node-level RoCE QoS on a PF over rtnetlink (dcbnl, RTM_GETDCB/RTM_SETDCB): IEEE 802.1Qbb
// priority flow control and the DSCP -> priority APP table, with the meaning and the bytes of
// `dcb pfc set dev X prio-pfc 3:on` and `dcb app add|del dev X dscp-prio 26:3`.
//
// On mlx5 the DSCP APP entries are also the port's trust switch: adding the first one makes the
// port classify by the IP header's DSCP instead of the VLAN PCP, removing the last one switches
// it back to PCP. So a non-empty dscp_prio selects DSCP trust there. (Drivers with an explicit
// APP trust table, DCB_ATTR_DCB_APP_TRUST_TABLE, are not touched by this file.)
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "netns/rtnl.h"

struct nlmsghdr;

namespace rdmanet::netns {

constexpr int kDcbPriorities = 8;
constexpr uint8_t kMaxDscp = 63;

// PFC as the driver reports it (struct ieee_pfc). Writing PFC sends all of it back, changed
// only in `enable`, as `dcb pfc set` does.
struct PfcState {
  uint8_t cap = 0;                                  // how many priorities may have PFC at once
  uint8_t enable = 0;                               // bit p: PFC on priority p
  uint8_t mbc = 0;                                  // MACsec bypass capability
  uint16_t delay = 0;                               // allowance for the cable delay, in bit times
  std::array<uint64_t, kDcbPriorities> requests{};  // PFC frames sent, per priority
  std::array<uint64_t, kDcbPriorities> indications{};  // PFC frames received, per priority

  bool operator==(const PfcState&) const = default;
};

// One IEEE APP entry with the DSCP selector (IEEE_8021QAZ_APP_SEL_DSCP).
struct DscpPrio {
  uint8_t dscp = 0;
  uint8_t prio = 0;

  auto operator<=>(const DscpPrio&) const = default;
};

// A PF's DCB settings as the kernel reports them.
struct DcbState {
  std::optional<PfcState> pfc;  // empty: the driver does not report IEEE PFC
  // The DSCP entries of the APP table in the kernel's order. The kernel's table may hold one
  // DSCP with several priorities (apply_dcb leaves only the wanted one).
  std::vector<DscpPrio> dscp_prio;
};

// What a network wants of its PF's DCB; unset parts are left as they are.
struct DcbConfig {
  std::optional<uint8_t> pfc_enable;     // bit p = PFC on priority p; all 8 bits are set
  std::map<uint8_t, uint8_t> dscp_prio;  // DSCP 0..63 -> priority 0..7; other DSCPs untouched

  bool empty() const { return !pfc_enable && dscp_prio.empty(); }
};

// kInvalidConfig naming the first DSCP above 63 or priority above 7.
Status check_dcb_config(const DcbConfig& cfg);

// The dcbnl exchanges apply_dcb is made of. RtnlDcb talks to the kernel; tests use a double
// that behaves like a DCB driver, because no driver on the development machines has DCB.
class DcbDevice {
 public:
  virtual ~DcbDevice() = default;
  virtual const std::string& name() const = 0;
  virtual Expected<DcbState> read() = 0;
  // DCB_CMD_IEEE_SET with DCB_ATTR_IEEE_PFC.
  virtual Status set_pfc(const PfcState& pfc) = 0;
  // DCB_CMD_IEEE_SET / DCB_CMD_IEEE_DEL with these DSCP entries in the APP table.
  virtual Status add_dscp(const std::vector<DscpPrio>& entries) = 0;
  virtual Status remove_dscp(const std::vector<DscpPrio>& entries) = 0;
};

// A netdev reached through rtnl, by name. A netdev whose driver has no DCB support (the kernel
// answers EOPNOTSUPP) is a kKernel error saying so; a missing one is kDeviceNotFound.
class RtnlDcb : public DcbDevice {
 public:
  RtnlDcb(Rtnl& rtnl, std::string ifname) : rtnl_(rtnl), ifname_(std::move(ifname)) {}

  const std::string& name() const override { return ifname_; }
  Expected<DcbState> read() override;
  Status set_pfc(const PfcState& pfc) override;
  Status add_dscp(const std::vector<DscpPrio>& entries) override;
  Status remove_dscp(const std::vector<DscpPrio>& entries) override;

 private:
  Rtnl& rtnl_;
  std::string ifname_;
};

// Decodes a DCB_CMD_IEEE_GET reply into state. Exposed for the fuzz target (tests/fuzz).
void parse_dcb_reply(const nlmsghdr* hdr, DcbState* state);

// The DCB settings of ifname (DCB_CMD_IEEE_GET).
Expected<DcbState> read_dcb(Rtnl& rtnl, const std::string& ifname);

// Makes the device's DCB settings what cfg asks, touching only what differs, then reads them
// back and fails listing the differences if the driver did not take them (dcbnl silently
// skips a setting the driver has no callback for). New DSCP entries are added before the ones
// they replace are removed: mlx5 then remaps in place and never drops to PCP trust on the way.
Status apply_dcb(DcbDevice& dev, const DcbConfig& cfg);
Status apply_dcb(Rtnl& rtnl, const std::string& ifname, const DcbConfig& cfg);

// Ok when have is what want asks; otherwise a kKernel error listing every difference, e.g.
// `DCB of "ens1f0" differs from the network's: PFC on priority 3 is off, the network wants it
// on; DSCP 26 maps to priority 0, the network wants 3`.
Status verify_dcb(const DcbState& have, const DcbConfig& want, const std::string& ifname);

// The requests as bytes, the whole netlink message with nlmsg_seq and nlmsg_pid 0: identical
// to what iproute2's `dcb` sends for the same settings (see dcb_test.cc).
std::vector<uint8_t> encode_dcb_get(const std::string& ifname);
std::vector<uint8_t> encode_pfc_set(const std::string& ifname, const PfcState& pfc);
std::vector<uint8_t> encode_dscp_add(const std::string& ifname,
                                     const std::vector<DscpPrio>& entries);
std::vector<uint8_t> encode_dscp_remove(const std::string& ifname,
                                        const std::vector<DscpPrio>& entries);

}  // namespace rdmanet::netns
