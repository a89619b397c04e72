// The CNI environment: CNI_COMMAND and friends, validated per command as the
// spec and libcni require. Plugins receive an Environment and never read
// environment variables themselves.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/names.h"

namespace rdmanet::cni {

enum class Command { kAdd, kDel, kCheck, kStatus, kGc, kVersion };
// CNI_COMMAND's values.
inline constexpr Name<Command> kCommandNames[] = {
    {Command::kAdd, "ADD"},       {Command::kDel, "DEL"}, {Command::kCheck, "CHECK"},
    {Command::kStatus, "STATUS"}, {Command::kGc, "GC"},   {Command::kVersion, "VERSION"},
};

// Looks up one environment variable; returns nullopt when unset.
using Getenv = std::function<std::optional<std::string>(const std::string&)>;
Getenv process_getenv();

// CNI_ARGS after parsing: "K1=V1;K2=V2".
struct CniArgs {
  std::map<std::string, std::string> values;  // every key given, known or not
  std::string k8s_pod_namespace;
  std::string k8s_pod_name;
  std::string k8s_pod_infra_container_id;
  std::string k8s_pod_uid;

  // The value of a key, or empty when not given.
  std::string get(const std::string& key) const;
};

// Parses CNI_ARGS. Keys outside `known` (the K8S_POD_* keys and IgnoreUnknown
// are always known) are an error unless IgnoreUnknown is true, as in libcni.
Expected<CniArgs> parse_cni_args(const std::string& text, const std::vector<std::string>& known);

struct Environment {
  Command command = Command::kVersion;
  std::string container_id;
  std::string netns;  // may be empty for DEL
  std::string ifname;
  std::string args;  // raw CNI_ARGS
  std::string path;  // raw CNI_PATH (colon separated)
};

// Reads and validates the environment for the command in CNI_COMMAND.
// Missing required variables, an unknown command, an invalid container id or
// interface name are errors (code 4, or 3 for a missing container id).
Expected<Environment> read_environment(const Getenv& getenv);

// Interface-name rules of libcni: not empty, at most 15 bytes, not "." or
// "..", no '/', ':' or white space.
Status validate_ifname(const std::string& name);

// Container-id rules of libcni: [a-zA-Z0-9][a-zA-Z0-9_.-]*.
Status validate_container_id(const std::string& id);

}  // namespace rdmanet::cni
