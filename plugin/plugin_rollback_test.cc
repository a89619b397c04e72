// End to end: an ADD that fails at any step leaves the node as it was, and DEL copes with
// a failing or missing IPAM plugin.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "base/testing/process.h"
#include "plugin/testing/plugin_fixture.h"

namespace rdmanet::plugin::testing {
namespace {

namespace fs = std::filesystem;

TEST_F(Rdmanet, AnExhaustedPoolIsRefusedAndRolledBack) {
  auto [first, other] = make_ports();
  auto [second, other2] = make_ports();
  // host-local in a /30 has one usable address besides the gateway.
  auto pool = [&](const std::string& dev) {
    json c = conf({{"device", dev}});
    c["ipam"]["ranges"] = {{{{"subnet", "10.125.0.0/30"}}}};
    c["ipam"].erase("routes");
    return c;
  };
  std::string pod1 = make_pod();
  std::string pod2 = make_pod();
  ASSERT_EQ(cni("ADD", "first", pod1, pool(first)).exit_code, 0);
  std::string mac = link_field(second, "address");
  auto add = cni("ADD", "second", pod2, pool(second));
  EXPECT_EQ(add.exit_code, 1);
  EXPECT_NE(add.code(), 0) << add.out;
  EXPECT_NE(add.msg().find("no IP addresses available"), std::string::npos) << add.msg();
  EXPECT_TRUE(link_exists(second)) << "the device of the refused pod is back in the host";
  EXPECT_EQ(link_field(second, "address"), mac);
  EXPECT_FALSE(link_exists("net1", pod2));
  EXPECT_EQ(cni("DEL", "second", pod2, pool(second)).exit_code, 0);
  EXPECT_EQ(cni("DEL", "first", pod1, pool(first)).exit_code, 0);
}

// The runtime gives up on an ADD: containerd SIGKILLs the plugin when kubelet cancels
// RunPodSandbox, then runs DEL. The IPAM child dies with rdmanet, so nothing allocates
// after that DEL (before, the child went on and leaked a lease).
TEST_F(Rdmanet, AnAddKilledByTheRuntimeLeavesNoLeaseAfterItsDel) {
  auto [port, peer] = make_ports();
  std::string pod = make_pod();
  // host-local; its ADD after a pause in which the runtime gives up.
  // It says who it is (pid and start time, kept through its exec) before it pauses.
  const std::string started = dir_ + "/ipam-started";
  std::ofstream(dir_ + "/bin/slow-ipam")
      << "#!/bin/sh\nif [ \"$CNI_COMMAND\" = ADD ]; then echo $$ $(cut -d' ' -f22 /proc/$$/stat) > "
      << started << ".tmp; mv " << started << ".tmp " << started << "; sleep 1; fi\nexec " << dir_
      << "/bin/host-local\n";
  fs::permissions(dir_ + "/bin/slow-ipam", fs::perms::owner_all);
  json c = conf({{"device", port}});
  c["ipam"]["type"] = "slow-ipam";
  sh("(" + cni_shell("ADD", "killed", pod, c) + " >/dev/null & pid=$!; n=0; " + "while [ ! -e " +
     started + " ] && [ $n -lt 200 ]; do sleep 0.05; n=$((n+1)); done; " +
     "kill -9 $pid; wait $pid) || true");
  ASSERT_TRUE(fs::exists(started)) << "ADD never reached IPAM";
  pid_t child = 0;
  std::string child_start;
  std::ifstream(started) >> child >> child_start;
  ASSERT_GT(child, 0) << "the IPAM child did not say who it is";
  auto del = cni("DEL", "killed", pod, c);
  EXPECT_EQ(del.exit_code, 0) << del.out << del.err;
  // Whatever the child does, it does before it ends (a survivor allocates after its pause).
  ASSERT_TRUE(testutil::wait_for_end(child, child_start, std::chrono::seconds(30)))
      << "the IPAM child " << child << " of the killed ADD still runs after 30 s";
  EXPECT_TRUE(leases().empty()) << "the IPAM child of the killed ADD allocated after DEL";
  EXPECT_TRUE(link_exists(port));
  EXPECT_TRUE(state_files().empty());
}

TEST_F(Rdmanet, FailedAddRollsEverythingBack) {
  auto [port, peer] = make_ports();
  std::string mac = link_field(port, "address");
  std::string pod = make_pod();
  // The route's gateway is unreachable from the pod, so the last step fails
  // after the device moved and IPAM allocated.
  json c = conf({{"device", port}});
  c["ipam"]["routes"] = {{{"dst", "10.200.0.0/16"}, {"gw", "10.55.0.1"}}};
  auto add = cni("ADD", "rb", pod, c);
  EXPECT_EQ(add.exit_code, 1);
  EXPECT_NE(add.msg().find("10.200.0.0/16"), std::string::npos) << add.msg();
  EXPECT_TRUE(link_exists(port)) << "device not returned";
  EXPECT_EQ(link_field(port, "address"), mac);
  EXPECT_FALSE(link_exists("net1", pod));
  EXPECT_TRUE(leases().empty()) << "IPAM lease not released";
  EXPECT_TRUE(state_files().empty());
  // The runtime calls DEL after a failed ADD: it must succeed.
  EXPECT_EQ(cni("DEL", "rb", pod, c).exit_code, 0);
}

TEST_F(Rdmanet, MacvlanRollbackRemovesTheChild) {
  auto [parent, peer] = make_ports();
  std::string pod = make_pod();
  json c = conf({{"device", parent}, {"mode", "macvlan"}});
  c["ipam"]["routes"] = {{{"dst", "10.200.0.0/16"}, {"gw", "10.55.0.1"}}};
  EXPECT_EQ(cni("ADD", "rbm", pod, c).exit_code, 1);
  EXPECT_FALSE(link_exists("net1", pod));
  EXPECT_TRUE(leases().empty());
  EXPECT_TRUE(state_files().empty());
}

TEST_F(Rdmanet, EveryFailingStepIsRolledBack) {
  auto [port, peer] = make_ports();
  std::string mac = link_field(port, "address");
  struct Case {
    std::string name;
    json config;
    std::function<void(const std::string& pod)> prepare;
    std::string culprit;
  } cases[] = {
      // move+rename: the pod already has a link called net1.
      {"move", conf({{"device", port}}),
       [&](const std::string& pod) {
         sh("ip -n " + pod + " link add net1 type veth peer name x1");
       },
       "net1"},
      // macvlan creation: an MTU above the parent's.
      {"macvlan", conf({{"device", port}, {"mode", "macvlan"}, {"mtu", 9000}}),
       [](const std::string&) {}, port},
      // IPAM after the move: the pool has no free address.
      {"ipam",
       conf({{"device", port},
             {"ipam",
              {{"type", "host-local"},
               {"dataDir", dir_ + "/ipam"},
               {"ranges",
                {{{{"subnet", "10.127.0.0/30"},
                   {"rangeStart", "10.127.0.2"},
                   {"rangeEnd", "10.127.0.2"}}}}}}}}),
       [&](const std::string& pod) {
         std::string other = make_pod();
         auto [p2, b2] = make_ports();
         json c = conf({{"device", p2}});
         c["ipam"]["ranges"] = {{{{"subnet", "10.127.0.0/30"},
                                  {"rangeStart", "10.127.0.2"},
                                  {"rangeEnd", "10.127.0.2"}}}};
         ASSERT_EQ(cni("ADD", "filler", other, c).exit_code, 0);
         (void)pod;
       },
       "10.127.0.2"},
      // pod-side configuration: a route whose gateway is unreachable.
      {"route", conf({{"device", port}}), [](const std::string&) {}, "10.200.0.0/16"},
  };
  cases[3].config["ipam"]["routes"] = {{{"dst", "10.200.0.0/16"}, {"gw", "10.55.0.1"}}};
  for (auto& c : cases) {
    std::string pod = make_pod();
    c.prepare(pod);
    size_t leases_before = leases().size();
    auto states_before = state_files();
    auto add = cni("ADD", "step-" + c.name, pod, c.config);
    EXPECT_EQ(add.exit_code, 1) << c.name << ": " << add.out;
    EXPECT_NE(add.msg().find(c.culprit), std::string::npos) << c.name << ": " << add.msg();
    EXPECT_TRUE(link_exists(port)) << c.name << ": device not in the host";
    EXPECT_EQ(link_field(port, "address"), mac) << c.name;
    EXPECT_EQ(leases().size(), leases_before) << c.name << ": lease leaked";
    EXPECT_EQ(state_files(), states_before) << c.name << ": state leaked";
    EXPECT_EQ(cni("DEL", "step-" + c.name, pod, c.config).exit_code, 0) << c.name;
  }
}

// A DEL of nothing must not fail only because the IPAM plugin is not installed
// (kubelet would retry it forever); an IPAM plugin that fails to DEL is still an error.
TEST_F(Rdmanet, DelOfNothingSucceedsWithoutItsIpamPlugin) {
  std::string pod = make_pod();
  auto missing =
      cni("DEL", "gone", pod, conf({{"device", "x"}, {"ipam", {{"type", "nope-ipam"}}}}));
  EXPECT_EQ(missing.exit_code, 0) << missing.out << missing.err;
  EXPECT_NE(missing.err.find("nope-ipam"), std::string::npos) << missing.err;
  std::ofstream(dir_ + "/bin/busy-ipam")
      << "#!/bin/sh\necho '{\"cniVersion\":\"1.0.0\",\"code\":11,\"msg\":\"busy\"}'\nexit 1\n";
  fs::permissions(dir_ + "/bin/busy-ipam", fs::perms::owner_all);
  auto busy = cni("DEL", "gone", pod, conf({{"device", "x"}, {"ipam", {{"type", "busy-ipam"}}}}));
  EXPECT_EQ(busy.exit_code, 1) << busy.out;
  EXPECT_EQ(busy.code(), 11) << busy.out;
  EXPECT_TRUE(state_files().empty());
}

}  // namespace
}  // namespace rdmanet::plugin::testing
