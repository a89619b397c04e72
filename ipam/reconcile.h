// The node agent's part of rdmanet-ipam, for one network: the reclaim rule over every lease of
// the network (what a sweep does when a pool is full) but those of the attachments the main
// plugin still has a record of (it releases them with its teardown, after its own grace
// period), how full each range set is afterwards, and in cluster mode the node's heartbeat and
// the owners of the network's blocks who have none. `rdmanet node-agent` runs it in process
// each round; `rdmanet-ipam reconcile` prints it as JSON (ipam/README.md).
#pragma once

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "ipam/allocator.h"
#include "ipam/lease.h"

namespace rdmanet::ipam {

struct ReconcileRequest {
  std::string network;
  nlohmann::json ipam;       // the network's rdmanet-ipam section
  std::vector<Owner> keep;   // their leases stay whatever the rule says
  int heartbeat_ttl = 0;     // cluster mode: put the node's heartbeat, with this TTL; 0: none
  bool list_silent = false;  // cluster mode: list the block owners without a heartbeat
  // How long to wait for the store's lock (an ADD or DEL holding it); none: as long as it
  // takes. The node agent bounds it, so a stuck call cannot stall its rounds.
  std::optional<std::chrono::milliseconds> lock_wait;
};

struct NetworkReport {
  bool cluster = false;
  std::map<std::string, size_t> released;  // leases, by reason
  std::vector<Allocator::PoolUsage> pools;
  std::optional<std::map<std::string, size_t>> silent_nodes;  // node -> blocks it holds
  // etcd did not answer the heartbeat or the listing: reported, not a failure, since the
  // node's own part is done.
  std::string etcd_error;
};

Expected<NetworkReport> reconcile_network(const ReconcileRequest& request);

}  // namespace rdmanet::ipam
