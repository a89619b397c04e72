#include "plugin/record.h"

#include <gtest/gtest.h>

#include "cni/error_code.h"

namespace rdmanet::plugin {
namespace {

using nlohmann::json;

TEST(Record, RoundTripsIdentityStepsAndReport) {
  AttachmentRecord r;
  r.network = "rail0";
  r.container_id = "abc";
  r.ifname = "net1";
  r.netns = "/run/netns/p";
  r.netns_cookie = 1ULL << 40;
  r.netns_id = 7;
  r.mode = Mode::kMacvlan;
  r.phase = Phase::kAdded;
  r.device_key = "name-6574";
  r.device_name = "et";
  r.steps = {{StepKind::kMacvlan, {{"name", "net1"}}}, {StepKind::kIpam, json::object()}};
  r.rdma = RdmaReport{"rxe_net1_1a2b3c4d", 4, 1, "shared", {{"device", "x"}}};
  r.config = R"({"cniVersion":"1.0.0"})";
  r.result = {{"cniVersion", "1.1.0"}};

  json doc = r.to_json();
  EXPECT_EQ(doc["version"], 2);
  EXPECT_EQ(doc["mode"], "macvlan");
  EXPECT_EQ(doc["phase"], "added");
  EXPECT_EQ(doc["steps"][0]["step"], "macvlan");
  EXPECT_EQ(doc["steps"][0]["name"], "net1");
  auto back = AttachmentRecord::from_json(json::parse(doc.dump()), "f");
  ASSERT_TRUE(back) << back.error().msg();
  EXPECT_EQ(back->id(), r.id());
  EXPECT_EQ(back->netns_cookie, r.netns_cookie);
  EXPECT_EQ(back->netns_id, 7);
  json without_id = doc;
  without_id.erase("netnsId");
  EXPECT_EQ(AttachmentRecord::from_json(without_id, "f")->netns_id, -1)
      << "a record made without an id has none";
  EXPECT_EQ(back->mode, Mode::kMacvlan);
  EXPECT_EQ(back->phase, Phase::kAdded);
  EXPECT_EQ(back->device_key, "name-6574");
  ASSERT_EQ(back->steps.size(), 2U);
  EXPECT_EQ(back->steps[0].kind, StepKind::kMacvlan);
  EXPECT_EQ(back->steps[0].data, json({{"name", "net1"}}));
  EXPECT_EQ(back->steps[1].kind, StepKind::kIpam);
  ASSERT_TRUE(back->rdma);
  EXPECT_EQ(back->rdma->index, 4);
  EXPECT_EQ(back->rdma->gids["device"], "x");
  EXPECT_EQ(back->config, r.config);
  EXPECT_EQ(back->result, r.result);
  EXPECT_NE(back->step(StepKind::kIpam), nullptr);
  EXPECT_EQ(back->step(StepKind::kNetdevMove), nullptr);
}

TEST(Record, UnknownStepsAndVersionsAreStateErrorsNotSilentlyDropped) {
  json doc = {{"version", 2}, {"network", "n"}, {"steps", {{{"step", "teleport"}}}}};
  auto r = AttachmentRecord::from_json(doc, "f");
  ASSERT_FALSE(r);
  EXPECT_EQ(cni::error_code(r.error()), 107);
  EXPECT_NE(r.error().msg().find("teleport"), std::string::npos) << r.error().msg();
  doc = {{"version", 3}, {"network", "n"}};
  r = AttachmentRecord::from_json(doc, "f");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().msg().find("version 3"), std::string::npos) << r.error().msg();
  doc = {{"version", 2}, {"network", "n"}, {"mode", "bridge"}};
  EXPECT_FALSE(AttachmentRecord::from_json(doc, "f"));
}

// What rdmanet 0.1 wrote (a snapshot of the device, its VF and RDMA device) reads as the
// steps that undo the same things, so an upgraded node can DEL the pods of the old release.
TEST(Record, Version1FilesReadAsTheirSteps) {
  json v1 = json::parse(R"({
    "version": 1,
    "network": "rail0", "containerID": "abc", "ifname": "net1", "netns": "/run/netns/p",
    "netnsCookie": 4096, "mode": "netdev", "phase": "added",
    "device": {"name": "ens1f0v3", "index": 7, "mac": "02:00:00:00:00:07", "mtu": 9000,
               "alias": "", "altnames": ["enp59s0f0v3"], "pci": "0000:3b:00.3",
               "key": "pci-0000:3b:00.3", "up": true},
    "vf": {"pfPci": "0000:3b:00.0", "pfName": "ens1f0", "sysfsRoot": "/sys", "index": 3,
           "original": {"mac": "02:00:00:00:00:01", "vlan": 12, "qos": 0, "vlanProto": 34984,
                        "spoofchk": true, "trust": false, "linkState": 2, "minTxRate": 0,
                        "maxTxRate": 100, "nodeGuid": "00:11:22:33:44:55:66:77"}},
    "rdma": {"device": "rxe_net1_1a2b3c4d", "index": 4, "port": 1, "created": true,
             "moved": true, "nodeMode": "exclusive", "configfsRoot": "/sys/kernel/config",
             "gids": {"device": "rxe_net1_1a2b3c4d"}},
    "deviceInfoFile": "/var/run/k8s.cni.cncf.io/devinfo/cni/x-net1",
    "config": "{}", "result": {"cniVersion": "1.1.0"}})");
  auto r = AttachmentRecord::from_json(v1, "old");
  ASSERT_TRUE(r) << r.error().msg();
  EXPECT_EQ(r->netns_cookie, 4096U);
  EXPECT_EQ(r->device_key, "pci-0000:3b:00.3");
  EXPECT_EQ(r->device_name, "ens1f0v3");
  std::vector<StepKind> kinds;
  for (const auto& s : r->steps) {
    kinds.push_back(s.kind);
  }
  // Undone last first: device-info, RDMA device home, soft-RoCE deleted, IPAM, netdev home,
  // VF settings, hold (version 1 released IPAM after the netdev; either order is safe).
  EXPECT_EQ(kinds,
            (std::vector<StepKind>{StepKind::kHoldDevice, StepKind::kVfSettings,
                                   StepKind::kNetdevMove, StepKind::kIpam, StepKind::kSoftRoce,
                                   StepKind::kRdmaMove, StepKind::kDeviceInfo}));
  const json& netdev = r->step(StepKind::kNetdevMove)->data;
  EXPECT_EQ(netdev["hostName"], "ens1f0v3");
  EXPECT_EQ(netdev["index"], 7);
  EXPECT_EQ(netdev["mtu"], 9000);
  EXPECT_EQ(netdev["wasUp"], true);
  EXPECT_EQ(netdev["altnames"], json({"enp59s0f0v3"}));
  const json& vf = r->step(StepKind::kVfSettings)->data;
  EXPECT_EQ(vf["vf"], 3);
  EXPECT_EQ(vf["pfPci"], "0000:3b:00.0");
  EXPECT_EQ(vf["original"]["linkState"], "disable");
  EXPECT_EQ(vf["original"]["vlanProto"], 34984);
  EXPECT_EQ(r->step(StepKind::kRdmaMove)->data["index"], 4);
  EXPECT_EQ(r->step(StepKind::kSoftRoce)->data["device"], "rxe_net1_1a2b3c4d");
  EXPECT_EQ(r->step(StepKind::kDeviceInfo)->data["path"],
            "/var/run/k8s.cni.cncf.io/devinfo/cni/x-net1");
  ASSERT_TRUE(r->rdma);
  EXPECT_EQ(r->rdma->index, 4);

  json macvlan = {{"version", 1},       {"network", "n"},
                  {"containerID", "c"}, {"ifname", "net1"},
                  {"mode", "macvlan"},  {"device", {{"name", "eth0"}, {"key", "name-65"}}}};
  auto m = AttachmentRecord::from_json(macvlan, "old");
  ASSERT_TRUE(m) << m.error().msg();
  ASSERT_EQ(m->steps.size(), 2U);
  EXPECT_EQ(m->steps[0].kind, StepKind::kMacvlan);
  EXPECT_EQ(m->steps[1].kind, StepKind::kIpam);
}

std::vector<StepKind> kinds(const std::vector<StepRecord>& steps) {
  std::vector<StepKind> out;
  out.reserve(steps.size());
  for (const auto& s : steps) {
    out.push_back(s.kind);
  }
  return out;
}

// The steps of a record with these step entries, as DEL reads them (the codec decides each
// step's kind, an rdma-move's from where ADD said it took it).
std::vector<StepRecord> recorded(const json& steps) {
  json doc = {{"version", 2}, {"network", "n"}, {"steps", steps}};
  auto r = AttachmentRecord::from_json(doc, "f");
  EXPECT_TRUE(r) << r.error().msg();
  return r ? r->steps : std::vector<StepRecord>();
}

// Undo takes the steps last first, except that an InfiniBand device that went in before
// its netdev goes home before it too; a RoCE device (after its netdev) keeps the plain order,
// and a record already put in undo order stays as it is.
TEST(Record, AnInfinibandDeviceGoesHomeBeforeItsNetdev) {
  std::vector<StepRecord> ib = recorded({{{"step", "hold-device"}},
                                         {{"step", "vf-guids"}},
                                         {{"step", "rdma-move"}, {"beforeNetdev", true}},
                                         {{"step", "netdev-move"}},
                                         {{"step", "vf-settings"}},
                                         {{"step", "ipam"}}});
  order_for_undo(ib);
  const std::vector<StepKind> want = {
      StepKind::kHoldDevice,           StepKind::kVfGuids,   StepKind::kIpam, StepKind::kNetdevMove,
      StepKind::kRdmaMoveBeforeNetdev, StepKind::kVfSettings};
  EXPECT_EQ(kinds(ib), want);
  order_for_undo(ib);
  EXPECT_EQ(kinds(ib), want) << "ordering twice (a DEL after a partial undo) changes nothing";

  std::vector<StepRecord> roce =
      recorded({{{"step", "netdev-move"}}, {{"step", "rdma-move"}, {"beforeNetdev", false}}});
  std::vector<StepRecord> old =
      recorded({{{"step", "rdma-move"}, {"device", "mlx5_0"}}, {{"step", "netdev-move"}}});
  order_for_undo(roce);
  order_for_undo(old);
  EXPECT_EQ(kinds(roce), (std::vector<StepKind>{StepKind::kNetdevMove, StepKind::kRdmaMove}));
  EXPECT_EQ(kinds(old),
            (std::vector<StepKind>{StepKind::kRdmaMoveAsWritten, StepKind::kNetdevMove}))
      << "a record without beforeNetdev is undone as it was written";
}

// The address goes, and the pod's files about the device, after the device is home (undo
// pops from the back: these steps sit before the device steps), in both modes; what ADD took
// after IPAM is undone first.
TEST(Record, TheAddressIsReleasedAfterTheDeviceIsHome) {
  std::vector<StepRecord> netdev = recorded({{{"step", "hold-device"}},
                                             {{"step", "netdev-move"}},
                                             {{"step", "vf-settings"}},
                                             {{"step", "ipam"}},
                                             {{"step", "source-routing"}},
                                             {{"step", "soft-roce"}},
                                             {{"step", "rdma-move"}, {"beforeNetdev", false}},
                                             {{"step", "pod-info"}},
                                             {{"step", "device-info"}}});
  order_for_undo(netdev);
  const std::vector<StepKind> want = {
      StepKind::kHoldDevice,    StepKind::kIpam,       StepKind::kPodInfo,
      StepKind::kDeviceInfo,    StepKind::kNetdevMove, StepKind::kVfSettings,
      StepKind::kSourceRouting, StepKind::kSoftRoce,   StepKind::kRdmaMove};
  EXPECT_EQ(kinds(netdev), want);
  order_for_undo(netdev);
  EXPECT_EQ(kinds(netdev), want) << "ordering twice changes nothing";
  std::vector<StepRecord> macvlan = recorded({{{"step", "macvlan"}}, {{"step", "ipam"}}});
  order_for_undo(macvlan);
  EXPECT_EQ(kinds(macvlan), (std::vector<StepKind>{StepKind::kIpam, StepKind::kMacvlan}));
  std::vector<StepRecord> home = recorded({{{"step", "hold-device"}}, {{"step", "ipam"}}});
  order_for_undo(home);
  EXPECT_EQ(kinds(home), (std::vector<StepKind>{StepKind::kHoldDevice, StepKind::kIpam}))
      << "with the device home already, nothing moves";
}

}  // namespace
}  // namespace rdmanet::plugin
