#include "plugin/conf.h"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cni/error_code.h"

namespace rdmanet::plugin {
namespace {

using nlohmann::json;
using Kind = DeviceSelector::Kind;

// The keys every config has, plus `extra` (an object, or {} for nothing); no device selected.
json netconf(const json& extra) {
  json c = {{"cniVersion", "1.0.0"}, {"name", "rail0"}, {"type", "rdmanet"}};
  if (!extra.is_null()) {
    c.update(extra);
  }
  return c;
}

// A config that selects a device by name, plus `extra`.
json conf(const json& extra) {
  json c = netconf({{"device", "ens1f0"}});
  if (!extra.is_null()) {
    c.update(extra);
  }
  return c;
}

// The config as the plugin reads it: the shared NetConf first, then rdmanet's keys.
Expected<PluginConf> load(const json& doc, const cni::CniArgs& args = {}) {
  auto net = cni::parse_netconf(doc.dump());
  if (!net.ok()) {
    ADD_FAILURE() << "parse_netconf refused " << doc.dump() << ": " << net.error().msg();
    return std::move(net).error();
  }
  return load_conf(*net, args);
}

cni::CniArgs cni_args(const std::string& mac) {
  cni::CniArgs args;
  args.values["MAC"] = mac;
  return args;
}

// A config load_conf must refuse with `code` and a message naming `field`.
struct Refused {
  std::string name;
  json config;
  int code;
  std::string field;
  cni::CniArgs args = {};
};

void expect_refused(const std::vector<Refused>& cases) {
  for (const auto& c : cases) {
    auto loaded = load(c.config, c.args);
    if (loaded.ok()) {
      ADD_FAILURE() << c.name << ": accepted " << c.config.dump();
      continue;
    }
    const Error& e = loaded.error();
    EXPECT_EQ(cni::error_code(e), c.code) << c.name << ": " << e.msg();
    EXPECT_NE(e.msg().find(c.field), std::string::npos)
        << c.name << ": the message does not name " << c.field << ": " << e.msg();
  }
}

TEST(LoadConf, DefaultsWithOnlyADevice) {
  auto c = load(conf({}));
  ASSERT_TRUE(c.ok()) << c.error().msg();
  EXPECT_EQ(c->mode, Mode::kNetdev);
  EXPECT_EQ(c->macvlan_mode, netns::MacvlanMode::kBridge);
  EXPECT_EQ(c->device.kind, Kind::kName);
  EXPECT_EQ(c->device.value, "ens1f0");
  EXPECT_EQ(c->device.field, "device");
  EXPECT_FALSE(c->mtu);
  EXPECT_FALSE(c->mac);
  EXPECT_TRUE(c->vf.empty());
  EXPECT_EQ(c->vf_field, "");
  EXPECT_TRUE(c->multi_rail_sysctls);
  EXPECT_EQ(c->rdma_isolation, RdmaIsolation::kAuto);
  EXPECT_FALSE(c->soft_roce);
  EXPECT_FALSE(c->roce_cm.tos);
  EXPECT_FALSE(c->roce_cm.mode);
  EXPECT_TRUE(c->dcb.empty());
  EXPECT_FALSE(c->dcb_apply);
  EXPECT_EQ(c->gid_timeout_ms, 10000);
  EXPECT_EQ(c->state_dir, "/var/lib/cni/rdmanet");
  EXPECT_EQ(c->sysfs_root, "/sys");
  EXPECT_EQ(c->configfs_root, "/sys/kernel/config");
  EXPECT_EQ(c->ipam_timeout_seconds, 60);
}

// runtimeConfig.deviceID > deviceID > pciBusID > auxDeviceID > rdmaDevice > device > hwaddr: each
// step
// removes the winner of the step before.
TEST(LoadConf, DeviceSelectorPrecedence) {
  json doc = netconf({{"runtimeConfig", {{"deviceID", "0000:3b:00.1"}}},
                      {"deviceID", "0000:3b:00.2"},
                      {"pciBusID", "0000:3b:00.3"},
                      {"auxDeviceID", "mlx5_core.sf.4"},
                      {"rdmaDevice", "mlx5_3"},
                      {"device", "ens1f0"},
                      {"hwaddr", "02:00:00:00:00:05"}});
  struct Step {
    std::string remove;
    Kind kind;
    std::string value;
    std::string field;
  } steps[] = {
      {"", Kind::kPci, "0000:3b:00.1", "runtimeConfig.deviceID"},
      {"runtimeConfig", Kind::kPci, "0000:3b:00.2", "deviceID"},
      {"deviceID", Kind::kPci, "0000:3b:00.3", "pciBusID"},
      {"pciBusID", Kind::kAuxiliary, "mlx5_core.sf.4", "auxDeviceID"},
      {"auxDeviceID", Kind::kRdma, "mlx5_3", "rdmaDevice"},
      {"rdmaDevice", Kind::kName, "ens1f0", "device"},
      {"device", Kind::kHwaddr, "02:00:00:00:00:05", "hwaddr"},
  };
  for (const auto& step : steps) {
    if (!step.remove.empty()) {
      doc.erase(step.remove);
    }
    auto c = load(doc);
    ASSERT_TRUE(c.ok()) << step.field << ": " << c.error().msg();
    EXPECT_EQ(c->device.kind, step.kind) << step.field;
    EXPECT_EQ(c->device.value, step.value) << step.field;
    EXPECT_EQ(c->device.field, step.field);
    EXPECT_EQ(c->device.str(), step.field + "=" + step.value);
  }
  doc.erase("hwaddr");
  expect_refused({{"nothing selected", doc, 7, "no device selected"},
                  {"rdmaDevice climbing", netconf({{"rdmaDevice", "../mlx5_0"}}), 7, "rdmaDevice"},
                  {"rdmaDevice ..", netconf({{"rdmaDevice", ".."}}), 7, "rdmaDevice"}});
}

// The id keys are classified by shape: a PCI address, or an auxiliary device id
// (<driver>.<type>.<n>); auxDeviceID is always an auxiliary device.
TEST(LoadConf, ClassifiesPciAddressesAndAuxiliaryIds) {
  struct Case {
    json config;
    Kind kind;
  } cases[] = {
      {netconf({{"deviceID", "0000:3b:00.2"}}), Kind::kPci},
      {netconf({{"deviceID", "mlx5_core.sf.2"}}), Kind::kAuxiliary},
      {netconf({{"pciBusID", "0000:af:1f.7"}}), Kind::kPci},
      {netconf({{"pciBusID", "mlx5_core.sf.2"}}), Kind::kAuxiliary},
      {netconf({{"runtimeConfig", {{"deviceID", "0000:3b:00.2"}}}}), Kind::kPci},
      {netconf({{"runtimeConfig", {{"deviceID", "mlx5_core.sf.2"}}}}), Kind::kAuxiliary},
      {netconf({{"auxDeviceID", "mlx5_core.sf.2"}}), Kind::kAuxiliary},
  };
  for (const auto& tc : cases) {
    auto c = load(tc.config);
    ASSERT_TRUE(c.ok()) << tc.config.dump() << ": " << c.error().msg();
    EXPECT_EQ(c->device.kind, tc.kind) << tc.config.dump();
  }
  expect_refused({
      {"deviceID a netdev name", netconf({{"deviceID", "ens1f0"}}), 7, "deviceID"},
      {"pciBusID without function", netconf({{"pciBusID", "0000:3b:00"}}), 7, "pciBusID"},
      {"runtimeConfig.deviceID a name", netconf({{"runtimeConfig", {{"deviceID", "eth0"}}}}), 7,
       "runtimeConfig.deviceID"},
      {"deviceID with a slash", netconf({{"deviceID", "../mlx5_core.sf.2"}}), 7, "deviceID"},
      {"deviceID a number", netconf({{"deviceID", 3}}), 7, "deviceID"},
      {"bad device name", netconf({{"device", "a/b"}}), 7, "device"},
      {"device name too long", netconf({{"device", "abcdefghijklmnop"}}), 7, "device"},
      {"bad hwaddr", netconf({{"hwaddr", "zz"}}), 7, "hwaddr"},
  });
}

// runtimeConfig.mac > CNI_ARGS MAC > mac; only a unicast Ethernet address will do.
TEST(LoadConf, MacPrecedenceAndUnicastEthernetOnly) {
  const std::string key = "02:00:00:00:00:01";
  const std::string arg = "02:00:00:00:00:02";
  const std::string runtime = "02:00:00:00:00:03";
  struct Case {
    json config;
    std::string arg_mac;
    std::string want;
  } cases[] = {
      {conf({{"mac", key}}), "", key},
      {conf({{"mac", key}}), arg, arg},
      {conf({}), arg, arg},
      {conf({{"mac", key}, {"runtimeConfig", {{"mac", runtime}}}}), arg, runtime},
      {conf({{"mac", key}, {"runtimeConfig", {{"mac", runtime}}}}), "", runtime},
      {conf({{"mac", "02:AA:BB:CC:DD:EE"}}), "", "02:aa:bb:cc:dd:ee"},
  };
  for (const auto& tc : cases) {
    auto c = load(tc.config, cni_args(tc.arg_mac));
    ASSERT_TRUE(c.ok()) << tc.config.dump() << ": " << c.error().msg();
    ASSERT_TRUE(c->mac) << tc.config.dump();
    EXPECT_EQ(c->mac->str(), tc.want) << tc.config.dump() << " MAC=" << tc.arg_mac;
  }
  const std::string ipoib = "00:00:00:00:fe:80:00:00:00:00:00:00:00:00:00:00:00:00:00:01";
  expect_refused({
      {"multicast mac", conf({{"mac", "01:00:5e:00:00:01"}}), 7, "mac"},
      {"broadcast mac", conf({{"mac", "ff:ff:ff:ff:ff:ff"}}), 7, "mac"},
      {"IPoIB mac", conf({{"mac", ipoib}}), 7, "mac"},
      {"malformed mac", conf({{"mac", "zz"}}), 7, "mac"},
      {"5-byte mac", conf({{"mac", "02:00:00:00:01"}}), 7, "mac"},
      {"multicast CNI_ARGS MAC", conf({}), 7, "CNI_ARGS MAC", cni_args("03:00:00:00:00:01")},
      {"malformed CNI_ARGS MAC", conf({}), 7, "CNI_ARGS MAC", cni_args("02-00-00-00-00-01")},
      {"multicast runtimeConfig.mac", conf({{"runtimeConfig", {{"mac", "33:33:00:00:00:01"}}}}), 7,
       "runtimeConfig.mac"},
      {"IPoIB runtimeConfig.mac", conf({{"runtimeConfig", {{"mac", ipoib}}}}), 7,
       "runtimeConfig.mac"},
  });
}

TEST(LoadConf, VfSettingsWithSriovCniNames) {
  auto c = load(conf({{"vlan", 100},
                      {"vlanQoS", 3},
                      {"vlanProto", "802.1ad"},
                      {"spoofchk", "off"},
                      {"trust", "on"},
                      {"link_state", "disable"},
                      {"min_tx_rate", 10},
                      {"max_tx_rate", 100}}));
  ASSERT_TRUE(c.ok()) << c.error().msg();
  EXPECT_EQ(c->vf.vlan, 100u);
  EXPECT_EQ(c->vf.qos, 3u);
  EXPECT_EQ(c->vf.vlan_proto, 0x88a8);
  EXPECT_EQ(c->vf.spoofchk, false);
  EXPECT_EQ(c->vf.trust, true);
  EXPECT_EQ(c->vf.link_state, netns::VfLinkState::kDisable);
  EXPECT_EQ(c->vf.min_tx_rate, 10u);
  EXPECT_EQ(c->vf.max_tx_rate, 100u);
  EXPECT_EQ(c->vf_field, "vlan");

  // The bounds themselves are accepted; max_tx_rate 0 means no limit, so any min goes.
  struct Case {
    json config;
    std::string first_key;
  } cases[] = {
      {conf({{"vlan", 0}}), "vlan"},
      {conf({{"vlan", 4095}, {"vlanQoS", 7}}), "vlan"},
      {conf({{"vlan", 1}, {"vlanQoS", 0}}), "vlan"},
      {conf({{"spoofchk", "on"}}), "spoofchk"},
      {conf({{"trust", "off"}}), "trust"},
      {conf({{"link_state", "auto"}}), "link_state"},
      {conf({{"link_state", "enable"}}), "link_state"},
      {conf({{"min_tx_rate", 4294967295LL}, {"max_tx_rate", 0}}), "min_tx_rate"},
      {conf({{"max_tx_rate", 4294967295LL}}), "max_tx_rate"},
  };
  for (const auto& tc : cases) {
    auto ok = load(tc.config);
    ASSERT_TRUE(ok.ok()) << tc.config.dump() << ": " << ok.error().msg();
    EXPECT_FALSE(ok->vf.empty()) << tc.config.dump();
    EXPECT_EQ(ok->vf_field, tc.first_key) << tc.config.dump();
  }
}

TEST(LoadConf, VlanProtoIgnoresCase) {
  struct Case {
    std::string text;
    uint16_t proto;
  } cases[] = {{"802.1q", 0x8100}, {"802.1Q", 0x8100}, {"802.1ad", 0x88a8}, {"802.1AD", 0x88a8}};
  for (const auto& tc : cases) {
    auto c = load(conf({{"vlan", 5}, {"vlanProto", tc.text}}));
    ASSERT_TRUE(c.ok()) << tc.text << ": " << c.error().msg();
    EXPECT_EQ(c->vf.vlan_proto, tc.proto) << tc.text;
  }
}

TEST(LoadConf, RefusesVfSettingsOutOfBounds) {
  expect_refused({
      {"vlan -1", conf({{"vlan", -1}}), 7, "vlan"},
      {"vlan 4096", conf({{"vlan", 4096}}), 7, "vlan"},
      {"vlan a string", conf({{"vlan", "5"}}), 7, "vlan"},
      {"vlanQoS 8", conf({{"vlan", 5}, {"vlanQoS", 8}}), 7, "vlanQoS"},
      {"vlanQoS -1", conf({{"vlan", 5}, {"vlanQoS", -1}}), 7, "vlanQoS"},
      {"vlanQoS without vlan", conf({{"vlanQoS", 3}}), 7, "vlanQoS"},
      {"vlanProto qinq", conf({{"vlan", 5}, {"vlanProto", "qinq"}}), 2, "vlanProto"},
      {"vlanProto without vlan", conf({{"vlanProto", "802.1Q"}}), 7, "vlanProto"},
      {"spoofchk yes", conf({{"spoofchk", "yes"}}), 7, "spoofchk"},
      {"spoofchk a boolean", conf({{"spoofchk", true}}), 7, "spoofchk"},
      {"trust maybe", conf({{"trust", "maybe"}}), 7, "trust"},
      {"link_state up", conf({{"link_state", "up"}}), 2, "link_state"},
      {"min_tx_rate -1", conf({{"min_tx_rate", -1}}), 7, "min_tx_rate"},
      {"min_tx_rate 2^32", conf({{"min_tx_rate", 4294967296LL}}), 7, "min_tx_rate"},
      {"max_tx_rate 2^32", conf({{"max_tx_rate", 4294967296LL}}), 7, "max_tx_rate"},
      {"min above max", conf({{"min_tx_rate", 200}, {"max_tx_rate", 100}}), 7, "min_tx_rate"},
  });
}

// The directories rdmanet writes, reads or removes under: absolute, never climbing.
TEST(LoadConf, RefusesRelativeOrClimbingDirectories) {
  expect_refused({
      {"stateDir relative", conf({{"stateDir", "state"}}), 7, "stateDir"},
      {"stateDir climbing", conf({{"stateDir", "/var/lib/../../etc"}}), 7, "stateDir"},
      {"sysfsRoot relative", conf({{"sysfsRoot", "sys"}}), 7, "sysfsRoot"},
      {"sysfsRoot climbing", conf({{"sysfsRoot", "/tmp/.."}}), 7, "sysfsRoot"},
      {"configfsRoot relative", conf({{"configfsRoot", ""}}), 7, "configfsRoot"},
      {"configfsRoot climbing", conf({{"configfsRoot", "/sys/../x"}}), 7, "configfsRoot"},
  });
}

// InfiniBand VF GUIDs: the pod's runtimeConfig.infinibandGUID, else args.cni.guid; the
// GUID goes to node and port alike.
TEST(LoadConf, GuidSources) {
  struct Case {
    json config;
    uint64_t guid;
    std::string field;
  } cases[] = {
      {conf({{"runtimeConfig", {{"infinibandGUID", "00:11:22:33:44:55:66:77"}}}}),
       0x0011223344556677ULL, "runtimeConfig.infinibandGUID"},
      {conf({{"args", {{"cni", {{"guid", "0x0011223344556678"}}}}}}), 0x0011223344556678ULL,
       "args.cni.guid"},
      {conf({{"runtimeConfig", {{"infinibandGUID", "0011:2233:4455:6677"}}},
             {"args", {{"cni", {{"guid", "0x0011223344556678"}}}}}}),
       0x0011223344556677ULL, "runtimeConfig.infinibandGUID"},
      // A VF key set before it stays the one messages name.
      {conf({{"trust", "on"}, {"runtimeConfig", {{"infinibandGUID", "00:11:22:33:44:55:66:77"}}}}),
       0x0011223344556677ULL, "trust"},
  };
  for (const auto& tc : cases) {
    auto c = load(tc.config);
    ASSERT_TRUE(c.ok()) << tc.config.dump() << ": " << c.error().msg();
    EXPECT_EQ(c->vf.node_guid, tc.guid) << tc.config.dump();
    EXPECT_EQ(c->vf.port_guid, tc.guid) << tc.config.dump();
    EXPECT_EQ(c->vf_field, tc.field) << tc.config.dump();
  }
  expect_refused({
      {"all-zero runtimeConfig GUID",
       conf({{"runtimeConfig", {{"infinibandGUID", "00:00:00:00:00:00:00:00"}}}}), 7,
       "runtimeConfig.infinibandGUID"},
      {"all-zero args GUID", conf({{"args", {{"cni", {{"guid", "0x0000000000000000"}}}}}}), 7,
       "args.cni.guid"},
      {"all-ones GUID", conf({{"args", {{"cni", {{"guid", "ff:ff:ff:ff:ff:ff:ff:ff"}}}}}}), 7,
       "args.cni.guid"},
      {"malformed GUID", conf({{"runtimeConfig", {{"infinibandGUID", "zz:11"}}}}), 7,
       "runtimeConfig.infinibandGUID"},
      {"GUID a number", conf({{"args", {{"cni", {{"guid", 17}}}}}}), 7, "args.cni.guid"},
  });
}

// In macvlan mode the pod gets a child of the device, not a VF: VF settings cannot apply.
TEST(LoadConf, RefusesVfSettingsInMacvlanMode) {
  expect_refused({
      {"vlan", conf({{"mode", "macvlan"}, {"vlan", 5}}), 7, "vlan"},
      {"trust", conf({{"mode", "macvlan"}, {"trust", "on"}}), 7, "trust"},
      {"max_tx_rate", conf({{"mode", "macvlan"}, {"max_tx_rate", 10}}), 7, "max_tx_rate"},
      {"GUID",
       conf({{"mode", "macvlan"},
             {"runtimeConfig", {{"infinibandGUID", "00:11:22:33:44:55:66:77"}}}}),
       7, "runtimeConfig.infinibandGUID"},
  });
  auto mac = load(conf({{"mode", "macvlan"}, {"mac", "02:00:00:00:00:01"}}));
  ASSERT_TRUE(mac.ok()) << "a MAC is no VF setting: " << mac.error().msg();
  EXPECT_TRUE(mac->vf.empty());
}

TEST(LoadConf, ModeAndMtu) {
  auto c = load(conf({{"mode", "macvlan"}, {"macvlanMode", "vepa"}, {"mtu", 9000}}));
  ASSERT_TRUE(c.ok()) << c.error().msg();
  EXPECT_EQ(c->mode, Mode::kMacvlan);
  EXPECT_EQ(c->macvlan_mode, netns::MacvlanMode::kVepa);
  EXPECT_EQ(c->mtu, 9000u);
  for (int mtu : {68, 65535}) {
    auto edge = load(conf({{"mtu", mtu}}));
    ASSERT_TRUE(edge.ok()) << mtu << ": " << edge.error().msg();
    EXPECT_EQ(edge->mtu, static_cast<uint32_t>(mtu));
  }
  expect_refused({
      {"mode ipvlan", conf({{"mode", "ipvlan"}}), 2, "mode"},
      {"macvlanMode source", conf({{"mode", "macvlan"}, {"macvlanMode", "source"}}), 2,
       "macvlanMode"},
      {"mtu 67", conf({{"mtu", 67}}), 7, "mtu"},
      {"mtu 65536", conf({{"mtu", 65536}}), 7, "mtu"},
      {"mtu a string", conf({{"mtu", "1500"}}), 7, "mtu"},
      {"multiRailSysctls a string", conf({{"multiRailSysctls", "no"}}), 7, "multiRailSysctls"},
  });
}

TEST(LoadConf, RdmaKeys) {
  struct Case {
    std::string text;
    RdmaIsolation isolation;
  } isolations[] = {{"auto", RdmaIsolation::kAuto},
                    {"required", RdmaIsolation::kRequired},
                    {"off", RdmaIsolation::kOff}};
  for (const auto& tc : isolations) {
    auto c = load(conf({{"rdmaIsolation", tc.text}}));
    ASSERT_TRUE(c.ok()) << tc.text << ": " << c.error().msg();
    EXPECT_EQ(c->rdma_isolation, tc.isolation) << tc.text;
  }
  // With softRoce the pod has an RDMA device of its own, even in macvlan mode.
  auto soft = load(conf({{"mode", "macvlan"}, {"rdmaIsolation", "required"}, {"softRoce", true}}));
  ASSERT_TRUE(soft.ok()) << soft.error().msg();
  EXPECT_TRUE(soft->soft_roce);
  EXPECT_EQ(soft->rdma_isolation, RdmaIsolation::kRequired);

  for (int seconds : {0, 300}) {
    auto c = load(conf({{"gidTimeout", seconds}, {"portTimeout", seconds}}));
    ASSERT_TRUE(c.ok()) << seconds << ": " << c.error().msg();
    EXPECT_EQ(c->gid_timeout_ms, seconds * 1000);
    EXPECT_EQ(c->port_timeout_ms, seconds * 1000);
  }
  auto defaults = load(conf({}));
  ASSERT_TRUE(defaults.ok()) << defaults.error().msg();
  EXPECT_EQ(defaults->port_timeout_ms, 5000);
  EXPECT_FALSE(defaults->require_active);
  auto strict = load(conf({{"requireActive", true}}));
  ASSERT_TRUE(strict.ok()) << strict.error().msg();
  EXPECT_TRUE(strict->require_active);
  auto paths = load(conf({{"configfsRoot", "/tmp/cfs"}, {"sysfsRoot", "/tmp/sys"}}));
  ASSERT_TRUE(paths.ok()) << paths.error().msg();
  EXPECT_EQ(paths->configfs_root, "/tmp/cfs");
  EXPECT_EQ(paths->sysfs_root, "/tmp/sys");

  expect_refused({
      {"rdmaIsolation strict", conf({{"rdmaIsolation", "strict"}}), 7, "rdmaIsolation"},
      {"required in macvlan mode", conf({{"mode", "macvlan"}, {"rdmaIsolation", "required"}}), 105,
       "rdmaIsolation"},
      {"softRoce a string", conf({{"softRoce", "yes"}}), 7, "softRoce"},
      {"gidTimeout -1", conf({{"gidTimeout", -1}}), 7, "gidTimeout"},
      {"gidTimeout 301", conf({{"gidTimeout", 301}}), 7, "gidTimeout"},
      {"gidTimeout in ms", conf({{"gidTimeout", 10000}}), 7, "gidTimeout"},
      {"portTimeout -1", conf({{"portTimeout", -1}}), 7, "portTimeout"},
      {"portTimeout in ms", conf({{"portTimeout", 5000}}), 7, "portTimeout"},
      {"portTimeout a string", conf({{"portTimeout", "5s"}}), 7, "portTimeout"},
      {"requireActive a string", conf({{"requireActive", "true"}}), 7, "requireActive"},
  });
}

// The class workloads are told to send with: roce.tos as given, else the DSCP roce.dcb maps
// to its (lowest) lossless priority, never a guess.
TEST(LoadConf, TheTrafficClassComesFromTosElseTheLosslessDscp) {
  auto tc = [](const json& roce) {
    auto c = load(conf({{"roce", roce}}));
    EXPECT_TRUE(c.ok()) << c.error().msg();
    return c ? roce_traffic_class(*c) : std::nullopt;
  };
  auto from_tos = tc({{"tos", 98}, {"dcb", {{"pfc", {3}}, {"dscpPriority", {{"26", 3}}}}}});
  ASSERT_TRUE(from_tos);
  EXPECT_EQ(from_tos->value, 98);
  EXPECT_EQ(from_tos->source, "roce.tos");

  auto from_dcb = tc(
      {{"dcb", {{"pfc", {5, 3}}, {"dscpPriority", {{"48", 6}, {"30", 5}, {"24", 3}, {"26", 3}}}}}});
  ASSERT_TRUE(from_dcb);
  EXPECT_EQ(from_dcb->value, (24 << 2) | 2) << "lowest DSCP of the lowest PFC priority, ECT(0)";
  EXPECT_EQ(from_dcb->source, "roce.dcb");

  EXPECT_FALSE(tc({{"dcb", {{"pfc", {3}}}}})) << "PFC without a DSCP map: PCP trust";
  EXPECT_FALSE(tc({{"dcb", {{"dscpPriority", {{"26", 3}}}}}})) << "no lossless priority named";
  EXPECT_FALSE(tc({{"dcb", {{"pfc", {4}}, {"dscpPriority", {{"26", 3}}}}}}))
      << "no DSCP maps to the PFC priority";
  EXPECT_FALSE(tc({{"mode", "v2"}}));

  auto control = load(conf({{"roce", {{"controlTos", 184}}}}));
  ASSERT_TRUE(control.ok()) << control.error().msg();
  EXPECT_EQ(control->control_tos, 184);
  EXPECT_FALSE(load(conf({{"roce", {{"controlTos", 256}}}})).ok());
}

TEST(LoadConf, RoceKeys) {
  auto c = load(conf({{"roce",
                       {{"tos", 106},
                        {"mode", "v1"},
                        {"dcb",
                         {{"policy", "apply"},
                          {"pfc", {3, 5}},
                          {"dscpPriority", {{"26", 3}, {"0", 0}, {"63", 7}}}}}}}}));
  ASSERT_TRUE(c.ok()) << c.error().msg();
  EXPECT_EQ(c->roce_cm.tos, 106);
  EXPECT_EQ(c->roce_cm.mode, rdma::RoceMode::kV1);
  EXPECT_TRUE(c->dcb_apply);
  EXPECT_EQ(c->dcb.pfc_enable, uint8_t{0x28});
  EXPECT_EQ(c->dcb.dscp_prio, (std::map<uint8_t, uint8_t>{{0, 0}, {26, 3}, {63, 7}}));

  auto edges =
      load(conf({{"roce", {{"tos", 255}, {"mode", "v2"}, {"dcb", {{"pfc", json::array()}}}}}}));
  ASSERT_TRUE(edges.ok()) << edges.error().msg();
  EXPECT_EQ(edges->roce_cm.tos, 255);
  EXPECT_EQ(edges->roce_cm.mode, rdma::RoceMode::kV2);
  EXPECT_FALSE(edges->dcb_apply) << "policy verify is the default";
  EXPECT_EQ(edges->dcb.pfc_enable, uint8_t{0}) << "an empty pfc list turns PFC off everywhere";

  auto verify = load(conf({{"roce", {{"dcb", {{"policy", "verify"}, {"pfc", {0, 7}}}}}}}));
  ASSERT_TRUE(verify.ok()) << verify.error().msg();
  EXPECT_FALSE(verify->dcb_apply);
  EXPECT_EQ(verify->dcb.pfc_enable, uint8_t{0x81});

  auto roce = [](const json& value) { return conf({{"roce", value}}); };
  auto dcb = [&](const json& value) { return roce({{"dcb", value}}); };
  expect_refused({
      {"roce a string", roce("v2"), 7, "roce"},
      {"roce.tos -1", roce({{"tos", -1}}), 7, "roce.tos"},
      {"roce.tos 256", roce({{"tos", 256}}), 7, "roce.tos"},
      {"roce.mode v3", roce({{"mode", "v3"}}), 7, "roce.mode"},
      {"roce.mode a number", roce({{"mode", 2}}), 7, "roce.mode"},
      {"roce.dcb a list", roce({{"dcb", {3}}}), 7, "roce.dcb"},
      {"roce.dcb.policy force", dcb({{"policy", "force"}}), 7, "roce.dcb.policy"},
      {"roce.dcb.pfc a number", dcb({{"pfc", 3}}), 7, "roce.dcb.pfc"},
      {"roce.dcb.pfc 8", dcb({{"pfc", {3, 8}}}), 7, "roce.dcb.pfc"},
      {"roce.dcb.pfc -1", dcb({{"pfc", {-1}}}), 7, "roce.dcb.pfc"},
      {"roce.dcb.pfc a string", dcb({{"pfc", {"3"}}}), 7, "roce.dcb.pfc"},
      {"DSCP 64", dcb({{"dscpPriority", {{"64", 3}}}}), 7, "roce.dcb.dscpPriority"},
      {"DSCP not a number", dcb({{"dscpPriority", {{"af31", 3}}}}), 7, "roce.dcb.dscpPriority"},
      {"DSCP -1", dcb({{"dscpPriority", {{"-1", 3}}}}), 7, "roce.dcb.dscpPriority"},
      {"priority 8", dcb({{"dscpPriority", {{"26", 8}}}}), 7, "roce.dcb.dscpPriority"},
      {"priority a string", dcb({{"dscpPriority", {{"26", "3"}}}}), 7, "roce.dcb.dscpPriority"},
      {"dscpPriority a list", dcb({{"dscpPriority", {26, 3}}}), 7, "roce.dcb.dscpPriority"},
  });
}

TEST(LoadConf, StateDirAndIpamTimeout) {
  auto c = load(conf({{"stateDir", "/run/rdmanet"}, {"ipamTimeout", 5}}));
  ASSERT_TRUE(c.ok()) << c.error().msg();
  EXPECT_EQ(c->state_dir, "/run/rdmanet");
  EXPECT_EQ(c->ipam_timeout_seconds, 5);
  for (int seconds : {1, 600}) {
    auto edge = load(conf({{"ipamTimeout", seconds}}));
    ASSERT_TRUE(edge.ok()) << seconds << ": " << edge.error().msg();
    EXPECT_EQ(edge->ipam_timeout_seconds, seconds);
  }
  expect_refused({
      {"relative stateDir", conf({{"stateDir", "var/lib/rdmanet"}}), 7, "stateDir"},
      {"empty stateDir", conf({{"stateDir", ""}}), 7, "stateDir"},
      {"stateDir a number", conf({{"stateDir", 1}}), 7, "stateDir"},
      {"ipamTimeout 0", conf({{"ipamTimeout", 0}}), 7, "ipamTimeout"},
      {"ipamTimeout 601", conf({{"ipamTimeout", 601}}), 7, "ipamTimeout"},
      {"ipamTimeout a string", conf({{"ipamTimeout", "60"}}), 7, "ipamTimeout"},
  });
}

}  // namespace
}  // namespace rdmanet::plugin
