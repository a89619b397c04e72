// What the node agent's rounds saw and did: one round's report, and the totals since the
// agent started, from which the metrics are written (agent/metrics.h).
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace rdmanet::agent {

struct RoundReport {
  std::map<std::pair<std::string, std::string>, size_t> attachments;  // (network, mode)
  size_t held_devices = 0;
  size_t orphans_waiting = 0;               // netns gone, inside the grace period
  size_t unreadable = 0;                    // records it cannot trust or parse
  std::map<std::string, size_t> torn_down;  // by reason
  size_t gid_index_changes = 0;             // live rails whose pod files were rewritten
  struct Pool {
    std::string network;
    std::string range_set;  // "ipam.ranges[0]"
    std::string ranges;
    double size = 0;
    size_t used = 0;
    size_t blocks = 0;
    bool cluster = false;
  };
  std::vector<Pool> pools;
  std::map<std::pair<std::string, std::string>, size_t> leases_reclaimed;  // (network, reason)
  std::map<std::string, size_t> ipam_errors;                               // by network
  std::map<std::string, size_t> etcd_errors;                               // by network
  std::map<std::string, size_t> errors;                                    // by stage
  std::vector<std::string> messages;                                       // each error, named
  double duration_seconds = 0;
};

struct Totals {
  size_t rounds = 0;
  std::map<std::string, size_t> torn_down;
  std::map<std::pair<std::string, std::string>, size_t> leases_reclaimed;
  std::map<std::string, size_t> ipam_errors;
  std::map<std::string, size_t> etcd_errors;
  std::map<std::string, size_t> errors;
  size_t gid_index_changes = 0;
  // Cluster mode: the last listing of the blocks of owners without a heartbeat, by
  // (network, node); a network's fresh listing replaces its entries.
  std::map<std::pair<std::string, std::string>, size_t> silent_blocks;
  double last_done_unix = 0;

  // Adds a finished round's counts.
  void add(const RoundReport& round, double done_unix);
};

}  // namespace rdmanet::agent
