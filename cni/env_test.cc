#include "cni/env.h"

#include <gtest/gtest.h>

#include <map>

#include "cni/error_code.h"

namespace rdmanet::cni {
namespace {

Getenv fake_env(const std::map<std::string, std::string>& vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) {
      return std::nullopt;
    }
    return it->second;
  };
}

std::map<std::string, std::string> full_env(const std::string& command) {
  return {{"CNI_COMMAND", command}, {"CNI_CONTAINERID", "c0ffee"}, {"CNI_NETNS", "/run/netns/p"},
          {"CNI_IFNAME", "net1"},   {"CNI_PATH", "/opt/cni/bin"},  {"CNI_ARGS", "IgnoreUnknown=1"}};
}

TEST(Environment, ReadsEveryVariable) {
  auto env = read_environment(fake_env(full_env("ADD")));
  ASSERT_TRUE(env.ok()) << env.error().msg();
  EXPECT_EQ(env->command, Command::kAdd);
  EXPECT_EQ(env->container_id, "c0ffee");
  EXPECT_EQ(env->netns, "/run/netns/p");
  EXPECT_EQ(env->ifname, "net1");
  EXPECT_EQ(env->path, "/opt/cni/bin");
  EXPECT_EQ(env->args, "IgnoreUnknown=1");
}

TEST(Environment, MissingCommandIsCode4) {
  auto env = read_environment(fake_env({}));
  ASSERT_FALSE(env.ok());
  EXPECT_EQ(error_code(env.error()), 4);
  EXPECT_NE(env.error().msg().find("CNI_COMMAND"), std::string::npos);
}

TEST(Environment, UnknownCommandIsCode4) {
  auto vars = full_env("FROB");
  auto env = read_environment(fake_env(vars));
  ASSERT_FALSE(env.ok());
  EXPECT_EQ(error_code(env.error()), 4);
  EXPECT_NE(env.error().msg().find("FROB"), std::string::npos);
}

TEST(Environment, CommandsAreTheSpecsUpperCaseNames) {
  for (const auto& [command, name] : kCommandNames) {
    auto env = read_environment(fake_env(full_env(std::string(name))));
    ASSERT_TRUE(env.ok()) << name << ": " << env.error().msg();
    EXPECT_EQ(env->command, command) << name;
  }
  EXPECT_FALSE(read_environment(fake_env(full_env("add"))).ok()) << "libcni matches exactly";
}

struct Requirement {
  const char* command;
  const char* variable;
  bool required;
};

class PerCommandRequirement : public testing::TestWithParam<Requirement> {};

TEST_P(PerCommandRequirement, FollowsTheSpec) {
  const auto& r = GetParam();
  auto vars = full_env(r.command);
  vars.erase(r.variable);
  auto env = read_environment(fake_env(vars));
  if (!r.required) {
    EXPECT_TRUE(env.ok()) << r.command << " without " << r.variable << ": " << env.error().msg();
    return;
  }
  ASSERT_FALSE(env.ok()) << r.command << " without " << r.variable << " was accepted";
  EXPECT_NE(env.error().msg().find(r.variable), std::string::npos) << env.error().msg();
  int want = std::string(r.variable) == "CNI_CONTAINERID" ? 3 : 4;
  EXPECT_EQ(error_code(env.error()), want);
}

INSTANTIATE_TEST_SUITE_P(
    Spec, PerCommandRequirement,
    testing::Values(
        Requirement{"ADD", "CNI_CONTAINERID", true}, Requirement{"ADD", "CNI_NETNS", true},
        Requirement{"ADD", "CNI_IFNAME", true}, Requirement{"ADD", "CNI_PATH", true},
        Requirement{"ADD", "CNI_ARGS", false}, Requirement{"DEL", "CNI_NETNS", false},
        Requirement{"DEL", "CNI_CONTAINERID", true}, Requirement{"DEL", "CNI_IFNAME", true},
        Requirement{"DEL", "CNI_PATH", true}, Requirement{"CHECK", "CNI_NETNS", true},
        Requirement{"CHECK", "CNI_IFNAME", true}, Requirement{"STATUS", "CNI_CONTAINERID", false},
        Requirement{"STATUS", "CNI_NETNS", false}, Requirement{"STATUS", "CNI_IFNAME", false},
        Requirement{"STATUS", "CNI_PATH", false}, Requirement{"GC", "CNI_CONTAINERID", false},
        Requirement{"GC", "CNI_IFNAME", false}, Requirement{"GC", "CNI_PATH", true},
        Requirement{"VERSION", "CNI_PATH", false}));

TEST(Environment, StatusNeedsNoContainer) {
  auto env = read_environment(fake_env({{"CNI_COMMAND", "STATUS"}}));
  ASSERT_TRUE(env.ok()) << env.error().msg();
  EXPECT_EQ(env->command, Command::kStatus);
}

TEST(Environment, HostileContainerIdsAreRejected) {
  for (const std::string& id :
       std::vector<std::string>{"../../etc", "a/b", "-leading-dash", "a b", std::string("a\0b", 3),
                                std::string(10240, 'x') + "/"}) {
    auto vars = full_env("ADD");
    vars["CNI_CONTAINERID"] = id;
    auto env = read_environment(fake_env(vars));
    ASSERT_FALSE(env.ok()) << "accepted container id of size " << id.size();
    EXPECT_EQ(error_code(env.error()), 4);
    EXPECT_NE(env.error().msg().find("CNI_CONTAINERID"), std::string::npos);
    EXPECT_LT(env.error().msg().size(), 200u) << "message must not echo 10 KB of input";
  }
}

// Bytes that are not UTF-8 cannot be echoed in a JSON reply: 4, with the name in hex.
TEST(InterfaceName, NonUtf8IsAnInvalidEnvironment) {
  for (const std::string& bad : {std::string("net\xff"), std::string("\xc3"),
                                 std::string("\xc0\xae"), std::string("\xed\xa0\x80")}) {
    auto s = validate_ifname(bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(error_code(s.error()), 4);
    EXPECT_NE(s.error().msg().find("not UTF-8"), std::string::npos) << s.error().msg();
    EXPECT_EQ(s.error().msg().find(bad), std::string::npos) << "raw bytes echoed";
  }
  // UTF-8 names the kernel and libcni both keep verbatim.
  for (const std::string& good :
       {std::string("net\u00e9"), std::string("\u00c5\u00c5"), std::string("rail\u2461")}) {
    EXPECT_TRUE(validate_ifname(good).ok()) << good;
  }
}

TEST(InterfaceName, FollowsLibcni) {
  EXPECT_TRUE(validate_ifname("net1").ok());
  EXPECT_TRUE(validate_ifname("a23456789012345").ok());  // 15 bytes
  for (const std::string& bad : std::vector<std::string>{
           "", "a234567890123456", ".", "..", "a/b", "a:b", "a b", "a\tb", "a\nb",
           std::string("a\0b", 3), "net%d", "%s%s%n", "net\u00a0", "net\u2003", "a\xa0"}) {
    auto s = validate_ifname(bad);
    ASSERT_FALSE(s.ok()) << "accepted \"" << bad << "\"";
    EXPECT_EQ(error_code(s.error()), 4);
    EXPECT_NE(s.error().msg().find("CNI_IFNAME"), std::string::npos);
  }
}

TEST(CniArgs, ParsesKubernetesKeys) {
  auto args = parse_cni_args(
      "IgnoreUnknown=true;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=pod-0;"
      "K8S_POD_INFRA_CONTAINER_ID=abc;K8S_POD_UID=u-1;MAC=02:00:00:00:00:01",
      {});
  ASSERT_TRUE(args.ok()) << args.error().msg();
  EXPECT_EQ(args->k8s_pod_namespace, "ns");
  EXPECT_EQ(args->k8s_pod_name, "pod-0");
  EXPECT_EQ(args->k8s_pod_infra_container_id, "abc");
  EXPECT_EQ(args->k8s_pod_uid, "u-1");
  EXPECT_EQ(args->get("MAC"), "02:00:00:00:00:01");
  EXPECT_EQ(args->get("absent"), "");
}

TEST(CniArgs, UnknownKeysNeedIgnoreUnknown) {
  auto strict = parse_cni_args("FOO=1", {});
  ASSERT_FALSE(strict.ok());
  EXPECT_EQ(error_code(strict.error()), 4);
  EXPECT_NE(strict.error().msg().find("FOO"), std::string::npos);

  EXPECT_TRUE(parse_cni_args("FOO=1;IgnoreUnknown=1", {}).ok());
  EXPECT_TRUE(parse_cni_args("IP=10.0.0.2", {"IP"}).ok());
  EXPECT_FALSE(parse_cni_args("FOO=1;IgnoreUnknown=false", {}).ok());
}

TEST(CniArgs, MalformedInputIsCode4) {
  for (const char* bad : {"novalue", "=x", "IgnoreUnknown=maybe"}) {
    auto args = parse_cni_args(bad, {});
    ASSERT_FALSE(args.ok()) << bad;
    EXPECT_EQ(error_code(args.error()), 4);
  }
  EXPECT_TRUE(parse_cni_args("", {}).ok());
  EXPECT_TRUE(parse_cni_args("K8S_POD_NAME=a;", {}).ok());
  EXPECT_EQ(parse_cni_args("K8S_POD_NAME=a=b", {})->k8s_pod_name, "a=b");
}

}  // namespace
}  // namespace rdmanet::cni
