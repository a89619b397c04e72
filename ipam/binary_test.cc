// Process-level tests: the built rdmanet-ipam binary, driven like a runtime.
#include <gtest/gtest.h>
#include <signal.h>

#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "ipam/store.h"
#include "ipam/testing/test_util.h"

namespace rdmanet::ipam {
namespace {

using nlohmann::json;
using testing::Outcome;
using testing::TempDir;

const char* const kVersions[] = {"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"};

class BinaryTest : public ::testing::Test {
 protected:
  std::string conf(const json& ipam, const std::string& version = "1.1.0",
                   const json& extra = json::object()) const {
    json doc = {{"cniVersion", version}, {"name", "net1"}, {"type", "bridge"}, {"ipam", ipam}};
    doc["ipam"]["type"] = "rdmanet-ipam";
    doc["ipam"]["dataDir"] = tmp_.path() + "/data";
    doc.update(extra);
    return doc.dump();
  }
  static std::map<std::string, std::string> env(const std::string& command, const std::string& cid,
                                                const std::string& args = "") {
    return {{"CNI_COMMAND", command},     {"CNI_CONTAINERID", cid},
            {"CNI_IFNAME", "eth0"},       {"CNI_NETNS", "/proc/self/ns/net"},
            {"CNI_PATH", "/nonexistent"}, {"CNI_ARGS", args}};
  }
  Outcome cni(const std::string& command, const std::string& cid, const std::string& config,
              const std::string& args = "") const {
    return testing::run(RDMANET_IPAM_BINARY, env(command, cid, args), config, tmp_.path());
  }
  static json parse(const Outcome& r) { return json::parse(r.out, nullptr, false); }
  // The v4 address of an ADD result, without prefix.
  static std::string address(const Outcome& r) {
    json doc = parse(r);
    if (!doc.is_object() || !doc.contains("ips")) {
      return "";
    }
    std::string a = doc["ips"][0]["address"];
    return a.substr(0, a.find('/'));
  }
  std::string store_dir() const { return tmp_.path() + "/data/net1"; }
  size_t lease_files() const {
    size_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(store_dir() + "/leases")) {
      n += e.path().filename().string().rfind(".tmp", 0) == 0 ? 0 : 1;
    }
    return n;
  }

  TempDir tmp_;
  const json small_ = {{"ranges", {{{{"subnet", "10.1.0.0/28"}, {"rangeEnd", "10.1.0.9"}}}}}};
};

TEST_F(BinaryTest, ResultShapeAtEverySpecVersion) {
  json ipam = {{"ranges", {{{{"subnet", "10.1.0.0/16"}}}, {{{"subnet", "fd00::/64"}}}}},
               {"routes", {{{"dst", "0.0.0.0/0"}, {"gw", "10.1.0.1"}}}},
               {"dns", {{"nameservers", {"10.0.0.53"}}}}};
  for (const char* version : kVersions) {
    SCOPED_TRACE(version);
    std::string config = conf(ipam, version);
    Outcome add = cni("ADD", std::string("c") + version[0] + version[2] + version[4], config);
    ASSERT_EQ(add.status, 0) << add.out;
    json doc = parse(add);
    ASSERT_TRUE(doc.is_object()) << add.out;
    EXPECT_EQ(doc["cniVersion"], version);
    EXPECT_FALSE(doc.contains("interfaces"));
    ASSERT_EQ(doc["ips"].size(), 2U);
    bool old = version[0] == '0';
    for (const auto& ip : doc["ips"]) {
      EXPECT_TRUE(ip.contains("address"));
      EXPECT_TRUE(ip.contains("gateway"));
      EXPECT_FALSE(ip.contains("interface"));  // IPAM results carry no interfaces
      EXPECT_EQ(ip.contains("version"), old) << ip.dump();
    }
    EXPECT_EQ(doc["ips"][1]["gateway"], "fd00::1");
    if (old) {
      EXPECT_EQ(doc["ips"][0]["version"], "4");
      EXPECT_EQ(doc["ips"][1]["version"], "6");
    }
    EXPECT_EQ(doc["routes"][0]["gw"], "10.1.0.1");
    EXPECT_EQ(doc["dns"]["nameservers"][0], "10.0.0.53");
    if (std::string(version) >= "0.4.0") {
      Outcome check = cni("CHECK", std::string("c") + version[0] + version[2] + version[4], config);
      EXPECT_EQ(check.status, 0) << check.out;
    }
    Outcome del = cni("DEL", std::string("c") + version[0] + version[2] + version[4], config);
    EXPECT_EQ(del.status, 0) << del.out;
  }
  EXPECT_EQ(lease_files(), 0U);
}

TEST_F(BinaryTest, InvalidConfigIsError7NamingTheField) {
  for (const auto& [ipam, field] : std::vector<std::pair<json, std::string>>{
           {json{{"ranges", {{{{"subnet", "10.1.0.0/33"}}}}}}, "ipam.ranges[0][0].subnet"},
           {json{{"ranges", {{{{"subnet", "10.1.0.0/32"}}}}}}, "ipam.ranges[0][0].subnet"},
           {json{{"ranges", {{{{"subnet", "10.1.0.0/24"}, {"gateway", "10.2.0.1"}}}}}},
            "ipam.ranges[0][0].gateway"},
           {json{{"subnet", "10.1.0.0/24"}, {"rangeStart", "10.1.0.9"}, {"rangeEnd", "10.1.0.2"}},
            "ipam.rangeStart"},
           {json{{"ranges", {{{{"subnet", "10.1.0.0/24"}}}, {{{"subnet", "10.1.0.0/16"}}}}}},
            "ipam.ranges[1][0] overlaps"}}) {
    Outcome r = cni("ADD", "c1", conf(ipam));
    EXPECT_EQ(r.status, 1);
    json doc = parse(r);
    EXPECT_EQ(doc["code"], 7) << r.out;
    EXPECT_NE(doc["msg"].get<std::string>().find(field), std::string::npos) << r.out;
  }
}

TEST_F(BinaryTest, StaticRequestsFromEverySource) {
  json ipam = {{"ranges", {{{{"subnet", "10.1.0.0/24"}}}}}};
  Outcome rc =
      cni("ADD", "c1", conf(ipam, "1.1.0", {{"runtimeConfig", {{"ips", {"10.1.0.50/24"}}}}}));
  EXPECT_EQ(address(rc), "10.1.0.50") << rc.out;
  Outcome args =
      cni("ADD", "c2", conf(ipam, "1.1.0", {{"args", {{"cni", {{"ips", {"10.1.0.51"}}}}}}}));
  EXPECT_EQ(address(args), "10.1.0.51") << args.out;
  Outcome env_ip = cni("ADD", "c3", conf(ipam), "IgnoreUnknown=1;IP=10.1.0.52");
  EXPECT_EQ(address(env_ip), "10.1.0.52") << env_ip.out;
  Outcome env_only = cni("ADD", "c4", conf(ipam), "IP=10.1.0.53");
  EXPECT_EQ(address(env_only), "10.1.0.53") << env_only.out;

  Outcome taken = cni("ADD", "c5", conf(ipam), "IP=10.1.0.50");
  EXPECT_EQ(taken.status, 1);
  EXPECT_EQ(parse(taken)["code"], 104) << taken.out;
  EXPECT_NE(taken.out.find("10.1.0.50"), std::string::npos);
  Outcome outside = cni("ADD", "c5", conf(ipam), "IP=10.9.0.1");
  EXPECT_EQ(outside.status, 1);
  EXPECT_NE(outside.out.find("10.9.0.1"), std::string::npos) << outside.out;
  Outcome garbage = cni("ADD", "c5", conf(ipam), "IP=10.9.0.x");
  EXPECT_EQ(parse(garbage)["code"], 7) << garbage.out;
  EXPECT_NE(garbage.out.find("CNI_ARGS IP"), std::string::npos) << garbage.out;
}

TEST_F(BinaryTest, DelCheckGcStatus) {
  std::string config = conf(small_);
  EXPECT_EQ(cni("DEL", "nobody", config).status, 0);
  Outcome check = cni("CHECK", "c1", config);
  EXPECT_EQ(check.status, 1);
  EXPECT_EQ(parse(check)["code"], 3) << check.out;
  std::vector<std::string> got;
  for (int i = 0; i < 8; ++i) {  // .2 - .9
    Outcome r = cni("ADD", "c" + std::to_string(i), config);
    ASSERT_EQ(r.status, 0) << r.out;
    got.push_back(address(r));
  }
  EXPECT_EQ(got.front(), "10.1.0.2");
  EXPECT_EQ(got.back(), "10.1.0.9");
  Outcome again = cni("ADD", "c3", config);
  EXPECT_EQ(address(again), got[3]);
  Outcome full = cni("ADD", "c9", config);
  EXPECT_EQ(parse(full)["code"], 104) << full.out;
  EXPECT_NE(full.out.find("no free address left in range set ipam.ranges[0] (10.1.0.1-10.1.0.9)"),
            std::string::npos)
      << full.out;
  Outcome status = cni("STATUS", "", config);
  EXPECT_EQ(parse(status)["code"], 50) << status.out;

  json valid = json::array();
  for (const char* cid : {"c0", "c5"}) {
    valid.push_back({{"containerID", cid}, {"ifname", "eth0"}});
  }
  Outcome gc = cni("GC", "", conf(small_, "1.1.0", {{"cni.dev/valid-attachments", valid}}));
  EXPECT_EQ(gc.status, 0) << gc.out;
  EXPECT_EQ(lease_files(), 2U);
  EXPECT_EQ(cni("STATUS", "", config).status, 0);
  EXPECT_EQ(cni("CHECK", "c5", config).status, 0);
  EXPECT_EQ(cni("CHECK", "c4", config).status, 1);
  // GC and STATUS need 1.1.0; the skel says so with error 1.
  EXPECT_EQ(parse(cni("STATUS", "", conf(small_, "1.0.0")))["code"], 1);
}

// N processes at once on a pool of 8: 8 distinct addresses, the rest a clean
// exhaustion error; nothing leaked.
TEST_F(BinaryTest, ConcurrentProcessesNeverShareAnAddress) {
  constexpr int kProcesses = 16;
  std::string config = conf(small_);
  std::vector<std::pair<pid_t, int>> running;
  for (int i = 0; i < kProcesses; ++i) {
    int fd = -1;
    pid_t pid = testing::spawn(RDMANET_IPAM_BINARY, env("ADD", "c" + std::to_string(i)), config,
                               tmp_.path(), &fd);
    ASSERT_GT(pid, 0);
    running.emplace_back(pid, fd);
  }
  std::set<std::string> addresses;
  int exhausted = 0;
  for (auto [pid, fd] : running) {
    Outcome r = testing::finish(pid, fd);
    if (r.status == 0) {
      EXPECT_TRUE(addresses.insert(address(r)).second) << "duplicate " << r.out;
    } else {
      EXPECT_EQ(parse(r)["code"], 104) << r.out;
      ++exhausted;
    }
  }
  EXPECT_EQ(addresses.size(), 8U);
  EXPECT_EQ(exhausted, kProcesses - 8);
  EXPECT_EQ(lease_files(), 8U);
}

// kill -9 at random instants during many ADD/DEL calls; afterwards the store
// must read correctly, no address may be held twice, and every attachment
// whose ADD completed must get its own address back.
TEST_F(BinaryTest, CrashAtRandomPointsLeavesAConsistentStore) {
  // 7 attachments on a pool of 8 (.2-.9): orphans from killed calls run the
  // pool short, so the reclaim path runs too; STATUS must find one free at the end.
  constexpr int kAttachments = 7;
  constexpr int kIterations = 250;
  std::string config = conf(small_);
  unsigned seed = std::random_device()();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  std::map<int, std::string> held;  // confirmed by a completed ADD
  int killed = 0;
  for (int it = 0; it < kIterations; ++it) {
    int k = static_cast<int>(rng() % kAttachments);
    std::string cid = "c" + std::to_string(k);
    bool add = rng() % 100 < 65;
    int fd = -1;
    pid_t pid = testing::spawn(RDMANET_IPAM_BINARY, env(add ? "ADD" : "DEL", cid), config,
                               tmp_.path(), &fd);
    ASSERT_GT(pid, 0);
    bool kill_it = rng() % 100 < 60;
    if (kill_it) {
      usleep(rng() % 6000);
      kill(pid, SIGKILL);
    }
    Outcome r = testing::finish(pid, fd);
    if (r.status == -SIGKILL) {
      ++killed;
      held.erase(k);  // unknown now: the call may or may not have happened
      continue;
    }
    ASSERT_EQ(r.status, 0) << (add ? "ADD " : "DEL ") << cid << ": " << r.out;
    if (!add) {
      held.erase(k);
      continue;
    }
    std::string a = address(r);
    if (auto it2 = held.find(k); it2 != held.end()) {
      EXPECT_EQ(a, it2->second) << "re-ADD of " << cid << " changed its address";
    }
    for (const auto& [other, addr] : held) {
      EXPECT_TRUE(other == k || addr != a) << a << " handed to c" << k << " and c" << other;
    }
    held[k] = a;
  }
  RecordProperty("killed", killed);

  // Every lease file is complete; every record's lease names its attachment
  // or is gone (a DEL killed half way).
  {
    auto store = Store::open(store_dir());
    ASSERT_TRUE(store);
    auto leases = store->list_leases();
    ASSERT_TRUE(leases);
    for (const auto& l : *leases) {
      EXPECT_TRUE(l.readable) << l.ip.str();
    }
    auto records = store->list_records();
    ASSERT_TRUE(records);
    std::set<std::string> listed;
    for (const auto& rec : *records) {
      for (const auto& ip : rec.ips) {
        auto lease = store->read_lease(ip);
        ASSERT_TRUE(lease);
        if (*lease && (*lease)->owner == rec.owner) {
          EXPECT_TRUE(listed.insert(ip.str()).second) << ip.str() << " listed twice";
        }
      }
    }
  }
  EXPECT_EQ(cni("STATUS", "", config).status, 0);
  std::set<std::string> final_addresses;
  for (int k = 0; k < kAttachments; ++k) {
    Outcome r = cni("ADD", "c" + std::to_string(k), config);
    ASSERT_EQ(r.status, 0) << r.out;
    std::string a = address(r);
    EXPECT_TRUE(final_addresses.insert(a).second) << a;
    if (held.count(k) != 0) {
      EXPECT_EQ(a, held[k]);
    }
  }
  json valid = json::array();
  for (int k = 0; k < kAttachments; ++k) {
    valid.push_back({{"containerID", "c" + std::to_string(k)}, {"ifname", "eth0"}});
  }
  EXPECT_EQ(cni("GC", "", conf(small_, "1.1.0", {{"cni.dev/valid-attachments", valid}})).status, 0);
  EXPECT_EQ(lease_files(), static_cast<size_t>(kAttachments));
  for (int k = 0; k < kAttachments; ++k) {
    EXPECT_EQ(cni("DEL", "c" + std::to_string(k), config).status, 0);
  }
  EXPECT_EQ(lease_files(), 0U);
  EXPECT_TRUE(std::filesystem::is_empty(store_dir() + "/attachments"));
}

}  // namespace
}  // namespace rdmanet::ipam
