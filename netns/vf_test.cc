#include "netns/vf.h"

#include <gtest/gtest.h>
#include <linux/if_ether.h>

#include "netns/testing/test_util.h"

namespace rdmanet::netns {
namespace {

using testing::from_hex;
using testing::KernelTest;
using testing::TestNetns;

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

// The GUIDs, against `ip link set dev capv0 vf 3 node_guid 00:11:22:33:44:55:66:77` and
// `... vf 3 port_guid 00:11:22:33:44:55:66:88` (iproute2 6.1, captured as above): an
// IFLA_VF_INFO holding a struct ifla_vf_guid (vf, 4 padding bytes, the GUID in host order).
const std::string kNodeGuidInfo =
    "18000100"
    "14000a00030000000000000077665544"
    "33221100";
const std::string kPortGuidInfo =
    "18000100"
    "14000b00030000000000000088665544"
    "33221100";

TEST(VfEncoding, GuidsMatchIproute2) {
  VfConfig node;
  node.node_guid = 0x0011223344556677;
  EXPECT_EQ(encode_vf_config(3, node), from_hex("1c001600" + kNodeGuidInfo));

  VfConfig port;
  port.port_guid = 0x0011223344556688;
  EXPECT_EQ(encode_vf_config(3, port), from_hex("1c001600" + kPortGuidInfo));
}

// `ip link set ... vf 3 node_guid G port_guid G` puts both GUIDs in one IFLA_VF_INFO
// (list 30001600, info 2c000100, node then port), but the kernel's do_setvfinfo returns after
// the node GUID and never sets the port GUID. So each GUID travels in an IFLA_VF_INFO of its
// own, byte for byte what iproute2 sends for it alone, after the other settings.
TEST(VfEncoding, EachGuidHasItsOwnVfInfo) {
  VfConfig both;
  both.node_guid = 0x0011223344556677;
  both.port_guid = 0x0011223344556688;
  EXPECT_EQ(encode_vf_config(3, both), from_hex("34001600" + kNodeGuidInfo + kPortGuidInfo));

  VfConfig trust;
  trust.trust = true;
  std::vector<uint8_t> trust_info = encode_vf_config(3, trust);
  trust_info.erase(trust_info.begin(), trust_info.begin() + 4);  // the list header
  VfConfig mixed = trust;
  mixed.node_guid = 0x0011223344556677;
  std::vector<uint8_t> expected = from_hex("2c001600");
  expected.insert(expected.end(), trust_info.begin(), trust_info.end());
  std::vector<uint8_t> node_info = from_hex(kNodeGuidInfo);
  expected.insert(expected.end(), node_info.begin(), node_info.end());
  EXPECT_EQ(encode_vf_config(3, mixed), expected);
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
  EXPECT_FALSE(c.node_guid.has_value());
  EXPECT_FALSE(c.port_guid.has_value());
}

TEST(VfState, RestoresGuidsOnlyWhenRead) {
  VfState s;
  s.node_guid = 0x0011223344556677;
  VfConfig c = s.as_config();
  EXPECT_EQ(c.node_guid, 0x0011223344556677u);
  EXPECT_FALSE(c.port_guid.has_value());
}

TEST(Guid, AcceptsTheUsualSpellings) {
  const uint64_t want = 0x0011223344aabbcc;
  for (const std::string text :
       {"00:11:22:33:44:aa:bb:cc", "00:11:22:33:44:AA:BB:CC", "0011:2233:44aa:bbcc",
        "0x0011223344aabbcc", "0X0011223344AABBCC", "0011223344aabbcc"}) {
    auto guid = parse_guid(text, "node_guid");
    ASSERT_TRUE(guid.ok()) << text << ": " << guid.error().msg();
    EXPECT_EQ(*guid, want) << text;
  }
}

TEST(Guid, RefusesMalformedText) {
  for (const std::string text :
       {"", "00:11:22:33:44:55:66", "00:11:22:33:44:55:66:77:88", "00:11:22:33:44:55:66:7g",
        "00-11-22-33-44-55-66-77", "0:11:22:33:44:55:66:777", "00:11:22:33:44:55:66:77 ",
        " 0x0011223344556677", "0x011223344556677", "0x001122334455667788", "0x",
        "0011:2233:4455:667", "0011.2233.4455.6677", "+011223344556677"}) {
    auto guid = parse_guid(text, "port_guid");
    ASSERT_FALSE(guid.ok()) << text;
    EXPECT_EQ(guid.error().kind(), ErrorKind::kInvalidConfig);
    EXPECT_EQ(guid.error().msg(),
              "port_guid: \"" + text +
                  "\" is not a GUID; write it as 00:11:22:33:44:55:66:77, 0011:2233:4455:6677 "
                  "or 0x0011223344556677");
  }
}

TEST(Guid, RefusesAllZeroAndAllOnes) {
  for (const std::string text :
       {"00:00:00:00:00:00:00:00", "0000:0000:0000:0000", "0x0000000000000000"}) {
    auto guid = parse_guid(text, "node_guid");
    ASSERT_FALSE(guid.ok()) << text;
    EXPECT_EQ(guid.error().kind(), ErrorKind::kInvalidConfig);
    EXPECT_EQ(guid.error().msg(),
              "node_guid: 00:00:00:00:00:00:00:00 is not a usable GUID (drivers take it for "
              "\"no GUID\")");
  }
  auto ones = parse_guid("ff:ff:ff:ff:ff:ff:ff:ff", "node_guid");
  ASSERT_FALSE(ones.ok());
  EXPECT_EQ(ones.error().kind(), ErrorKind::kInvalidConfig);
}

TEST(Guid, FormatsAsIpLinkPrintsIt) {
  EXPECT_EQ(format_guid(0x0011223344aabbcc), "00:11:22:33:44:aa:bb:cc");
  EXPECT_EQ(format_guid(0xfe80000000000001), "fe:80:00:00:00:00:00:01");
  EXPECT_EQ(*parse_guid(format_guid(0x0123456789abcdef), "g"), 0x0123456789abcdefu);
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
  EXPECT_NE(set.error().msg().find(
                "set VF 0 of PF \"pf0\" vlan 5 qos 0 proto 802.1Q: Operation not supported"),
            std::string::npos)
      << set.error().msg();

  // The kernel gets as far as the GUIDs (an empty IFLA_VF_INFO in front would be EINVAL).
  VfConfig guids;
  guids.node_guid = 0x0011223344556677;
  guids.port_guid = 0x0011223344556688;
  auto set_guids = set_vf(rtnl, *pf, 0, guids);
  ASSERT_FALSE(set_guids.ok());
  EXPECT_NE(
      set_guids.error().msg().find(
          "set VF 0 of PF \"pf0\" node GUID 00:11:22:33:44:55:66:77: Operation not supported"),
      std::string::npos)
      << set_guids.error().msg();
}

// Each setting is its own kernel attribute, set (and put back) in its own request, so a
// driver that refuses one (igb: link state) cannot leave the others half applied unknown.
TEST(VfAttributes, EachSettingIsOneAttributeInApplyOrder) {
  VfConfig cfg;
  cfg.link_state = VfLinkState::kDisable;
  cfg.vlan = 7;
  cfg.qos = 3;
  cfg.max_tx_rate = 100;
  cfg.mac = *HwAddress::parse("02:00:00:00:00:07");
  EXPECT_EQ(attributes_of(cfg),
            (std::vector<VfAttribute>{VfAttribute::kMac, VfAttribute::kVlan,
                                      VfAttribute::kLinkState, VfAttribute::kRate}));
  VfConfig vlan = only(cfg, VfAttribute::kVlan);
  EXPECT_EQ(vlan.vlan, 7U);
  EXPECT_EQ(vlan.qos, 3U);
  EXPECT_FALSE(vlan.mac);
  EXPECT_FALSE(vlan.link_state);
  EXPECT_TRUE(only(cfg, VfAttribute::kTrust).empty());
  // qos without vlan is no vlan attribute (the config parser refuses it anyway).
  VfConfig qos_only;
  qos_only.qos = 2;
  EXPECT_TRUE(attributes_of(qos_only).empty());
}

TEST(VfAttributes, HasSettingComparesOnlyWhatTheConfigSets) {
  VfState state;
  state.vlan = 7;
  state.qos = 0;
  state.max_tx_rate = 100;
  state.min_tx_rate = 10;
  VfConfig cfg;
  cfg.vlan = 7;
  EXPECT_TRUE(has_setting(state, cfg, VfAttribute::kVlan)) << "unset qos is 0, proto 802.1Q";
  cfg.vlan_proto = 0x88a8;
  EXPECT_FALSE(has_setting(state, cfg, VfAttribute::kVlan));
  cfg.max_tx_rate = 100;
  EXPECT_TRUE(has_setting(state, cfg, VfAttribute::kRate)) << "unset min_tx_rate is unchanged";
  cfg.min_tx_rate = 0;
  EXPECT_FALSE(has_setting(state, cfg, VfAttribute::kRate));
  EXPECT_TRUE(has_setting(state, cfg, VfAttribute::kTrust)) << "not set: nothing to change";
}

TEST(VfAttributes, SettingsForPutsBackExactlyTheAttributesTheConfigChanges) {
  VfState state;
  state.mac = *HwAddress::parse("02:00:00:00:00:01");
  state.vlan = 12;
  state.qos = 1;
  state.vlan_proto = 0x88a8;
  state.trust = true;
  state.min_tx_rate = 5;
  state.max_tx_rate = 50;
  VfConfig cfg;
  cfg.vlan = 100;
  cfg.max_tx_rate = 1000;
  cfg.node_guid = 0x0011223344556677ULL;  // the PF reports none: cannot be put back
  VfConfig back = settings_for(state, cfg);
  EXPECT_EQ(back.vlan, 12U);
  EXPECT_EQ(back.qos, 1U);
  EXPECT_EQ(back.vlan_proto, 0x88a8);
  EXPECT_EQ(back.min_tx_rate, 5U);
  EXPECT_EQ(back.max_tx_rate, 50U);
  EXPECT_FALSE(back.mac) << "the config does not change the MAC";
  EXPECT_FALSE(back.trust);
  EXPECT_FALSE(back.node_guid);
  EXPECT_EQ(attributes_of(back),
            (std::vector<VfAttribute>{VfAttribute::kVlan, VfAttribute::kRate}));
}

}  // namespace
}  // namespace rdmanet::netns
