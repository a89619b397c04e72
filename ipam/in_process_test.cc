// rdmanet-ipam run in process (as rdmanet runs it, through cni::exec_plugin with the plugin
// linked in) and exec'd (the built binary, as any runtime or plugin runs it): the same calls
// give the same replies and errors and leave the same files, and either one undoes what the
// other did (rdmanet of one version calling DEL on what another added).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "base/error.h"
#include "cni/delegate.h"
#include "cni/error_code.h"
#include "ipam/commands.h"
#include "ipam/testing/test_util.h"

namespace rdmanet::ipam {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::TempDir;

enum class Way { kInProcess, kExec };

class InProcess : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(bin());
    fs::copy_file(RDMANET_IPAM_BINARY, bin() + "/rdmanet-ipam");
  }
  std::string bin() const { return tmp_.path() + "/bin"; }
  std::string data(Way way) const {
    return tmp_.path() + (way == Way::kInProcess ? "/in-process" : "/exec");
  }
  std::string config(Way way, const std::string& version = "1.1.0") const {
    json doc = {{"cniVersion", version},
                {"name", "rail0"},
                {"type", "rdmanet"},
                {"ipam",
                 {{"type", "rdmanet-ipam"},
                  {"dataDir", data(way)},
                  {"ranges", {{{{"subnet", "10.9.0.0/29"}}}, {{{"subnet", "fd09::/125"}}}}},
                  {"routes", {{{"dst", "10.10.0.0/16"}}}}}}};
    return doc.dump();
  }

  // One call either way: the reply, or "error <code>: <msg>".
  std::string call(Way way, cni::Command command, const std::string& container,
                   const std::string& args = "", const std::string& version = "1.1.0") {
    cni::Environment env{command, container, "/proc/self/ns/net", "net1", args, bin()};
    cni::DelegateOptions options;
    if (way == Way::kInProcess) {
      options.in_process = &cni_plugin();
    }
    auto reply = cni::exec_plugin("rdmanet-ipam", command, env, config(way, version), options);
    if (!reply) {
      return "error " + std::to_string(cni::error_code(reply.error())) + ": " + reply.error().msg();
    }
    return *reply;
  }

  // Every file under a store, by relative path, with its content.
  static std::map<std::string, std::string> files(const std::string& dir) {
    std::map<std::string, std::string> out;
    if (!fs::exists(dir)) {
      return out;
    }
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
      if (e.is_regular_file()) {
        std::ifstream in(e.path());
        std::stringstream ss;
        ss << in.rdbuf();
        out[fs::relative(e.path(), dir).string()] = ss.str();
      }
    }
    return out;
  }
  static size_t leases(const std::string& dir) {
    size_t n = 0;
    for (const auto& [path, content] : files(dir)) {
      n += path.rfind("rail0/leases/", 0) == 0 ? 1 : 0;
    }
    return n;
  }

  TempDir tmp_;
};

TEST_F(InProcess, SameRepliesErrorsAndFilesEitherWay) {
  struct Step {
    cni::Command command;
    std::string container;
    std::string args;
    std::string version = "1.1.0";
  };
  const Step steps[] = {
      {cni::Command::kAdd, "ctr-a"},
      {cni::Command::kAdd, "ctr-b", "IP=10.9.0.5"},
      {cni::Command::kAdd, "ctr-a"},  // again: the same addresses
      {cni::Command::kCheck, "ctr-a"},
      {cni::Command::kAdd, "ctr-c", "IP=10.9.0.5"},   // taken: an error
      {cni::Command::kAdd, "ctr-d", "IP=192.0.2.1"},  // outside the ranges
      {cni::Command::kAdd, "ctr-e", "Bogus=1"},       // unknown CNI_ARGS key
      {cni::Command::kGc, "", "", "1.0.0"},           // GC needs 1.1.0
      {cni::Command::kAdd, "ctr-f", "", "0.3.1"},     // an old result format
      {cni::Command::kDel, "ctr-b"},
      {cni::Command::kDel, "ctr-b"},  // again: nothing to do
      {cni::Command::kStatus, ""},
  };
  for (const Step& s : steps) {
    std::string in_process = call(Way::kInProcess, s.command, s.container, s.args, s.version);
    std::string exec = call(Way::kExec, s.command, s.container, s.args, s.version);
    EXPECT_EQ(in_process, exec) << name_of(cni::kCommandNames, s.command) << " " << s.container
                                << " " << s.args;
  }
  auto a = files(data(Way::kInProcess));
  auto b = files(data(Way::kExec));
  EXPECT_EQ(a, b) << "the two stores differ";
  EXPECT_EQ(leases(data(Way::kInProcess)), 4U) << "ctr-a (v4, v6), ctr-f (v4, v6)";
}

TEST_F(InProcess, EitherDeletesWhatTheOtherAdded) {
  for (Way adder : {Way::kExec, Way::kInProcess}) {
    Way deleter = adder == Way::kExec ? Way::kInProcess : Way::kExec;
    // One store for both: the adder's.
    const std::string dir = data(adder);
    std::string added = call(adder, cni::Command::kAdd, "ctr-up");
    ASSERT_EQ(added.rfind("error", 0), std::string::npos) << added;
    ASSERT_EQ(leases(dir), 2U);
    // The deleter on the adder's store: its config names the adder's dataDir.
    std::string reply;
    {
      cni::Environment env{cni::Command::kDel, "ctr-up", "/proc/self/ns/net", "net1", "", bin()};
      cni::DelegateOptions options;
      if (deleter == Way::kInProcess) {
        options.in_process = &cni_plugin();
      }
      auto r = cni::exec_plugin("rdmanet-ipam", cni::Command::kDel, env, config(adder), options);
      reply = r ? *r : "error " + r.error().msg();
    }
    EXPECT_EQ(reply, "") << reply;
    EXPECT_EQ(leases(dir), 0U) << "DEL " << (deleter == Way::kExec ? "exec'd" : "in process")
                               << " after ADD " << (adder == Way::kExec ? "exec'd" : "in process");
  }
}

// In process, the plugin is never looked up or started: CNI_PATH without it still works,
// and any other type is exec'd as before.
TEST_F(InProcess, OnlyItsOwnTypeRunsInProcess) {
  fs::remove(bin() + "/rdmanet-ipam");
  EXPECT_EQ(call(Way::kInProcess, cni::Command::kAdd, "ctr-x").rfind("error", 0),
            std::string::npos);
  std::string exec = call(Way::kExec, cni::Command::kAdd, "ctr-y");
  EXPECT_NE(exec.find("rdmanet-ipam"), std::string::npos) << exec;
  EXPECT_EQ(exec.rfind("error", 0), 0U) << "exec'd, it must be found in CNI_PATH: " << exec;
  cni::Environment env{cni::Command::kAdd, "ctr-z", "/proc/self/ns/net", "net1", "", bin()};
  cni::DelegateOptions options;
  options.in_process = &cni_plugin();
  auto other = cni::exec_plugin("host-local-missing", cni::Command::kAdd, env,
                                config(Way::kInProcess), options);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.error().msg().find("host-local-missing"), std::string::npos)
      << other.error().msg();
}

}  // namespace
}  // namespace rdmanet::ipam
