// The node agent's options: a config file (--config, JSON), then flags, which win.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "base/error.h"

namespace rdmanet::agent {

struct AgentConfig {
  std::vector<std::string> state_dirs = {"/var/lib/cni/rdmanet"};
  std::string networks_dir;  // network configs (NAD configs, conflists) to reconcile IPAM for
  std::string cni_path = "/opt/cni/bin";  // IPAM plugins the binary does not link, for teardown
  std::chrono::seconds interval{30};
  std::chrono::seconds grace{60};
  std::string listen = "127.0.0.1:9520";  // host:port for /metrics and /healthz; "" for none
  int ipam_timeout_seconds = 60;
  bool once = false;  // one round, then exit (status 1 when it had errors)
};

// `--config FILE` (JSON with the keys below), then flags, which win:
//   --state-dir DIR (repeatable), --networks-dir DIR, --cni-path PATH, --interval SECONDS,
//   --grace SECONDS, --listen HOST:PORT, --once.
// JSON keys: stateDirs, networksDir, cniPath, intervalSeconds, graceSeconds, listen.
Expected<AgentConfig> parse_agent_args(const std::vector<std::string>& args);

}  // namespace rdmanet::agent
