// ADD answers when the rail is usable (plugin/steps/port_wait.h): it waits for carrier on the
// pod interface, woken by the kernel's link notifications, for at most portTimeout; a rail
// still down then is reported down in the pod's files, or with requireActive fails ADD,
// rolled back. A veth stands in for the NIC and its far end for the wire: the end in the pod
// has carrier only while the far end is up. (The RDMA port's part runs in the kernel lab:
// tests/lab/scenarios/two-node.sh.)
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "plugin/testing/plugin_fixture.h"

namespace rdmanet::plugin::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

class RailLink : public Rdmanet {
 protected:
  // A NIC whose wire is down: its far end down.
  void wire_down() {
    std::tie(port_, peer_) = make_ports();
    sh("ip link set " + peer_ + " down");
    pod_ = make_pod();
  }
  json rail(const json& extra = json::object()) {
    json c = conf({{"device", port_}});
    c.update(extra);
    return c;
  }
  json rails_json() {
    std::ifstream in(dir_ + "/pods/uid-ctr/rails.json");
    return json::parse(in, nullptr, false);
  }
  std::string rdma_env() {
    std::ifstream in(dir_ + "/pods/uid-ctr/rdma.env");
    return {std::istreambuf_iterator<char>(in), {}};
  }

  std::string port_, peer_, pod_;
};

TEST_F(RailLink, AddAnswersOnceTheLinkComesUp) {
  wire_down();
  Output add;
  steady_clock::time_point answered;
  std::thread runtime([&] {
    add = cni("ADD", "ctr", pod_, rail({{"portTimeout", 20}}));
    answered = steady_clock::now();
  });
  // ADD is in its wait once the pod interface has its address (the steps before it are done).
  for (int i = 0;
       i < 1000 &&
       sh("ip -n " + pod_ + " -4 addr show dev net1 2>/dev/null", false).find("10.123.0.2/24") ==
           std::string::npos;
       ++i) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  std::this_thread::sleep_for(milliseconds(300));
  const auto wire_up = steady_clock::now();
  sh("ip link set " + peer_ + " up");  // a NIC negotiating its link after the move
  runtime.join();
  ASSERT_EQ(add.exit_code, 0) << add.out << add.err;
  EXPECT_GE(answered, wire_up) << "ADD answered before the link came up";
  EXPECT_LT(answered - wire_up, std::chrono::seconds(10))
      << "woken by the link's notification, not the timeout";
  json doc = rails_json();
  ASSERT_TRUE(doc.is_object());
  EXPECT_EQ(doc["rails"][0]["state"], "up") << doc.dump();
  EXPECT_EQ(doc["rails"][0]["link"]["carrier"], true) << doc.dump();
  EXPECT_NE(rdma_env().find("RDMANET_RAIL0_STATE=up\n"), std::string::npos) << rdma_env();
  EXPECT_EQ(cni("DEL", "ctr", pod_, rail()).exit_code, 0);
}

TEST_F(RailLink, AWireThatStaysDownIsReportedDownAndAddGoesOn) {
  wire_down();
  auto t0 = steady_clock::now();
  auto add = cni("ADD", "ctr", pod_, rail({{"portTimeout", 1}}));
  ASSERT_EQ(add.exit_code, 0) << add.out << add.err;
  EXPECT_GE(steady_clock::now() - t0, milliseconds(1000)) << "ADD did not wait portTimeout";
  EXPECT_NE(add.err.find("rail net1 is down: no carrier on net1 after portTimeout 1 s"),
            std::string::npos)
      << add.err;
  json doc = rails_json();
  ASSERT_TRUE(doc.is_object());
  EXPECT_EQ(doc["rails"][0]["state"], "down") << doc.dump();
  EXPECT_EQ(doc["rails"][0]["link"]["carrier"], false) << doc.dump();
  EXPECT_NE(rdma_env().find("RDMANET_RAIL0_STATE=down\n"), std::string::npos) << rdma_env();
  EXPECT_TRUE(link_exists("net1", pod_)) << "the rail stays attached";
  EXPECT_EQ(cni("DEL", "ctr", pod_, rail()).exit_code, 0);
}

TEST_F(RailLink, RequireActiveFailsAndRollsBack) {
  wire_down();
  const std::string mac = link_field(port_, "address");
  auto add = cni("ADD", "ctr", pod_, rail({{"portTimeout", 1}, {"requireActive", true}}));
  ASSERT_NE(add.exit_code, 0) << add.out;
  EXPECT_EQ(add.code(), 108) << add.out;
  EXPECT_NE(add.msg().find("no carrier on net1 after portTimeout 1 s"), std::string::npos)
      << add.msg();
  // Rolled back like any failed ADD: the NIC home under its name, nothing recorded or leased.
  EXPECT_TRUE(link_exists(port_)) << "the NIC did not come home";
  EXPECT_EQ(link_field(port_, "address"), mac);
  EXPECT_FALSE(link_exists("net1", pod_));
  EXPECT_TRUE(state_files().empty());
  EXPECT_TRUE(leases().empty());
  EXPECT_FALSE(fs::exists(dir_ + "/pods/uid-ctr/rails.json"));
  EXPECT_EQ(cni("DEL", "ctr", pod_, rail()).exit_code, 0) << "DEL after a failed ADD";
}

// portTimeout 0: one look, no wait; the rail's state is still reported.
TEST_F(RailLink, ZeroLooksOnceWithoutWaiting) {
  wire_down();
  auto add = cni("ADD", "ctr", pod_, rail({{"portTimeout", 0}}));
  ASSERT_EQ(add.exit_code, 0) << add.out << add.err;
  EXPECT_EQ(rails_json()["rails"][0]["state"], "down");
  EXPECT_EQ(cni("DEL", "ctr", pod_, rail()).exit_code, 0);

  auto strict = cni("ADD", "ctr", pod_, rail({{"portTimeout", 0}, {"requireActive", true}}));
  EXPECT_EQ(strict.code(), 108) << strict.out;
  EXPECT_TRUE(state_files().empty());
}

// The pod may hold CAP_NET_ADMIN in its netns: while ADD waits, a process there multicasts
// forged notifications that net1 has carrier. ADD takes only the kernel's word: the rail
// stays down.
TEST_F(RailLink, ForgedNotificationsFromThePodDoNotMakeARailUp) {
  wire_down();
  const std::string forger = R"PY(
import socket, struct, sys, time
ifindex = int(open("/sys/class/net/net1/ifindex").read())
s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
flags = 0x1 | 0x40 | 0x10000  # IFF_UP | IFF_RUNNING | IFF_LOWER_UP
msg = struct.pack("=IHHII", 32, 16, 0, 0, 0) + struct.pack("=BxHiII", 0, 1, ifindex, flags, 0xffffffff)
end = time.time() + 2.5
while time.time() < end:
    s.sendto(msg, (0, 1))  # to RTMGRP_LINK
    time.sleep(0.001)
)PY";
  std::ofstream(dir_ + "/forger.py") << forger;
  std::atomic<bool> stop{false};
  std::thread pod([&] {
    while (!link_exists("net1", pod_) && !stop) {
      std::this_thread::sleep_for(milliseconds(5));
    }
    sh("ip netns exec " + pod_ + " python3 " + dir_ + "/forger.py > " + dir_ + "/forger.log 2>&1",
       false);
  });
  auto add = cni("ADD", "ctr", pod_, rail({{"portTimeout", 2}}));
  stop = true;
  pod.join();
  ASSERT_EQ(add.exit_code, 0) << add.out << add.err;
  EXPECT_EQ(sh("cat " + dir_ + "/forger.log", false), "") << "the forger did not run";
  json doc = rails_json();
  ASSERT_TRUE(doc.is_object());
  EXPECT_EQ(doc["rails"][0]["state"], "down") << "a forged notification was taken: " << doc.dump();
  EXPECT_EQ(doc["rails"][0]["link"]["carrier"], false) << doc.dump();
  EXPECT_EQ(cni("DEL", "ctr", pod_, rail()).exit_code, 0);
}

// macvlan: the child has its parent's carrier, so a parent without one is a rail that is down.
TEST_F(RailLink, AMacvlanRailFollowsItsParent) {
  wire_down();
  auto add = cni("ADD", "ctr", pod_,
                 rail({{"mode", "macvlan"}, {"portTimeout", 1}, {"requireActive", true}}));
  EXPECT_EQ(add.code(), 108) << add.out;
  EXPECT_TRUE(state_files().empty());
  sh("ip link set " + peer_ + " up");
  auto up = cni("ADD", "ctr", pod_, rail({{"mode", "macvlan"}, {"requireActive", true}}));
  ASSERT_EQ(up.exit_code, 0) << up.out << up.err;
  EXPECT_EQ(rails_json()["rails"][0]["state"], "up");
  EXPECT_EQ(cni("DEL", "ctr", pod_, rail({{"mode", "macvlan"}})).exit_code, 0);
}

}  // namespace
}  // namespace rdmanet::plugin::testing
