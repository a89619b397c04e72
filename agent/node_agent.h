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
//     files in networksDir, agent/networks_dir.h) gets rdmanet-ipam's reconcile, in process
//     (ipam/reconcile.h): the plugin's own reclaim rule (leases whose netns is gone,
//     orphans, unreadable files) under its store lock;
//   - records it cannot trust or parse are counted and logged, never deleted;
//   - each live RoCE rail's GID table is read again, and the pod's files rewritten when the
//     RoCE v2 GID index of the rail's address moved or went (agent/gid_refresh.h).
// When it first saw each orphan is kept in <stateDir>/.agent/orphans.json
// (agent/orphan_book.h), so a SIGKILL at any point costs nothing: the next round finds what
// is left and finishes it. Metrics (agent/metrics.h) and /healthz are served on `listen`
// (agent/metrics_server.h).
#pragma once

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "agent/gid_refresh.h"
#include "agent/options.h"
#include "agent/orphan_book.h"
#include "agent/round.h"
#include "cni/skel.h"
#include "ipam/lease.h"
#include "netns/netns.h"
#include "plugin/record.h"
#include "plugin/store.h"

namespace rdmanet::agent {

class NodeAgent {
 public:
  // `linked_ipam`: the IPAM plugins the binary links (for teardowns: rdmanet-ipam in process).
  NodeAgent(AgentConfig config, std::span<const cni::Plugin* const> linked_ipam)
      : config_(std::move(config)), linked_ipam_(linked_ipam) {}

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
                           std::map<std::string, std::vector<ipam::Owner>>& keep);
  // An attachment whose netns is gone (since `since`): torn down as DEL would once the grace
  // period is over. True when it is done with.
  bool handle_orphan(plugin::StateStore& store, const plugin::AttachmentRecord& record,
                     long long since, long long now, RoundReport& report);
  // Keeps a live attachment's pod files right with its RoCE v2 GID index (gid_refresh.h).
  void refresh_gids(const plugin::AttachmentRecord& record, const netns::Netns& pod,
                    const std::string& state_dir, RoundReport& report);
  void read_networks_dir(RoundReport& report, std::map<std::string, nlohmann::json>& networks);
  // rdmanet-ipam's reconcile of one network, in process; `keep`: its attachments with a record.
  void reconcile_ipam(const std::string& network, const nlohmann::json& ipam,
                      std::vector<ipam::Owner> keep, RoundReport& report);

  AgentConfig config_;
  std::span<const cni::Plugin* const> linked_ipam_;
  RoundReport last_;
  Totals totals_;
  // Cluster mode: the etcds this round has heartbeaten to; the silent owners' blocks are
  // listed every kSilentEvery rounds only.
  static constexpr size_t kSilentEvery = 10;
  std::set<std::string> beaten_;
  GidTables gid_tables_;  // the shared-mode GID tables this round has read
  std::chrono::steady_clock::time_point last_done_{};
};

// The command: rounds every interval until SIGTERM or SIGINT, serving metrics between
// them. Returns the process exit status.
int node_agent_main(const std::vector<std::string>& args,
                    std::span<const cni::Plugin* const> linked_ipam);

}  // namespace rdmanet::agent
