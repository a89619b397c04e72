// ADD answers when the rail is usable (plugin/steps/port_wait.h): it waits for carrier on the
// pod interface, woken by the kernel's link notifications, for at most portTimeout; a rail
// still down then is reported down in the pod's files, or with requireActive fails ADD,
// rolled back. A veth stands in for the NIC and its far end for the wire: the end in the pod
// has carrier only while the far end is up. (The RDMA port's part runs in the kernel lab:
// tests/lab/scenarios/two-node.sh.)
#include <gtest/gtest.h>

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
  auto t0 = steady_clock::now();
  std::thread runtime([&] { add = cni("ADD", "ctr", pod_, rail({{"portTimeout", 20}})); });
  // The wire comes up while ADD waits (a NIC negotiating its link after the move).
  for (int i = 0; i < 500 && !link_exists("net1", pod_); ++i) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  std::this_thread::sleep_for(milliseconds(300));
  sh("ip link set " + peer_ + " up");
  runtime.join();
  const auto took = steady_clock::now() - t0;
  ASSERT_EQ(add.exit_code, 0) << add.out << add.err;
  EXPECT_GE(took, milliseconds(300)) << "ADD answered before the link came up";
  EXPECT_LT(took, std::chrono::seconds(10)) << "woken by the link's notification, not the timeout";
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
