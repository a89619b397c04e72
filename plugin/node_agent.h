// `rdmanet node-agent`: what no runtime cleans up, and what operators need to see.
//
// Multus forwards neither STATUS nor GC to secondary networks and containerd 1.6 calls
// neither, so an attachment whose DEL was missed (kubelet or containerd crash, node power
// loss) would keep its device and its addresses until a later ADD happened to reclaim
// them. Every interval the agent reconciles each state directory:
//   - an attachment whose pod netns is gone (the path, or another netns under it: the
//     cookie recorded at ADD decides) for longer than the grace period is torn down by
//     the undo DEL runs (device and RDMA device home, IPAM released, device-info and pod
//     files removed), under the device's lock, after looking again under that lock;
//     an attachment whose netns exists is never touched;
//   - every network with an rdmanet-ipam section (from the attachments' configs and the
//     files in networksDir) gets `rdmanet-ipam reconcile`: the plugin's own reclaim rule
//     (leases whose netns is gone, orphans, unreadable files) under its store lock;
//   - records it cannot trust or parse are counted and logged, never deleted;
//   - each live RoCE rail's GID table is read again, and the pod's files rewritten when the
//     RoCE v2 GID index of the rail's address moved or went (gid_refresh.h).
// When it first saw each orphan is kept in <stateDir>/.agent/orphans.json, so a SIGKILL
// at any point costs nothing: the next round finds what is left and finishes it.
// Metrics (Prometheus text format) and /healthz are served on `listen`.
#pragma once

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "netns/netns.h"
#include "plugin/gid_refresh.h"
#include "plugin/record.h"

namespace rdmanet::plugin {

struct AgentConfig {
  std::vector<std::string> state_dirs = {"/var/lib/cni/rdmanet"};
  std::string networks_dir;  // network configs (NAD configs, conflists) to reconcile IPAM for
  std::string cni_path = "/opt/cni/bin";
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

// What one round saw and did.
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

class NodeAgent {
 public:
  explicit NodeAgent(AgentConfig config) : config_(std::move(config)) {}

  const AgentConfig& config() const { return config_; }
  // One reconcile round over every state directory and network.
  RoundReport round();
  // The Prometheus text exposition (format 0.0.4) of the last round and the totals.
  std::string metrics() const;
  // Healthy: a round finished within the last three intervals.
  bool healthy(std::chrono::steady_clock::time_point now) const;
  // Until when it stays healthy without another round.
  std::chrono::steady_clock::time_point healthy_until() const;

 private:
  void reconcile_state_dir(const std::string& dir, RoundReport& report,
                           std::map<std::string, nlohmann::json>& networks,
                           std::map<std::string, nlohmann::json>& keep);
  // Keeps a live attachment's pod files right with its RoCE v2 GID index (gid_refresh.h).
  void refresh_gids(const AttachmentRecord& record, const netns::Netns& pod,
                    const std::string& state_dir, RoundReport& report);
  void read_networks_dir(RoundReport& report, std::map<std::string, nlohmann::json>& networks);
  // `etcd`: the network's cluster-mode etcd (cluster_etcd), "" in node mode.
  void reconcile_ipam(const std::string& network, const std::string& config,
                      const std::string& etcd, RoundReport& report);

  AgentConfig config_;
  RoundReport last_;
  size_t rounds_ = 0;
  std::map<std::string, size_t> torn_down_total_;
  std::map<std::pair<std::string, std::string>, size_t> reclaimed_total_;
  std::map<std::string, size_t> ipam_errors_total_;
  std::map<std::string, size_t> etcd_errors_total_;
  // Cluster mode: the etcds this round has heartbeaten to, and the last listing of the
  // blocks of owners without a heartbeat, (network, node) -> blocks.
  static constexpr size_t kSilentEvery = 10;
  std::set<std::string> beaten_;
  GidTables gid_tables_;  // the shared-mode GID tables this round has read
  std::map<std::pair<std::string, std::string>, size_t> silent_;
  std::map<std::string, size_t> errors_total_;
  size_t gid_index_changes_total_ = 0;
  std::chrono::steady_clock::time_point last_done_{};
  double last_done_unix_ = 0;
};

// The command: rounds every interval until SIGTERM or SIGINT, serving metrics between
// them. Returns the process exit status.
int node_agent_main(const std::vector<std::string>& args);

}  // namespace rdmanet::plugin
