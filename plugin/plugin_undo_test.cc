// End to end: DEL and rollback walk the steps an attachment recorded, last first; a step
// that never ran is never undone; an inverse that fails leaves the steps not yet undone
// recorded for the next DEL; records of rdmanet 0.1 (version 1) are still undone.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "plugin/testing/plugin_fixture.h"

namespace rdmanet::plugin::testing {
namespace {

namespace fs = std::filesystem;

class Undo : public Rdmanet {
 protected:
  // An IPAM plugin that logs each command it gets to dir_/ipam.log, runs host-local, and
  // fails DEL (code 11) while dir_/ipam-down exists.
  json logged_ipam_conf(const json& extra) {
    std::ofstream(dir_ + "/bin/logged-ipam")
        << "#!/bin/sh\necho \"$CNI_COMMAND\" >> " << dir_ << "/ipam.log\n"
        << "if [ \"$CNI_COMMAND\" = DEL ] && [ -e " << dir_ << "/ipam-down ]; then\n"
        << "  echo '{\"cniVersion\":\"1.0.0\",\"code\":11,\"msg\":\"ipam down\"}'; exit 1\n"
        << "fi\nexec " << dir_ << "/bin/host-local\n";
    fs::permissions(dir_ + "/bin/logged-ipam", fs::perms::owner_all);
    json c = conf(extra);
    c["ipam"]["type"] = "logged-ipam";
    return c;
  }

  std::string ipam_log() {
    std::ifstream in(dir_ + "/ipam.log");
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  // The one attachment record in the state dir.
  json record() {
    auto files = state_files();
    for (const auto& f : files) {
      if (f.find("/holds/") == std::string::npos && f.size() > 5 &&
          f.compare(f.size() - 5, 5, ".json") == 0) {
        std::ifstream in(f);
        return json::parse(in, nullptr, false);
      }
    }
    return json();
  }

  std::string record_path() {
    for (const auto& f : state_files()) {
      if (f.find("/holds/") == std::string::npos && f.size() > 5 &&
          f.compare(f.size() - 5, 5, ".json") == 0) {
        return f;
      }
    }
    return "";
  }

  static std::vector<std::string> step_names(const json& rec) {
    std::vector<std::string> out;
    for (const auto& s : rec.value("steps", json::array())) {
      out.push_back(s.value("step", ""));
    }
    return out;
  }
};

// The move fails (the pod has a net1 already): IPAM never ran, so rollback never asks it
// to DEL, and nothing of the attachment is left.
TEST_F(Undo, AStepThatNeverRanIsNeverUndone) {
  auto [port, peer] = make_ports();
  std::string pod = make_pod();
  sh("ip -n " + pod + " link add net1 type veth peer name x1");
  json c = logged_ipam_conf({{"device", port}});
  auto add = cni("ADD", "never", pod, c);
  ASSERT_EQ(add.exit_code, 1) << add.out;
  EXPECT_EQ(ipam_log(), "") << "IPAM was called although ADD failed before it";
  EXPECT_TRUE(link_exists(port));
  EXPECT_TRUE(state_files().empty());
}

// An inverse that fails stops the walk: the steps before it stay recorded (and in effect),
// DEL fails with the inverse's error, and the next DEL finishes the job. IPAM's release
// comes after the device is home: a failing IPAM DEL finds the device home already and
// keeps the lease (and the hold) for the next DEL.
TEST_F(Undo, AFailedInverseKeepsWhatIsNotUndoneForTheNextDel) {
  auto [port, peer] = make_ports();
  std::string mtu = link_field(port, "mtu");
  std::string pod = make_pod();
  json c = logged_ipam_conf({{"device", port}, {"mtu", 1400}});
  ASSERT_EQ(cni("ADD", "retry", pod, c).exit_code, 0);
  EXPECT_EQ(step_names(record()), (std::vector<std::string>{"hold-device", "netdev-move", "ipam",
                                                            "source-routing", "pod-info"}));

  std::ofstream(dir_ + "/ipam-down") << "";
  auto del = cni("DEL", "retry", pod, c);
  EXPECT_EQ(del.exit_code, 1) << del.out;
  EXPECT_EQ(del.code(), 11) << del.out;
  EXPECT_NE(del.msg().find("undo ipam"), std::string::npos) << del.msg();
  EXPECT_TRUE(link_exists(port)) << "the device is home before its address is released";
  EXPECT_EQ(link_field(port, "mtu"), mtu);
  EXPECT_EQ(step_names(record()), (std::vector<std::string>{"hold-device", "ipam"}));
  EXPECT_EQ(leases().size(), 1U) << "the lease stays until IPAM's DEL works";

  fs::remove(dir_ + "/ipam-down");
  auto again = cni("DEL", "retry", pod, c);
  EXPECT_EQ(again.exit_code, 0) << again.out << again.err;
  EXPECT_TRUE(link_exists(port));
  EXPECT_EQ(link_field(port, "mtu"), mtu);
  EXPECT_TRUE(leases().empty());
  EXPECT_TRUE(state_files().empty());
}

// The first step's inverse fails (its hold file cannot be removed: a directory stands in
// its place): everything recorded after it is undone, only hold-device stays recorded, and
// the next DEL drops it.
TEST_F(Undo, APartialUndoRecordsExactlyTheStepsLeft) {
  auto [port, peer] = make_ports();
  std::string pod = make_pod();
  json c = conf({{"device", port}});
  ASSERT_EQ(cni("ADD", "partial", pod, c).exit_code, 0);
  std::string hold;
  for (const auto& f : state_files()) {
    if (f.find("/holds/") != std::string::npos) {
      hold = f;
    }
  }
  ASSERT_FALSE(hold.empty());
  fs::remove(hold);
  fs::create_directories(hold + "/in-the-way");

  auto del = cni("DEL", "partial", pod, c);
  EXPECT_EQ(del.exit_code, 1) << del.out;
  EXPECT_NE(del.msg().find("undo hold-device"), std::string::npos) << del.msg();
  EXPECT_EQ(step_names(record()), (std::vector<std::string>{"hold-device"}));
  EXPECT_TRUE(link_exists(port)) << "the steps after the hold were undone";
  EXPECT_TRUE(leases().empty());

  fs::remove_all(hold);
  auto again = cni("DEL", "partial", pod, c);
  EXPECT_EQ(again.exit_code, 0) << again.out << again.err;
  EXPECT_TRUE(state_files().empty());
}

// Two ports of one wire, each given to a pod (the kernel lab's shared-pingpong does this):
// the second port's peer is in the first pod at ADD, and back in the host once the first
// pod's DEL has brought it home. The second DEL still finds its device through that peer.
TEST_F(Undo, BothEndsOfAWireGivenToPodsComeHomeInEitherOrder) {
  for (bool first_a : {true, false}) {
    auto [port_a, port_b] = make_ports();
    std::string pod_a = make_pod();
    std::string pod_b = make_pod();
    json a = conf({{"device", port_a}});
    json b = conf({{"device", port_b}});
    ASSERT_EQ(cni("ADD", "wire-a", pod_a, a).exit_code, 0);
    ASSERT_EQ(cni("ADD", "wire-b", pod_b, b).exit_code, 0);
    auto first = first_a ? cni("DEL", "wire-a", pod_a, a) : cni("DEL", "wire-b", pod_b, b);
    auto second = first_a ? cni("DEL", "wire-b", pod_b, b) : cni("DEL", "wire-a", pod_a, a);
    EXPECT_EQ(first.exit_code, 0) << first.out << first.err;
    EXPECT_EQ(second.exit_code, 0) << second.out << second.err;
    EXPECT_TRUE(link_exists(port_a)) << port_a << " is not home";
    EXPECT_TRUE(link_exists(port_b)) << port_b << " is not home: " << sh("ip -br link", false);
    EXPECT_TRUE(state_files().empty());
    EXPECT_TRUE(leases().empty());
  }
}

// GC goes on past an attachment it cannot undo, and forwards GC to the IPAM plugin (the
// spec) with that attachment among the valid ones; its error names what it left.
TEST_F(Undo, GcGoesOnPastAFailureAndStillForwardsToIpam) {
  auto [port_a, peer_a] = make_ports();
  auto [port_b, peer_b] = make_ports();
  std::string pod_a = make_pod();
  std::string pod_b = make_pod();
  json a = logged_ipam_conf({{"device", port_a}});
  json b = logged_ipam_conf({{"device", port_b}});
  ASSERT_EQ(cni("ADD", "gc-a", pod_a, a).exit_code, 0);
  ASSERT_EQ(cni("ADD", "gc-b", pod_b, b).exit_code, 0);
  const std::string name_b = port_b;  // a lambda cannot capture a structured binding
  std::string hold_b = dir_ + "/state/holds/name-" + [&] {
    std::string hex;
    for (unsigned char c : name_b) {
      char buf[3];
      snprintf(buf, sizeof buf, "%02x", c);
      hex += buf;
    }
    return hex;
  }();
  ASSERT_TRUE(fs::exists(hold_b));
  fs::remove(hold_b);
  fs::create_directories(hold_b + "/in-the-way");

  json gc = logged_ipam_conf(json::object());
  gc["cniVersion"] = "1.1.0";
  gc["cni.dev/valid-attachments"] = json::array();
  auto out = cni("GC", "", "", gc, "");
  EXPECT_EQ(out.exit_code, 1) << out.out;
  EXPECT_NE(out.msg().find("container gc-b"), std::string::npos) << out.msg();
  EXPECT_TRUE(link_exists(port_a)) << "GC stopped at the failing attachment";
  EXPECT_TRUE(link_exists(port_b)) << "b's steps after the hold were undone too";
  EXPECT_NE(ipam_log().find("GC"), std::string::npos) << "IPAM GC was not forwarded";
  fs::remove_all(hold_b);
  auto again = cni("GC", "", "", gc, "");
  EXPECT_EQ(again.exit_code, 0) << again.out << again.err;
  EXPECT_TRUE(state_files().empty());
}

// A node upgraded with pods running: their records are rdmanet 0.1's snapshots (version
// 1). DEL reads one as the steps it implies and restores the device as 0.1's DEL did.
TEST_F(Undo, DelOfAVersion1RecordRestoresTheDevice) {
  auto [port, peer] = make_ports();
  sh("ip link set " + port + " alias rail-0-port");
  sh("ip link set " + port + " up");
  std::string mac = link_field(port, "address");
  std::string pod = make_pod();
  json c = conf({{"device", port}, {"mtu", 1400}, {"mac", "02:00:0a:7b:00:42"}});
  ASSERT_EQ(cni("ADD", "old", pod, c).exit_code, 0);
  json v2 = record();
  ASSERT_TRUE(v2.is_object());
  json move;
  for (const auto& s : v2["steps"]) {
    if (s["step"] == "netdev-move") {
      move = s;
    }
  }
  ASSERT_TRUE(move.is_object());
  // What rdmanet 0.1 wrote for the same attachment.
  json v1 = {{"version", 1},
             {"vf", nullptr},
             {"rdma", nullptr},
             {"deviceInfoFile", ""},
             {"network", v2["network"]},
             {"containerID", v2["containerID"]},
             {"ifname", v2["ifname"]},
             {"netns", v2["netns"]},
             {"netnsCookie", v2["netnsCookie"]},
             {"mode", "netdev"},
             {"phase", "added"},
             {"device",
              {{"name", move["hostName"]},
               {"index", move["index"]},
               {"mac", move["mac"]},
               {"mtu", move["mtu"]},
               {"alias", move["alias"]},
               {"altnames", move["altnames"]},
               {"pci", ""},
               {"key", v2["deviceKey"]},
               {"up", move["wasUp"]}}},
             {"config", v2["config"]},
             {"result", v2["result"]}};
  std::ofstream(record_path()) << v1.dump(2);

  auto del = cni("DEL", "old", pod, c);
  EXPECT_EQ(del.exit_code, 0) << del.out << del.err;
  EXPECT_TRUE(link_exists(port));
  EXPECT_EQ(link_field(port, "address"), mac);
  EXPECT_EQ(link_field(port, "mtu"), "1500");
  EXPECT_EQ(link_field(port, "ifalias"), "\"rail-0-port\"");
  EXPECT_NE(link_field(port, "flags").find("\"UP\""), std::string::npos);
  EXPECT_TRUE(leases().empty());
  EXPECT_TRUE(state_files().empty()) << "record or hold left";
}

}  // namespace
}  // namespace rdmanet::plugin::testing
