// End to end: a device is held by one pod at a time; holds of pods that are gone are
// reclaimed, racing and concurrent commands hand a device to exactly one pod, and a device
// always comes home on DEL (after a reboot, or when its name was taken).
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "plugin/testing/plugin_fixture.h"

namespace rdmanet::plugin::testing {
namespace {

TEST_F(Rdmanet, ADeviceHeldByALivePodIsBusy) {
  auto [port, peer] = make_ports();
  std::string pod1 = make_pod();
  std::string pod2 = make_pod();
  ASSERT_EQ(cni("ADD", "first", pod1, conf({{"device", port}})).exit_code, 0);
  auto second = cni("ADD", "second", pod2, conf({{"device", port}}));
  EXPECT_EQ(second.exit_code, 1);
  EXPECT_EQ(second.code(), 101) << second.out;
  // Named as the user knows them: the device, and the holder's pod from its CNI_ARGS.
  EXPECT_NE(second.msg().find("device " + port + " (device=" + port + ") is held by pod " +
                              "default/pod-first (container first, net1 in network rail0)"),
            std::string::npos)
      << second.msg();
  EXPECT_TRUE(link_exists("net1", pod1)) << "the failed ADD disturbed the holder";
}

TEST_F(Rdmanet, AStaleHoldIsReclaimed) {
  // This test puts the pod interface into the host netns: a unique name keeps
  // parallel tests apart.
  const std::string ifname = "n" + tag_;
  auto [port, peer] = make_ports();
  std::string hw = json::parse(link_field(port, "address"));
  std::string pod1 = make_pod();
  ASSERT_EQ(cni("ADD", "old", pod1, conf({{"hwaddr", hw}}), ifname).exit_code, 0);
  // The node loses the old pod without DEL. The kernel returns physical
  // devices to the host when their netns dies; a veth would die with it, so
  // do what the kernel does by hand: move it out under its pod name.
  sh("ip -n " + pod1 + " link set " + ifname + " netns 1");
  sh("ip netns del " + pod1);
  ASSERT_TRUE(link_exists(ifname));
  std::string pod2 = make_pod();
  auto add = cni("ADD", "new", pod2, conf({{"hwaddr", hw}}), ifname);
  ASSERT_EQ(add.exit_code, 0) << add.out << add.err;
  EXPECT_TRUE(link_exists(ifname, pod2));
  EXPECT_FALSE(link_exists(ifname));
  EXPECT_EQ(leases().size(), 1u) << "the stale attachment's lease was not released";
  ASSERT_EQ(cni("DEL", "new", pod2, conf({{"hwaddr", hw}}), ifname).exit_code, 0);
  EXPECT_TRUE(link_exists(port)) << "device not restored under its original name";
  EXPECT_TRUE(state_files().empty());
}

// A pod netns path can come to name another namespace: a netns recreated under the same
// name, or /proc/<pid>/ns/net after pid reuse. DEL must not touch the new one's links.
TEST_F(Rdmanet, DelNeverActsInANewNamespaceAtTheOldPath) {
  auto [parent, peer] = make_ports();
  std::string pod = make_pod();
  json c = conf({{"mode", "macvlan"}, {"device", parent}});
  ASSERT_EQ(cni("ADD", "ctr-old", pod, c).exit_code, 0);
  sh("ip netns del " + pod);  // the macvlan child dies with it; no DEL yet
  // Once the kernel has freed the old namespace, a new one often gets its inode
  // number: only the netns cookie tells the two apart.
  usleep(200 * 1000);
  sh("ip netns add " + pod);
  sh("ip link add link " + parent + " name rt" + tag_ + "n type macvlan mode bridge");
  sh("ip link set rt" + tag_ + "n netns " + pod + " name net1");

  auto del = cni("DEL", "ctr-old", pod, c);
  ASSERT_EQ(del.exit_code, 0) << del.out << del.err;
  EXPECT_TRUE(link_exists("net1", pod)) << "DEL deleted a link of the namespace now at the path";
  EXPECT_NE(del.err.find("no longer the pod's"), std::string::npos) << del.err;
  EXPECT_TRUE(state_files().empty());
  EXPECT_TRUE(leases().empty());
}

// The same for a device hold: a holder whose netns path now names another namespace is
// gone, so its device is reclaimed rather than busy forever.
TEST_F(Rdmanet, AHoldWhoseNetnsPathWasReusedIsReclaimed) {
  const std::string ifname = "n" + tag_;
  auto [port, peer] = make_ports();
  std::string hw = json::parse(link_field(port, "address"));
  std::string pod1 = make_pod();
  ASSERT_EQ(cni("ADD", "old", pod1, conf({{"hwaddr", hw}}), ifname).exit_code, 0);
  sh("ip -n " + pod1 + " link set " + ifname + " netns 1");  // what the kernel does, see above
  sh("ip netns del " + pod1);
  usleep(200 * 1000);  // see DelNeverActsInANewNamespaceAtTheOldPath
  sh("ip netns add " + pod1);
  std::string pod2 = make_pod();
  auto add = cni("ADD", "new", pod2, conf({{"hwaddr", hw}}), ifname);
  ASSERT_EQ(add.exit_code, 0) << add.out << add.err;
  EXPECT_TRUE(link_exists(ifname, pod2));
  EXPECT_EQ(leases().size(), 1u) << "the old attachment's lease was not released";
  ASSERT_EQ(cni("DEL", "new", pod2, conf({{"hwaddr", hw}}), ifname).exit_code, 0);
  EXPECT_TRUE(link_exists(port));
  EXPECT_TRUE(state_files().empty());
}

// The old pod's DEL racing the new pod's ADD for the same device (the node
// lost the old pod's netns): the device ends with the new pod, never with
// both, and the old DEL does not take it back.
TEST_F(Rdmanet, OldDelRacingNewAddLeavesTheDeviceWithTheNewPod) {
  // This test puts the pod interface into the host netns: a unique name keeps
  // parallel tests apart.
  const std::string ifname = "n" + tag_;
  for (int round = 0; round < 3; ++round) {
    auto [port, peer] = make_ports();
    std::string hw = json::parse(link_field(port, "address"));
    json c = conf({{"hwaddr", hw}});
    std::string old_pod = make_pod();
    std::string old_id = "old" + std::to_string(round);
    std::string new_id = "new" + std::to_string(round);
    ASSERT_EQ(cni("ADD", old_id, old_pod, c, ifname).exit_code, 0);
    sh("ip -n " + old_pod + " link set " + ifname + " netns 1");
    sh("ip netns del " + old_pod);
    std::string new_pod = make_pod();
    Output del;
    Output add;
    std::thread t1([&] { del = cni("DEL", old_id, old_pod, c, ifname); });
    std::thread t2([&] { add = cni("ADD", new_id, new_pod, c, ifname); });
    t1.join();
    t2.join();
    EXPECT_EQ(del.exit_code, 0) << del.out << del.err;
    ASSERT_EQ(add.exit_code, 0) << add.out << add.err;
    EXPECT_TRUE(link_exists(ifname, new_pod)) << "round " << round;
    EXPECT_FALSE(link_exists(ifname)) << "round " << round;
    EXPECT_FALSE(link_exists(port)) << "round " << round;
    ASSERT_EQ(cni("DEL", new_id, new_pod, c, ifname).exit_code, 0);
    EXPECT_TRUE(link_exists(port));
    EXPECT_TRUE(state_files().empty());
    EXPECT_TRUE(leases().empty());
  }
}

TEST_F(Rdmanet, ConcurrentAddsForOneDeviceHandItToOnePod) {
  auto [port, peer] = make_ports();
  constexpr int kPods = 4;
  std::vector<std::string> pods;
  pods.reserve(kPods);
  for (int i = 0; i < kPods; ++i) {
    pods.push_back(make_pod());
  }
  std::vector<Output> results(kPods);
  std::vector<std::thread> threads;
  threads.reserve(kPods);
  for (int i = 0; i < kPods; ++i) {
    // (clang 14 cannot capture a structured binding.)
    threads.emplace_back([&, i, device = port] {
      results[i] = cni("ADD", "race" + std::to_string(i), pods[i], conf({{"device", device}}));
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  int won = 0;
  int winner = -1;
  for (int i = 0; i < kPods; ++i) {
    if (results[i].exit_code == 0) {
      ++won;
      winner = i;
      EXPECT_TRUE(link_exists("net1", pods[i]));
    }
  }
  ASSERT_EQ(won, 1);
  // ADD takes the device's lock and checks its hold before it looks the device up, so a
  // loser can only find it held (101, naming the winner). A 100 ("not found") would mean a
  // loser got past the hold and found the device already gone into the winner's pod.
  const std::string w = "race" + std::to_string(winner);
  const std::string held_by = "is held by pod default/pod-" + w + " (container " + w + ", net1";
  for (int i = 0; i < kPods; ++i) {
    if (i == winner) {
      continue;
    }
    EXPECT_EQ(results[i].code(), 101) << results[i].out;
    EXPECT_NE(results[i].msg().find(held_by), std::string::npos) << results[i].msg();
    EXPECT_FALSE(link_exists("net1", pods[i]));
  }
  EXPECT_EQ(leases().size(), 1u);
}

TEST_F(Rdmanet, DelAfterRebootRestoresTheDevice) {
  // This test puts the pod interface into the host netns: a unique name keeps
  // parallel tests apart.
  const std::string ifname = "n" + tag_;
  auto [port, peer] = make_ports();
  std::string mac = link_field(port, "address");
  std::string pod = make_pod();
  json c = conf({{"device", port}});
  ASSERT_EQ(cni("ADD", "boot", pod, c, ifname).exit_code, 0);
  // After a reboot the pod netns is gone and the device is in the host under
  // whatever name it came back with; only the state file remembers.
  sh("ip -n " + pod + " link set " + ifname + " netns 1");
  sh("ip link set " + ifname + " up");
  sh("ip netns del " + pod);
  auto del = cni("DEL", "boot", pod, c, ifname);
  ASSERT_EQ(del.exit_code, 0) << del.out << del.err;
  ASSERT_TRUE(link_exists(port));
  EXPECT_FALSE(link_exists(ifname));
  EXPECT_EQ(link_field(port, "address"), mac);
  EXPECT_TRUE(state_files().empty());
  EXPECT_TRUE(leases().empty());
  EXPECT_EQ(cni("DEL", "boot", "", c, ifname).exit_code, 0);
}

// udev (or anyone) took the device's host name while it was in the pod: it
// comes back under a name derived from its index, never lost in the pod.
TEST_F(Rdmanet, DeviceComesHomeEvenWhenItsNameWasTaken) {
  auto [port, peer] = make_ports();
  std::string pod = make_pod();
  json c = conf({{"device", port}});
  auto add = cni("ADD", "taken", pod, c);
  ASSERT_EQ(add.exit_code, 0) << add.out;
  sh("ip link set " + peer + " name " + port);  // the peer now holds the name
  std::string index = sh("ip -n " + pod + " -o link show dev net1 | cut -d: -f1");
  index.erase(index.find_last_not_of(" \n") + 1);
  auto del = cni("DEL", "taken", pod, c);
  ASSERT_EQ(del.exit_code, 0) << del.out << del.err;
  EXPECT_FALSE(link_exists("net1", pod));
  EXPECT_TRUE(link_exists("rdmanet" + index)) << sh("ip -br link", false);
  sh("ip link set " + port + " name " + peer);
  sh("ip link set rdmanet" + index + " name " + port);
  EXPECT_TRUE(state_files().empty());
}

}  // namespace
}  // namespace rdmanet::plugin::testing
