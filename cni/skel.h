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

// One invocation of `plugin` inside this process, as plugin_main would run it from `getenv`
// and `stdin_text` (the same checks, handlers and encoding, without the process, the
// logging setup or stdout): the reply plugin_main would print on success, else its error.
// For a caller that runs a plugin it links in place of exec'ing it (cni/delegate.h).
Expected<std::string> run_in_process(const Plugin& plugin, const Getenv& getenv,
                                     const std::string& stdin_text);

// The JSON document for an error reply.
std::string error_json(const Error& error, const std::string& cni_version);

}  // namespace rdmanet::cni
