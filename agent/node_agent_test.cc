// The node agent in process: its options and its metrics. Its rounds against real pods,
// devices and rdmanet-ipam are tests/binary/node_agent_test.py (and the PCI lab tier).
#include "agent/node_agent.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "agent/networks_dir.h"
#include "base/testing/temp_dir.h"
#include "plugin/store.h"

namespace rdmanet::agent {
namespace {

namespace fs = std::filesystem;

using testutil::TempDir;

TEST(AgentArgs, DefaultsFlagsAndTheConfigFile) {
  auto plain = parse_agent_args({});
  ASSERT_TRUE(plain) << plain.error().msg();
  EXPECT_EQ(plain->state_dirs, std::vector<std::string>{"/var/lib/cni/rdmanet"});
  EXPECT_EQ(plain->interval.count(), 30);
  EXPECT_EQ(plain->grace.count(), 60);
  EXPECT_EQ(plain->listen, "127.0.0.1:9520");

  TempDir tmp;
  std::string file = tmp.path() + "/agent.json";
  std::ofstream(file) << R"({"stateDirs": ["/a", "/b"], "intervalSeconds": 5,
                            "graceSeconds": 7, "listen": ":9600", "cniPath": "/x"})";
  // Flags win over the file wherever they stand.
  auto both = parse_agent_args({"--grace", "9", "--config", file, "--state-dir", "/c"});
  ASSERT_TRUE(both) << both.error().msg();
  EXPECT_EQ(both->state_dirs, std::vector<std::string>{"/c"});
  EXPECT_EQ(both->interval.count(), 5);
  EXPECT_EQ(both->grace.count(), 9);
  EXPECT_EQ(both->listen, ":9600");
  EXPECT_EQ(both->cni_path, "/x");
}

TEST(AgentArgs, RefusalsNameWhatIsWrong) {
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  for (const auto& c : std::vector<Case>{
           {{"--bogus"}, "unknown option --bogus"},
           {{"--interval"}, "--interval needs a value"},
           {{"--interval", "5s"}, "--interval takes whole seconds, not \"5s\""},
           {{"--grace", "-1"}, "--grace must be 0..86400 seconds"},
           {{"--interval", "0"}, "--interval must be at least 1 second"},
           {{"--state-dir", "relative"}, "state dir"},
           {{"--config", "/nonexistent/agent.json"}, "/nonexistent/agent.json does not exist"},
       }) {
    auto r = parse_agent_args(c.args);
    ASSERT_FALSE(r) << c.args.front();
    EXPECT_NE(r.error().msg().find(c.says), std::string::npos) << r.error().msg();
  }
  EXPECT_TRUE(parse_agent_args({"--interval", "0", "--once"}));
}

TEST(NodeAgent, AnUntrustedStateDirIsReportedAndLeftAlone) {
  TempDir tmp;
  std::string dir = tmp.path() + "/state";
  ASSERT_EQ(::mkdir(dir.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);  // others could plant records
  AgentConfig config;
  config.state_dirs = {dir};
  config.listen = "";
  NodeAgent agent(config, {});
  RoundReport r = agent.round();
  EXPECT_EQ(r.errors["state-dir"], 1U);
  ASSERT_EQ(r.messages.size(), 1U);
  EXPECT_NE(r.messages[0].find(dir), std::string::npos) << r.messages[0];
  EXPECT_FALSE(std::ifstream(dir + "/.agent/orphans.json").good());
}

TEST(NodeAgent, ANetworksDirOthersCanWriteIsNotRead) {
  TempDir tmp;
  std::string dir = tmp.path() + "/networks";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  // Its configs name the directories rdmanet-ipam releases leases in.
  std::ofstream(dir + "/n.conf") << R"({"name": "n", "ipam": {"type": "rdmanet-ipam",
      "dataDir": ")" + tmp.path() + R"(/ipam", "ranges": [[{"subnet": "10.9.0.0/24"}]]}})";
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  AgentConfig config;
  config.state_dirs = {tmp.path() + "/state"};
  config.networks_dir = dir;
  NodeAgent agent(config, {});
  RoundReport r = agent.round();
  EXPECT_EQ(r.errors["networks-dir"], 1U);
  EXPECT_TRUE(r.pools.empty()) << "no network of it was reconciled";
  EXPECT_FALSE(fs::exists(tmp.path() + "/ipam")) << "nor its IPAM directory touched";
  ASSERT_EQ(::chmod(dir.c_str(), 0700), 0);
  r = agent.round();
  EXPECT_TRUE(r.errors.empty());
  EXPECT_TRUE(r.ipam_errors.empty());
  ASSERT_EQ(r.pools.size(), 1U) << "read now, and its pool reconciled";
  EXPECT_EQ(r.pools[0].network, "n");
  EXPECT_EQ(r.pools[0].size, 253) << "a /24 less its network, broadcast and gateway";
}

// A ConfigMap volume: each key a link "..data/<key>", ..data a link to the directory the
// kubelet swaps atomically. Its configs are read; anything else in the directory (a link
// elsewhere, a FIFO, a file that is not a config) is named in the report, never skipped
// silently.
TEST(NodeAgent, ANetworksDirThatIsAConfigMapVolumeIsRead) {
  TempDir tmp;
  std::string dir = tmp.path() + "/networks";
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((dir + "/..2026_12_05_08_00_00.123").c_str(), 0755), 0);
  std::ofstream(dir + "/..2026_12_05_08_00_00.123/rail0.conf")
      << R"({"name": "rail0", "ipam": {"type": "rdmanet-ipam", "dataDir": ")" << tmp.path()
      << R"(/ipam", "ranges": [[{"subnet": "10.9.0.0/24"}]]}})";
  ASSERT_EQ(::symlink("..2026_12_05_08_00_00.123", (dir + "/..data").c_str()), 0);
  ASSERT_EQ(::symlink("..data/rail0.conf", (dir + "/rail0.conf").c_str()), 0);
  std::ofstream(tmp.path() + "/elsewhere.conf") << R"({"name": "stolen"})";
  ASSERT_EQ(::symlink((tmp.path() + "/elsewhere.conf").c_str(), (dir + "/evil.conf").c_str()), 0);
  ASSERT_EQ(::mkfifo((dir + "/fifo.conf").c_str(), 0644), 0);
  std::ofstream(dir + "/notes.txt") << "not a config";

  NetworksDir read = read_networks_dir(dir);
  ASSERT_EQ(read.networks.size(), 1U);
  EXPECT_EQ(read.networks.count("rail0"), 1U);
  ASSERT_EQ(read.problems.size(), 3U);
  std::string all;
  for (const auto& p : read.problems) {
    all += p.msg() + "\n";
  }
  for (const char* named : {"evil.conf", "fifo.conf", "notes.txt"}) {
    EXPECT_NE(all.find(named), std::string::npos) << named << " not named in\n" << all;
  }
  EXPECT_EQ(all.find("stolen"), std::string::npos);

  // The agent counts them.
  AgentConfig config;
  config.state_dirs = {tmp.path() + "/state"};
  config.networks_dir = dir;
  NodeAgent agent(config, {});
  RoundReport r = agent.round();
  EXPECT_EQ(r.errors["networks-dir"], 3U);
  ASSERT_EQ(r.pools.size(), 1U) << "rail0 was read, and its pool reconciled";
  EXPECT_EQ(r.pools[0].network, "rail0");
}

// rdmanet-ipam's reconcile runs in the agent's process: a network it cannot reconcile (here
// a section it refuses) is an IPAM error of that network, named, and the others go on.
TEST(NodeAgent, AReconcileThatFailsIsAnIpamErrorOfItsNetwork) {
  TempDir tmp;
  std::string dir = tmp.path() + "/networks";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  std::ofstream(dir + "/bad.conf") << R"({"name": "bad", "ipam": {"type": "rdmanet-ipam"}})";
  std::ofstream(dir + "/good.conf") << R"({"name": "good", "ipam": {"type": "rdmanet-ipam",
      "dataDir": ")" + tmp.path() + R"(/ipam", "ranges": [[{"subnet": "10.9.0.0/24"}]]}})";
  AgentConfig config;
  config.state_dirs = {tmp.path() + "/state"};
  config.networks_dir = dir;
  NodeAgent agent(config, {});
  RoundReport r = agent.round();
  EXPECT_EQ(r.ipam_errors["bad"], 1U);
  EXPECT_EQ(r.ipam_errors.count("good"), 0U);
  ASSERT_EQ(r.messages.size(), 1U);
  EXPECT_NE(r.messages[0].find("reconcile of network bad"), std::string::npos) << r.messages[0];
  ASSERT_EQ(r.pools.size(), 1U);
  EXPECT_EQ(r.pools[0].network, "good");
  EXPECT_NE(agent.metrics().find("rdmanet_ipam_reconcile_errors_total{network=\"bad\"} 1\n"),
            std::string::npos);
}

TEST(NodeAgent, MetricsFollowTheTextFormat) {
  TempDir tmp;
  AgentConfig config;
  config.state_dirs = {tmp.path() + "/state"};  // not there yet: nothing attached
  NodeAgent agent(config, {});
  EXPECT_FALSE(agent.healthy(std::chrono::steady_clock::now()));
  agent.round();
  agent.round();
  EXPECT_TRUE(agent.healthy(std::chrono::steady_clock::now()));
  EXPECT_FALSE(agent.healthy(std::chrono::steady_clock::now() + std::chrono::seconds(91)));
  std::string text = agent.metrics();
  EXPECT_NE(text.find("# TYPE rdmanet_held_devices gauge\nrdmanet_held_devices 0\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("# TYPE rdmanet_reconcile_rounds_total counter\n"
                      "rdmanet_reconcile_rounds_total 2\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("# TYPE rdmanet_gid_index_changes_total counter\n"
                      "rdmanet_gid_index_changes_total 0\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("rdmanet_orphan_teardowns_total{reason=\"netns-gone\"} 0\n"),
            std::string::npos);
  // Every sample line belongs to the family announced before it.
  std::string family;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("# TYPE ", 0) == 0) {
      family = line.substr(7, line.find(' ', 7) - 7);
    } else if (line[0] != '#') {
      EXPECT_EQ(line.rfind(family, 0), 0U) << line << " after " << family;
    }
  }
}

}  // namespace
}  // namespace rdmanet::agent
