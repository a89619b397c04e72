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

// Reads every config in `dir` (which must be private: its configs name directories
// rdmanet-ipam releases leases in). Entries are regular files, or a ConfigMap volume's
// keys: "<name> -> ..data/<name>" with "..data -> ..<timestamp>", a private directory of
// the volume; exactly these links are followed, nothing else. Dot names (the volume's own)
// are not configs. A missing `dir` holds none.
NetworksDir read_networks_dir(const std::string& dir);

}  // namespace rdmanet::agent
