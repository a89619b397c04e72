#include "cni/skel.h"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "cni/error_code.h"

namespace rdmanet::cni {
namespace {

using nlohmann::json;

struct Run {
  int exit_code;
  std::string out;
  json doc() const { return json::parse(out); }
};

// A plugin whose handlers record what they were called with.
struct Recorder {
  std::vector<std::string> calls;
  Call last;
  Plugin plugin() {
    Plugin p;
    p.name = "test";
    p.known_args = {"IP"};
    p.add = [this](const Call& c) -> Expected<Result> {
      calls.push_back("ADD");
      last = c;
      Result r;
      r.interfaces = {{"net1", "02:00:00:00:00:01", 1500, c.env.netns}};
      r.ips = {{"10.0.0.2/24", "10.0.0.1", 0}};
      return r;
    };
    auto record = [this](const char* name) {
      return [this, name](const Call& c) -> Status {
        calls.emplace_back(name);
        last = c;
        return ok_status();
      };
    };
    p.del = record("DEL");
    p.check = record("CHECK");
    p.status = record("STATUS");
    p.gc = record("GC");
    return p;
  }
};

Run run(const Plugin& plugin, const std::map<std::string, std::string>& env,
        const std::string& input) {
  std::istringstream in(input);
  std::ostringstream out;
  auto getenv = [&env](const std::string& name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) {
      return std::nullopt;
    }
    return it->second;
  };
  int rc = plugin_main(plugin, getenv, in, out);
  return {rc, out.str()};
}

std::map<std::string, std::string> env_for(const std::string& command) {
  return {{"CNI_COMMAND", command},      {"CNI_CONTAINERID", "abc"},
          {"CNI_NETNS", "/run/netns/p"}, {"CNI_IFNAME", "net1"},
          {"CNI_PATH", "/opt/cni/bin"},  {"CNI_ARGS", "K8S_POD_NAME=p0;IP=10.0.0.9"}};
}

std::string conf(const std::string& version) {
  return R"({"cniVersion":")" + version + R"(","name":"net","type":"test"})";
}

TEST(Skel, VersionNeedsNoStdinOrConfig) {
  Recorder r;
  auto res = run(r.plugin(), {{"CNI_COMMAND", "VERSION"}}, "garbage");
  EXPECT_EQ(res.exit_code, 0);
  EXPECT_EQ(res.doc()["supportedVersions"].size(), 5u);
  EXPECT_TRUE(r.calls.empty());
}

TEST(Skel, AddPrintsTheResultAtTheConfigVersion) {
  for (std::string version : {"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"}) {
    Recorder r;
    auto res = run(r.plugin(), env_for("ADD"), conf(version));
    ASSERT_EQ(res.exit_code, 0) << res.out;
    json doc = res.doc();
    EXPECT_EQ(doc["cniVersion"], version);
    EXPECT_EQ(doc["ips"][0].contains("version"), version.rfind("0.", 0) == 0);
    EXPECT_EQ(doc["interfaces"][0]["sandbox"], "/run/netns/p");
    ASSERT_EQ(r.calls, std::vector<std::string>{"ADD"});
    EXPECT_EQ(r.last.args.k8s_pod_name, "p0");
    EXPECT_EQ(r.last.args.get("IP"), "10.0.0.9");
    EXPECT_EQ(r.last.stdin_text, conf(version));
  }
}

TEST(Skel, DelWithoutNetnsIsValidAndPrintsNothing) {
  Recorder r;
  auto env = env_for("DEL");
  env.erase("CNI_NETNS");
  auto res = run(r.plugin(), env, conf("1.0.0"));
  EXPECT_EQ(res.exit_code, 0) << res.out;
  EXPECT_EQ(res.out, "");
  EXPECT_EQ(r.calls, std::vector<std::string>{"DEL"});
}

struct VersionRule {
  const char* command;
  const char* version;
  bool allowed;
};

class VersionRules : public testing::TestWithParam<VersionRule> {};

TEST_P(VersionRules, FollowTheSpec) {
  const auto& rule = GetParam();
  Recorder r;
  auto res = run(r.plugin(), env_for(rule.command), conf(rule.version));
  if (rule.allowed) {
    EXPECT_EQ(res.exit_code, 0) << res.out;
    EXPECT_EQ(r.calls, std::vector<std::string>{rule.command});
    return;
  }
  EXPECT_EQ(res.exit_code, 1);
  EXPECT_TRUE(r.calls.empty()) << "handler ran for a disallowed version";
  json doc = res.doc();
  EXPECT_EQ(doc["code"], 1);
  EXPECT_EQ(doc["cniVersion"], rule.version);
  EXPECT_NE(doc["msg"].get<std::string>().find(rule.command), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(
    Spec, VersionRules,
    testing::Values(VersionRule{"CHECK", "0.3.0", false}, VersionRule{"CHECK", "0.3.1", false},
                    VersionRule{"CHECK", "0.4.0", true}, VersionRule{"CHECK", "1.1.0", true},
                    VersionRule{"STATUS", "1.0.0", false}, VersionRule{"STATUS", "1.1.0", true},
                    VersionRule{"GC", "0.4.0", false}, VersionRule{"GC", "1.1.0", true},
                    VersionRule{"DEL", "0.3.0", true}));

struct ErrorCase {
  const char* name;
  std::map<std::string, std::string> env;
  std::string stdin_text;
  int code;
  const char* culprit;
};

std::map<std::string, std::string> without(std::map<std::string, std::string> env,
                                           const std::string& key) {
  env.erase(key);
  return env;
}

std::map<std::string, std::string> with(std::map<std::string, std::string> env,
                                        const std::string& key, const std::string& value) {
  env[key] = value;
  return env;
}

class Errors : public testing::TestWithParam<ErrorCase> {};

// Every error path prints {cniVersion, code, msg} on stdout, exits non-zero
// and never runs the handler.
TEST_P(Errors, PrintACniErrorNamingTheCulprit) {
  const auto& c = GetParam();
  Recorder r;
  auto res = run(r.plugin(), c.env, c.stdin_text);
  EXPECT_EQ(res.exit_code, 1);
  EXPECT_TRUE(r.calls.empty());
  json doc = json::parse(res.out, nullptr, false);
  ASSERT_TRUE(doc.is_object()) << res.out;
  EXPECT_EQ(doc["code"], c.code) << res.out;
  EXPECT_TRUE(doc["cniVersion"].is_string());
  EXPECT_NE(doc["msg"].get<std::string>().find(c.culprit), std::string::npos) << res.out;
}

INSTANTIATE_TEST_SUITE_P(
    Skel, Errors,
    testing::Values(
        ErrorCase{"NoCommand", {}, "", 4, "CNI_COMMAND"},
        ErrorCase{"UnknownCommand", env_for("UPDATE"), conf("1.0.0"), 4, "UPDATE"},
        ErrorCase{"NoContainer", without(env_for("ADD"), "CNI_CONTAINERID"), conf("1.0.0"), 3,
                  "CNI_CONTAINERID"},
        ErrorCase{"NoNetns", without(env_for("ADD"), "CNI_NETNS"), conf("1.0.0"), 4, "CNI_NETNS"},
        ErrorCase{"NoPath", without(env_for("ADD"), "CNI_PATH"), conf("1.0.0"), 4, "CNI_PATH"},
        ErrorCase{"BadIfname", with(env_for("ADD"), "CNI_IFNAME", "a/b"), conf("1.0.0"), 4,
                  "CNI_IFNAME"},
        ErrorCase{"BadContainer", with(env_for("ADD"), "CNI_CONTAINERID", ".."), conf("1.0.0"), 4,
                  "CNI_CONTAINERID"},
        ErrorCase{"UnknownArg", with(env_for("ADD"), "CNI_ARGS", "FOO=1"), conf("1.0.0"), 4, "FOO"},
        ErrorCase{"MalformedJson", env_for("ADD"), "{\"cniVersion\":", 6, "JSON"},
        ErrorCase{"HugeStdin", env_for("ADD"), std::string(kMaxStdin + 10, ' '), 6, "exceeds"},
        ErrorCase{"NoName", env_for("ADD"), R"({"cniVersion":"1.0.0"})", 7, "name"},
        ErrorCase{"WrongType", env_for("ADD"), R"({"cniVersion":"1.0.0","name":"n","type":1})", 7,
                  "type"},
        ErrorCase{"UnsupportedValue", env_for("ADD"),
                  R"({"cniVersion":"1.0.0","name":"n","logLevel":"chatty"})", 2, "logLevel"},
        ErrorCase{"OldVersion", env_for("ADD"), conf("0.2.0"), 1, "0.2.0"},
        ErrorCase{"NoVersion", env_for("ADD"), R"({"name":"n"})", 1, "cniVersion"}),
    [](const auto& param_info) { return std::string(param_info.param.name); });

TEST(Skel, HandlerErrorsKeepTheirCode) {
  for (auto kind : {ErrorKind::kTryAgainLater, ErrorKind::kNotAvailable,
                    ErrorKind::kLimitedConnectivity, ErrorKind::kIo, ErrorKind::kDeviceBusy}) {
    Plugin p;
    p.name = "test";
    p.status = [kind](const Call&) -> Status { return Error(kind, "device mlx5_0 is resting"); };
    auto res = run(p, {{"CNI_COMMAND", "STATUS"}}, conf("1.1.0"));
    EXPECT_EQ(res.exit_code, 1);
    EXPECT_EQ(res.doc()["code"], error_code(Error(kind, "")));
    EXPECT_EQ(res.doc()["msg"], "device mlx5_0 is resting");
  }
}

TEST(Skel, ErrorCodesAreMappedInOnePlace) {
  std::map<ErrorKind, int> expected = {{ErrorKind::kIncompatibleVersion, 1},
                                       {ErrorKind::kUnsupportedField, 2},
                                       {ErrorKind::kUnknownContainer, 3},
                                       {ErrorKind::kInvalidEnvironment, 4},
                                       {ErrorKind::kIo, 5},
                                       {ErrorKind::kDecode, 6},
                                       {ErrorKind::kInvalidConfig, 7},
                                       {ErrorKind::kTryAgainLater, 11},
                                       {ErrorKind::kNotAvailable, 50},
                                       {ErrorKind::kLimitedConnectivity, 51},
                                       {ErrorKind::kDeviceNotFound, 100},
                                       {ErrorKind::kDeviceBusy, 101},
                                       {ErrorKind::kKernel, 102},
                                       {ErrorKind::kDelegateFailed, 103},
                                       {ErrorKind::kPluginNotFound, 103},
                                       {ErrorKind::kAddressUnavailable, 104},
                                       {ErrorKind::kRdmaIsolation, 105},
                                       {ErrorKind::kGidTimeout, 106},
                                       {ErrorKind::kState, 107},
                                       {ErrorKind::kInternal, 199}};
  for (auto [kind, code] : expected) {
    EXPECT_EQ(error_code(Error(kind, "")), code);
  }
  EXPECT_EQ(error_code(Error::delegated(42, "x", "")), 42);
}

// What a caller decides from another plugin's code, read as the spec's numbers.
TEST(Skel, APluginsCodeSaysWhetherItPredatesACommandOrRejectsTheConfig) {
  std::set<int> predates_status_codes;
  std::set<int> predates_gc_codes;
  std::set<int> rejects_codes;
  for (int code = 1; code < 200; ++code) {
    Error e = Error::delegated(code, "x", "");
    if (predates_status(e)) {
      predates_status_codes.insert(code);
    }
    if (predates_gc(e)) {
      predates_gc_codes.insert(code);
    }
    if (rejects_the_config(e)) {
      rejects_codes.insert(code);
    }
  }
  EXPECT_EQ(predates_status_codes, (std::set<int>{1, 4}));
  EXPECT_EQ(predates_gc_codes, (std::set<int>{1, 3, 4}));
  EXPECT_EQ(rejects_codes, (std::set<int>{1, 2, 4, 6, 7}));
  // rdmanet's own errors are judged by the code they become.
  EXPECT_TRUE(rejects_the_config(Error(ErrorKind::kInvalidConfig, "")));
  EXPECT_FALSE(rejects_the_config(Error(ErrorKind::kPluginNotFound, "")));
}

TEST(Skel, ErrorJsonCarriesDetailsAndSurvivesBinaryInput) {
  json doc = json::parse(error_json(Error(ErrorKind::kIo, "bad \xff byte", "more"), "0.4.0"));
  EXPECT_EQ(doc["cniVersion"], "0.4.0");
  EXPECT_EQ(doc["code"], 5);
  EXPECT_EQ(doc["details"], "more");
}

TEST(Skel, ExceptionsBecomeInternalErrors) {
  Plugin p;
  p.name = "test";
  p.known_args = {"IP"};
  p.add = [](const Call&) -> Expected<Result> { throw std::runtime_error("boom"); };
  auto res = run(p, env_for("ADD"), conf("1.0.0"));
  EXPECT_EQ(res.exit_code, 1);
  EXPECT_EQ(res.doc()["code"], 199);
}

}  // namespace
}  // namespace rdmanet::cni
