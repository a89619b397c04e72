#include "netns/dcb.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>

#include "netns/testing/test_util.h"

namespace rdmanet::netns {
namespace {

using testing::from_hex;
using testing::KernelTest;
using testing::TestNetns;

// No driver here implements DCB, so the requests are checked against the bytes iproute2's
// `dcb` (iproute2-6.1.0) sends for the same settings, captured with
// `ip netns exec NS strace -e trace=sendto -e write=3 dcb ...` against a veth "capv0" in a
// throwaway namespace (the kernel then refuses them, which does not matter here). One string
// per 16-byte row of the dump; nlmsg_seq (dcb puts the time there) and nlmsg_pid are zeroed.
// What the dumps show: dcb asks for an ack (NLM_F_REQUEST|NLM_F_ACK), DCB_ATTR_IEEE and
// DCB_ATTR_IEEE_APP_TABLE carry NLA_F_NESTED (libmnl sets it), and the DSCP entries go in the
// order given on the command line.

// `dcb app replace` and `dcb pfc set` start with this read.
TEST(DcbEncoding, GetMatchesIproute2) {
  std::string iproute2 =
      "200000004e0005000000000000000000"
      "001500000a0001006361707630000000";
  EXPECT_EQ(encode_dcb_get("capv0"), from_hex(iproute2));
}

// `dcb pfc set dev capv0 prio-pfc 0:off 3:on 4:on`. dcb reads the PFC settings first and
// stops when the kernel refuses; the read was answered by netns/testdata/dcb_fake_ieee_get.c
// (preloaded into dcb; the file says how) with pfc_cap 8, pfc_en 0x01, delay 7 and counters
// 0x100+p / 0x200+p. dcb sends all of struct ieee_pfc back, counters included, with only
// pfc_en changed (0x18).
TEST(DcbEncoding, PfcSetMatchesIproute2) {
  PfcState pfc;
  pfc.cap = 8;
  pfc.enable = 0x18;
  pfc.delay = 7;
  for (int p = 0; p < kDcbPriorities; ++p) {
    pfc.requests[p] = 0x100 + p;
    pfc.indications[p] = 0x200 + p;
  }
  std::string iproute2 =
      "b00000004f0005000000000000000000"
      "001400000a0001006361707630000000"
      "90000d808c0002000818000007000000"
      "00010000000000000101000000000000"
      "02010000000000000301000000000000"
      "04010000000000000501000000000000"
      "06010000000000000701000000000000"
      "00020000000000000102000000000000"
      "02020000000000000302000000000000"
      "04020000000000000502000000000000"
      "06020000000000000702000000000000";
  EXPECT_EQ(encode_pfc_set("capv0", pfc), from_hex(iproute2));
}

// `dcb app add dev capv0 dscp-prio 10:1 26:3 46:5`.
TEST(DcbEncoding, DscpAddMatchesIproute2) {
  std::string iproute2 =
      "400000004f0005000000000000000000"
      "001400000a0001006361707630000000"
      "20000d801c0003800800010005010a00"
      "0800010005031a000800010005052e00";
  EXPECT_EQ(encode_dscp_add("capv0", {{10, 1}, {26, 3}, {46, 5}}), from_hex(iproute2));
}

// `dcb app del dev capv0 dscp-prio 26:0 46:0`.
TEST(DcbEncoding, DscpRemoveMatchesIproute2) {
  std::string iproute2 =
      "380000004f0005000000000000000000"
      "001b00000a0001006361707630000000"
      "18000d80140003800800010005001a00"
      "0800010005002e00";
  EXPECT_EQ(encode_dscp_remove("capv0", {{26, 0}, {46, 0}}), from_hex(iproute2));
}

TEST(DcbConfig, RangesAreChecked) {
  DcbConfig cfg;
  cfg.dscp_prio = {{26, 3}, {63, 7}};
  EXPECT_TRUE(check_dcb_config(cfg).ok());

  cfg.dscp_prio = {{64, 3}};
  auto dscp = check_dcb_config(cfg);
  ASSERT_FALSE(dscp.ok());
  EXPECT_EQ(dscp.error().kind(), ErrorKind::kInvalidConfig);
  EXPECT_EQ(dscp.error().msg(), "DSCP 64 is outside 0..63");

  cfg.dscp_prio = {{26, 8}};
  auto prio = check_dcb_config(cfg);
  ASSERT_FALSE(prio.ok());
  EXPECT_EQ(prio.error().msg(), "DSCP 26 maps to priority 8, outside 0..7");
}

DcbState state_with(uint8_t pfc_enable, std::vector<DscpPrio> dscp) {
  DcbState s;
  s.pfc = PfcState{};
  s.pfc->cap = 8;
  s.pfc->enable = pfc_enable;
  s.dscp_prio = std::move(dscp);
  return s;
}

DcbConfig want(std::optional<uint8_t> pfc, std::map<uint8_t, uint8_t> dscp) {
  DcbConfig c;
  c.pfc_enable = pfc;
  c.dscp_prio = std::move(dscp);
  return c;
}

std::string verify_message(const DcbState& have, const DcbConfig& cfg) {
  auto status = verify_dcb(have, cfg, "ens1f0");
  if (status.ok()) {
    return "ok";
  }
  EXPECT_EQ(status.error().kind(), ErrorKind::kKernel);
  return status.error().msg();
}

TEST(DcbVerify, EqualIsOk) {
  auto have = state_with(0x08, {{46, 5}, {26, 3}, {10, 1}});
  EXPECT_EQ(verify_message(have, want(0x08, {{26, 3}, {46, 5}})), "ok");
  // Unset parts and unlisted DSCPs are not the network's business.
  EXPECT_EQ(verify_message(have, DcbConfig{}), "ok");
  EXPECT_EQ(verify_message(DcbState{}, want(std::nullopt, {})), "ok");
}

TEST(DcbVerify, PfcDifferencesNamePriorityAndDirection) {
  EXPECT_EQ(verify_message(state_with(0x20, {}), want(0x08, {})),
            "DCB of \"ens1f0\" differs from the network's: PFC on priority 3 is off, the "
            "network wants it on; PFC on priority 5 is on, the network wants it off");
}

TEST(DcbVerify, PfcNotReported) {
  EXPECT_EQ(verify_message(DcbState{}, want(0x18, {})),
            "DCB of \"ens1f0\" differs from the network's: its driver reports no IEEE PFC, the "
            "network wants PFC on priority 3 and 4");
  EXPECT_EQ(verify_message(DcbState{}, want(0x00, {})),
            "DCB of \"ens1f0\" differs from the network's: its driver reports no IEEE PFC, the "
            "network wants PFC off everywhere");
}

TEST(DcbVerify, DscpDifferences) {
  EXPECT_EQ(verify_message(state_with(0, {{26, 0}}), want(std::nullopt, {{26, 3}})),
            "DCB of \"ens1f0\" differs from the network's: DSCP 26 maps to priority 0, the "
            "network wants 3");
  EXPECT_EQ(verify_message(state_with(0, {}), want(std::nullopt, {{46, 5}})),
            "DCB of \"ens1f0\" differs from the network's: DSCP 46 has no APP entry, the network "
            "wants priority 5");
  EXPECT_EQ(verify_message(state_with(0, {{26, 3}, {26, 0}}), want(std::nullopt, {{26, 3}})),
            "DCB of \"ens1f0\" differs from the network's: DSCP 26 maps to priorities 0 and 3, "
            "the network wants 3 only");
  EXPECT_EQ(verify_message(state_with(0, {{26, 1}, {26, 0}}), want(std::nullopt, {{26, 3}})),
            "DCB of \"ens1f0\" differs from the network's: DSCP 26 maps to priorities 0 and 1, "
            "the network wants 3");
}

TEST(DcbVerify, EveryDifferenceIsListed) {
  EXPECT_EQ(verify_message(state_with(0x00, {{26, 0}}), want(0x08, {{26, 3}, {46, 5}})),
            "DCB of \"ens1f0\" differs from the network's: PFC on priority 3 is off, the network "
            "wants it on; DSCP 26 maps to priority 0, the network wants 3; DSCP 46 has no APP "
            "entry, the network wants priority 5");
}

// A test double for a DCB-capable driver, which no machine here has. It keeps the APP table the
// way the kernel's dcb_ieee_setapp/dcb_ieee_delapp do (an entry is selector, DSCP and priority;
// adding one that exists is EEXIST, removing one that does not is ENOENT), or, as mlx5 does,
// one priority per DSCP that a new entry replaces. It records what apply_dcb asked for.
class FakeDcb : public DcbDevice {
 public:
  enum class Apps { kKernelList, kMlx5 };

  explicit FakeDcb(Apps apps = Apps::kKernelList) : apps_(apps) {
    state.pfc = PfcState{};
    state.pfc->cap = 8;
    state.pfc->delay = 7;
    state.pfc->requests[3] = 1234;
  }

  const std::string& name() const override { return name_; }

  Expected<DcbState> read() override {
    calls.push_back("read");
    return state;
  }

  Status set_pfc(const PfcState& pfc) override {
    calls.push_back("set_pfc " + std::to_string(pfc.enable));
    sent_pfc = pfc;
    if (!ignores_pfc) {
      state.pfc->enable = pfc.enable;
    }
    return ok_status();
  }

  Status add_dscp(const std::vector<DscpPrio>& entries) override {
    calls.push_back("add" + list(entries));
    for (const auto& e : entries) {
      auto& table = state.dscp_prio;
      if (apps_ == Apps::kMlx5) {
        std::erase_if(table, [&](const DscpPrio& have) { return have.dscp == e.dscp; });
      } else if (std::find(table.begin(), table.end(), e) != table.end()) {
        return sys_error("add", EEXIST);
      }
      table.push_back(e);
    }
    return ok_status();
  }

  Status remove_dscp(const std::vector<DscpPrio>& entries) override {
    calls.push_back("remove" + list(entries));
    for (const auto& e : entries) {
      auto& table = state.dscp_prio;
      auto it = std::find(table.begin(), table.end(), e);
      if (it == table.end()) {
        return sys_error("remove", ENOENT);
      }
      table.erase(it);
    }
    return ok_status();
  }

  DcbState state;
  bool ignores_pfc = false;  // like dcbnl with a driver that has no ieee_setpfc
  std::vector<std::string> calls;
  std::optional<PfcState> sent_pfc;

 private:
  static std::string list(const std::vector<DscpPrio>& entries) {
    std::string out;
    for (const auto& e : entries) {
      out += " " + std::to_string(e.dscp) + ":" + std::to_string(e.prio);
    }
    return out;
  }

  Apps apps_;
  std::string name_ = "ens1f0";
};

using Calls = std::vector<std::string>;

TEST(DcbApply, PfcKeepsWhatTheDriverReported) {
  FakeDcb dev;
  ASSERT_OK(apply_dcb(dev, want(0x08, {})));
  EXPECT_EQ(dev.calls, (Calls{"read", "set_pfc 8", "read"}));
  ASSERT_TRUE(dev.sent_pfc.has_value());
  PfcState expected = *FakeDcb().state.pfc;
  expected.enable = 0x08;
  EXPECT_EQ(*dev.sent_pfc, expected);
}

TEST(DcbApply, AddsNewEntriesThenRemovesTheReplacedOnes) {
  FakeDcb dev;
  dev.state.dscp_prio = {{26, 0}, {10, 1}, {48, 6}};
  ASSERT_OK(apply_dcb(dev, want(std::nullopt, {{10, 1}, {26, 3}, {46, 5}})));
  EXPECT_EQ(dev.calls, (Calls{"read", "add 26:3 46:5", "read", "remove 26:0", "read"}));
  EXPECT_EQ(dev.state.dscp_prio, (std::vector<DscpPrio>{{10, 1}, {48, 6}, {26, 3}, {46, 5}}));
}

// mlx5 drops the old entry itself when a DSCP gets a new priority; removing it again would
// fail with ENOENT.
TEST(DcbApply, Mlx5RemapsInPlace) {
  FakeDcb dev(FakeDcb::Apps::kMlx5);
  dev.state.dscp_prio = {{26, 0}};
  ASSERT_OK(apply_dcb(dev, want(std::nullopt, {{26, 3}})));
  EXPECT_EQ(dev.calls, (Calls{"read", "add 26:3", "read"}));
}

TEST(DcbApply, NothingToChangeOnlyReads) {
  FakeDcb dev;
  dev.state.pfc->enable = 0x08;
  dev.state.dscp_prio = {{26, 3}};
  ASSERT_OK(apply_dcb(dev, want(0x08, {{26, 3}})));
  EXPECT_EQ(dev.calls, (Calls{"read"}));
  ASSERT_OK(apply_dcb(dev, DcbConfig{}));
  EXPECT_EQ(dev.calls, (Calls{"read"}));
}

TEST(DcbApply, SettingTheDriverIgnoredIsReported) {
  FakeDcb dev;
  dev.ignores_pfc = true;
  auto status = apply_dcb(dev, want(0x08, {}));
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.error().kind(), ErrorKind::kKernel);
  EXPECT_EQ(status.error().msg(),
            "apply DCB settings to \"ens1f0\": the driver accepted them, but reading back shows: "
            "PFC on priority 3 is off, the network wants it on");
}

TEST(DcbApply, NoPfcReportedIsAnErrorBeforeAnyChange) {
  FakeDcb dev;
  dev.state.pfc.reset();
  auto status = apply_dcb(dev, want(0x08, {{26, 3}}));
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.error().msg(),
            "apply DCB settings to \"ens1f0\": its driver reports no IEEE PFC to change");
  EXPECT_EQ(dev.calls, (Calls{"read"}));
}

TEST(DcbApply, InvalidConfigTouchesNothing) {
  FakeDcb dev;
  auto status = apply_dcb(dev, want(std::nullopt, {{64, 3}}));
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.error().kind(), ErrorKind::kInvalidConfig);
  EXPECT_EQ(status.error().msg(), "apply DCB settings to \"ens1f0\": DSCP 64 is outside 0..63");
  EXPECT_TRUE(dev.calls.empty());
}

class DcbKernelTest : public KernelTest {};

void expect_no_dcb_support(const Error& error, const std::string& what) {
  EXPECT_EQ(error.kind(), ErrorKind::kKernel);
  EXPECT_EQ(error.msg(), what + ": its driver has no DCB support (Operation not supported)");
}

// The real kernel's answer for a netdev without DCB (veth has no dcbnl ops): every request
// names the interface and says so.
TEST_F(DcbKernelTest, VethHasNoDcbSupport) {
  TestNetns& ns = make_netns();
  make_veth(ns, "pf0", ns, "pf0peer");
  auto rtnl = ns.rtnl();

  auto state = read_dcb(rtnl, "pf0");
  ASSERT_FALSE(state.ok());
  expect_no_dcb_support(state.error(), "read DCB settings of \"pf0\"");

  auto applied = apply_dcb(rtnl, "pf0", want(0x08, {{26, 3}}));
  ASSERT_FALSE(applied.ok());
  expect_no_dcb_support(applied.error(), "read DCB settings of \"pf0\"");

  // The writes on their own, as apply_dcb would send them after a successful read.
  RtnlDcb dev(rtnl, "pf0");
  auto pfc = dev.set_pfc(PfcState{});
  ASSERT_FALSE(pfc.ok());
  expect_no_dcb_support(pfc.error(), "set PFC on \"pf0\"");
  auto added = dev.add_dscp({{26, 3}});
  ASSERT_FALSE(added.ok());
  expect_no_dcb_support(added.error(), "add DSCP APP entries to \"pf0\"");
  auto removed = dev.remove_dscp({{26, 0}});
  ASSERT_FALSE(removed.ok());
  expect_no_dcb_support(removed.error(), "remove DSCP APP entries from \"pf0\"");
}

TEST_F(DcbKernelTest, MissingInterfaceIsDeviceNotFound) {
  TestNetns& ns = make_netns();
  auto rtnl = ns.rtnl();

  auto state = read_dcb(rtnl, "nosuch0");
  ASSERT_FALSE(state.ok());
  EXPECT_EQ(state.error().kind(), ErrorKind::kDeviceNotFound);
  EXPECT_EQ(state.error().msg(), "read DCB settings of \"nosuch0\": no such interface");

  auto applied = apply_dcb(rtnl, "nosuch0", want(0x08, {}));
  ASSERT_FALSE(applied.ok());
  EXPECT_EQ(applied.error().kind(), ErrorKind::kDeviceNotFound);
  EXPECT_NE(applied.error().msg().find("\"nosuch0\""), std::string::npos) << applied.error().msg();
}

TEST_F(DcbKernelTest, BadInterfaceNameIsInvalidConfig) {
  TestNetns& ns = make_netns();
  auto rtnl = ns.rtnl();
  auto state = read_dcb(rtnl, "a-name-longer-than-15");
  ASSERT_FALSE(state.ok());
  EXPECT_EQ(state.error().kind(), ErrorKind::kInvalidConfig);
}

}  // namespace
}  // namespace rdmanet::netns
