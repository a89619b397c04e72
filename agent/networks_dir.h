// The node agent's --networks-dir: network configs dropped on the node (a file per network,
// or a ConfigMap volume) whose address pools it watches even while no pod is attached.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"

namespace rdmanet::agent {

struct NetworksDir {
  std::map<std::string, nlohmann::json> networks;  // by the config's "name"
  std::vector<Error> problems;  // each entry not read, and why: nothing is skipped silently
};

// Reads every config in the directory `path` (which must be private: its configs name directories
// rdmanet-ipam releases leases in). Entries are regular files, or a ConfigMap volume's
// keys: "<name> -> ..data/<name>" with "..data -> ..<timestamp>", a private directory of
// the volume; exactly these links are followed, nothing else. Dot names (the volume's own)
// are not configs. A missing directory holds none. Everything is read relative to the open
// directory (base/dir.h).
NetworksDir read_networks_dir(const std::string& path);

}  // namespace rdmanet::agent
