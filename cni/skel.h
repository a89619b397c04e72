// The plugin skeleton: reads the environment and stdin, checks versions,
// dispatches ADD/DEL/CHECK/STATUS/GC/VERSION to the plugin's handlers and
// writes the result or the CNI error. Plugins never parse the environment or
// versions themselves.
#pragma once

#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "cni/config.h"
#include "cni/env.h"
#include "cni/result.h"

namespace rdmanet::cni {

// Everything a handler needs about one invocation.
struct Call {
  Environment env;
  NetConf conf;
  CniArgs args;            // parsed CNI_ARGS
  std::string stdin_text;  // the config as received, for delegation
};

struct Plugin {
  std::string name;  // "rdmanet"
  // CNI_ARGS keys the plugin understands (besides K8S_POD_* and IgnoreUnknown).
  std::vector<std::string> known_args;
  std::function<Expected<Result>(const Call&)> add;
  std::function<Status(const Call&)> del;
  std::function<Status(const Call&)> check;
  std::function<Status(const Call&)> status;
  std::function<Status(const Call&)> gc;
};

inline constexpr size_t kMaxStdin = 4 << 20;

// Runs one invocation; returns the process exit code (0 or 1).
int plugin_main(const Plugin& plugin, const Getenv& getenv, std::istream& in, std::ostream& out);

// The JSON document for an error reply.
std::string error_json(const Error& error, const std::string& cni_version);

}  // namespace rdmanet::cni
