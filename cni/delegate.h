// Executing another CNI plugin (an IPAM plugin) as the spec says: found in
// CNI_PATH, given the same environment with CNI_COMMAND set, the config on
// stdin; its result or its CNI error comes back as a value. A plugin that
// does not finish in time is killed.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "base/error.h"
#include "cni/env.h"
#include "cni/result.h"

namespace rdmanet::cni {

struct Plugin;

struct DelegateOptions {
  std::chrono::milliseconds timeout{60000};
  // A plugin linked into this process: a delegate of its name runs in process (the same
  // handlers, result and errors, without the exec), and `timeout` does not apply.
  const Plugin* in_process = nullptr;
};

// Finds an executable plugin named `type` in the colon-separated `cni_path`.
Expected<std::string> find_plugin(const std::string& type, const std::string& cni_path);

// Runs `type` with `command`; returns its stdout when it exits 0. A CNI error
// it prints is returned with its own code (prefixed with the plugin name).
Expected<std::string> exec_plugin(const std::string& type, Command command, const Environment& env,
                                  const std::string& stdin_text,
                                  const DelegateOptions& options = {});

// Runs a program that is not a CNI call (`rdmanet-ipam reconcile`): its stdout when it
// exits 0, else an error with the end of what it said. Same child rules as a plugin:
// killed on timeout, and with the caller.
Expected<std::string> exec_program(const std::string& binary, const std::vector<std::string>& args,
                                   const std::string& stdin_text,
                                   std::chrono::milliseconds timeout);

// ADD through a delegate, decoding its result (which is in `cni_version`).
Expected<Result> delegate_add(const std::string& type, const Environment& env,
                              const std::string& stdin_text, const std::string& cni_version,
                              const DelegateOptions& options = {});

// DEL, CHECK, STATUS or GC through a delegate (no result expected).
Status delegate_command(const std::string& type, Command command, const Environment& env,
                        const std::string& stdin_text, const DelegateOptions& options = {});

}  // namespace rdmanet::cni
