#include "netns/vf.h"

#include <gtest/gtest.h>
#include <linux/if_ether.h>

#include "netns/test_util.h"

namespace rdmanet::netns {
namespace {

using testing::KernelTest;
using testing::TestNetns;

std::vector<uint8_t> from_hex(const std::string& text) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < text.size(); i += 2) {
    out.push_back(static_cast<uint8_t>(std::stoi(text.substr(i, 2), nullptr, 16)));
  }
  return out;
}

// No driver here implements SR-IOV (veth has no VFs), so the request is
// checked against the bytes iproute2 6.1 sends for the same settings,
// captured with `strace -e trace=sendmsg -e write=3 ip link set dev X vf 3
// mac 02:00:00:00:00:07 vlan 100 qos 2 proto 802.1ad spoofchk off trust on
// state enable min_tx_rate 10 max_tx_rate 100` (the IFLA_VFINFO_LIST part).
TEST(VfEncoding, MatchesIproute2) {
  VfConfig cfg;
  cfg.mac = *HwAddress::parse("02:00:00:00:00:07");
  cfg.vlan = 100;
  cfg.qos = 2;
  cfg.vlan_proto = ETH_P_8021AD;
  cfg.spoofchk = false;
  cfg.trust = true;
  cfg.link_state = VfLinkState::kEnable;
  cfg.min_tx_rate = 10;
  cfg.max_tx_rate = 100;
  // One string per 16-byte row of the strace dump, from offset 0x20.
  std::string iproute2 =
      "7c001600780001002800010003000000"
      "02000000000700000000000000000000"
      "00000000000000000000000000000000"
      "18000c00140001000300000064000000"
      "0200000088a800000c00040003000000"
      "000000000c0009000300000001000000"
      "0c000500030000000100000010000600"
      "030000000a00000064000000";
  EXPECT_EQ(encode_vf_config(3, cfg), from_hex(iproute2));
}

TEST(VfEncoding, OnlySetFieldsAreSent) {
  VfConfig cfg;
  cfg.trust = true;
  // list(4) + info(4) + trust(4 + 8)
  EXPECT_EQ(encode_vf_config(0, cfg).size(), 20u);
  EXPECT_TRUE(VfConfig{}.empty());
  EXPECT_FALSE(cfg.empty());
}

TEST(VfState, RestoresEveryField) {
  VfState s;
  s.mac = *HwAddress::parse("02:00:00:00:00:09");
  s.vlan = 7;
  s.trust = true;
  VfConfig c = s.as_config();
  EXPECT_EQ(c.mac, s.mac);
  EXPECT_EQ(c.vlan, 7u);
  EXPECT_EQ(c.trust, true);
  EXPECT_EQ(c.spoofchk, true);
  EXPECT_EQ(c.link_state, VfLinkState::kAuto);
}

class VfKernelTest : public KernelTest {};

// The real kernel's answer for a PF without SR-IOV: the error names the PF and VF.
TEST_F(VfKernelTest, DriverWithoutSriovIsAClearError) {
  TestNetns& ns = make_netns();
  make_veth(ns, "pf0", ns, "pf0peer");
  auto rtnl = ns.rtnl();
  auto pf = find_link_by_name(rtnl, "pf0");
  ASSERT_TRUE(pf.ok()) << pf.error().msg();

  auto state = read_vf(rtnl, pf->index, pf->name, 0);
  ASSERT_FALSE(state.ok());
  EXPECT_EQ(state.error().kind(), ErrorKind::kDeviceNotFound);
  EXPECT_NE(state.error().msg().find("VF 0 of PF \"pf0\""), std::string::npos)
      << state.error().msg();

  VfConfig cfg;
  cfg.vlan = 5;
  auto set = set_vf(rtnl, *pf, 0, cfg);
  ASSERT_FALSE(set.ok());
  EXPECT_NE(set.error().msg().find("set VF 0 of PF \"pf0\": Operation not supported"),
            std::string::npos)
      << set.error().msg();
}

}  // namespace
}  // namespace rdmanet::netns
