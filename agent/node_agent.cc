#include "agent/node_agent.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <ctime>

#include "agent/metrics.h"
#include "agent/networks_dir.h"
#include "base/json_fields.h"
#include "ipam/reconcile.h"
#include "plugin/attachment.h"
#include "plugin/conf.h"

namespace rdmanet::agent {

using nlohmann::json;
using plugin::AttachmentRecord;
using Clock = std::chrono::steady_clock;

namespace {

long long unix_now() { return static_cast<long long>(std::time(nullptr)); }

// The network config's rdmanet-ipam section (its own, or a conflist plugin's), or nullptr
// when it has none.
const json* rdmanet_ipam_section(const json& doc) {
  auto ours = [](const json& conf) -> const json* {
    if (!conf.is_object()) {
      return nullptr;
    }
    auto ipam = conf.find("ipam");
    return ipam != conf.end() && ipam->is_object() && ipam->value("type", json()) == "rdmanet-ipam"
               ? &*ipam
               : nullptr;
  };
  if (const json* found = ours(doc)) {
    return found;
  }
  auto plugins = doc.is_object() ? doc.find("plugins") : doc.end();
  if (plugins == doc.end() || !plugins->is_array()) {
    return nullptr;
  }
  for (const auto& p : *plugins) {
    if (const json* found = ours(p)) {
      return found;
    }
  }
  return nullptr;
}

// The etcd a cluster-mode rdmanet-ipam section names (its etcd object as text), or "" in
// node mode.
std::string cluster_etcd(const json& ipam) {
  auto cluster = ipam.find("cluster");
  return cluster != ipam.end() && cluster->is_object()
             ? cluster->value("etcd", json::object()).dump()
             : std::string();
}

}  // namespace

RoundReport NodeAgent::round() {
  const auto start = Clock::now();
  RoundReport report;
  beaten_.clear();
  gid_tables_.clear();
  std::map<std::string, json> networks;                  // name -> a config that names it
  std::map<std::string, std::vector<ipam::Owner>> keep;  // name -> its attachments' ids
  for (const auto& dir : config_.state_dirs) {
    reconcile_state_dir(dir, report, networks, keep);
  }
  // Files in networksDir win over the configs attachments were made with: they are what
  // the operator says the networks are now.
  read_networks_dir(report, networks);
  for (auto& [network, doc] : networks) {
    if (const json* ipam = rdmanet_ipam_section(doc)) {
      // What rdmanet still holds a record of is its own to release (with its teardown,
      // after the grace period), not the IPAM reclaim rule's.
      reconcile_ipam(network, *ipam, std::move(keep[network]), report);
    }
  }
  report.duration_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  totals_.add(report, static_cast<double>(unix_now()));
  for (const auto& m : report.messages) {
    spdlog::error("node-agent: {}", m);
  }
  last_ = report;
  last_done_ = Clock::now();
  return report;
}

void NodeAgent::read_networks_dir(RoundReport& report, std::map<std::string, json>& networks) {
  NetworksDir read = agent::read_networks_dir(config_.networks_dir);
  for (auto& problem : read.problems) {
    ++report.errors["networks-dir"];
    spdlog::warn("node-agent: networks dir: {}", problem.msg());
    report.messages.push_back(problem.msg());
  }
  for (auto& [network, doc] : read.networks) {
    networks[network] = std::move(doc);
  }
}

void NodeAgent::reconcile_state_dir(const std::string& dir, RoundReport& report,
                                    std::map<std::string, json>& networks,
                                    std::map<std::string, std::vector<ipam::Owner>>& keep) {
  plugin::StateStore store(dir);
  auto listing = store.list_all();
  if (!listing) {
    // An untrusted or unreadable state directory: reported, nothing in it touched.
    ++report.errors["state-dir"];
    report.messages.push_back(listing.error().msg());
    return;
  }
  for (const auto& file : listing->unreadable) {
    ++report.unreadable;
    spdlog::warn("node-agent: cannot use {} ({}); left as it is: `rdmanet state list` shows it",
                 file.path, file.error.msg());
  }
  OrphanBook book(dir);
  const long long now = unix_now();
  for (const auto& record : listing->records) {
    if (networks.count(record.network) == 0) {  // one config per network is enough
      if (json doc = parse_json(record.config); doc.is_object()) {
        networks.emplace(record.network, std::move(doc));
      }
    }
    const std::string key = store.path_of(record.id());
    keep[record.network].push_back({record.container_id, record.ifname});
    auto pod = plugin::open_pod_netns(record);
    if (!pod) {
      // Could not look is not gone.
      ++report.errors["netns"];
      report.messages.push_back("pod netns of " + record.id().str() + ": " + pod.error().msg());
      continue;
    }
    if (*pod) {
      book.forget(key);
      ++report.attachments[{record.network, std::string(name_of(plugin::kModeNames, record.mode))}];
      report.held_devices += record.mode == plugin::Mode::kNetdev ? 1 : 0;
      refresh_gids(record, **pod, dir, report);
      continue;
    }
    const long long since = book.first_seen(key, now);
    if (handle_orphan(store, record, since, now, report)) {
      book.forget(key);
    }
  }
  if (auto s = book.save(); !s) {
    ++report.errors["state-dir"];
    report.messages.push_back(s.error().msg());
  }
}

bool NodeAgent::handle_orphan(plugin::StateStore& store, const AttachmentRecord& record,
                              long long since, long long now, RoundReport& report) {
  if (now - since < config_.grace.count()) {
    ++report.orphans_waiting;
    return false;
  }
  spdlog::info("node-agent: tearing down {} of {}: its netns {} is gone (seen {} s ago)",
               record.device_name, record.holder(), record.netns, now - since);
  cni::Environment env;
  env.command = cni::Command::kDel;
  env.path = config_.cni_path;
  const plugin::UndoContext context{
      store.root(), env, {linked_ipam_, config_.ipam_timeout_seconds}};
  // Under the device's lock, a DEL or an ADD reclaiming the device may have finished it, and
  // a netns that exists again is never touched.
  auto torn = plugin::undo_attachment(
      context, record, plugin::DeviceLock::kTake, [](const AttachmentRecord& current) -> Status {
        TRY_ASSIGN(auto pod, plugin::open_pod_netns(current));
        if (pod) {
          return Error(ErrorKind::kTryAgainLater, "netns " + current.netns + " is there again");
        }
        return ok_status();
      });
  if (!torn) {
    ++report.errors["teardown"];
    report.messages.push_back("tearing down " + record.id().str() + ": " + torn.error().msg());
    return false;
  }
  ++report.torn_down["netns-gone"];
  return true;
}

void NodeAgent::refresh_gids(const AttachmentRecord& record, const netns::Netns& pod,
                             const std::string& state_dir, RoundReport& report) {
  auto change = refresh_pod_gids(record, pod, state_dir + "/locks", &gid_tables_);
  if (!change && change.error().kind() == ErrorKind::kDeviceNotFound) {
    // Its DEL is under way, or (exclusive mode) the pod renamed or removed its own device:
    // nothing of the node's is wrong, and the pod's files are the pod's.
    spdlog::debug("node-agent: GID table of {}: {}", record.holder(), change.error().msg());
    return;
  }
  if (!change) {
    ++report.errors["gid-refresh"];
    report.messages.push_back("GID index of " + record.id().str() + ": " + change.error().msg());
    return;
  }
  if (*change) {
    ++report.gid_index_changes;
    spdlog::warn(
        "node-agent: RoCE v2 GID index of {} on {} moved from {} to {}: its pod files are "
        "rewritten (a process that read the old index keeps it until it restarts)",
        record.holder(), (*change)->device, (*change)->before.dump(), (*change)->after.dump());
  }
}

void NodeAgent::reconcile_ipam(const std::string& network, const json& ipam_section,
                               std::vector<ipam::Owner> keep, RoundReport& report) {
  ipam::ReconcileRequest request{network, ipam_section, std::move(keep)};
  // A call stuck with the store's lock fails this network's reconcile, not the round (as the
  // IPAM timeout bounds every exec'd IPAM call).
  request.lock_wait = std::chrono::seconds(config_.ipam_timeout_seconds);
  // Cluster mode, kept light for etcd at a thousand nodes: one heartbeat per etcd per
  // round, lasting three rounds (an etcd lease), whatever the number of networks (rails);
  // the cluster-wide listing of silent owners (every block and heartbeat of the network)
  // every kSilentEvery rounds only.
  const std::string etcd = cluster_etcd(ipam_section);
  if (!etcd.empty() && beaten_.insert(etcd).second) {
    request.heartbeat_ttl = static_cast<int>(3 * std::max<long long>(1, config_.interval.count()));
  }
  request.list_silent = !etcd.empty() && totals_.rounds % kSilentEvery == 0;
  auto done = ipam::reconcile_network(request);
  if (!done) {
    ++report.ipam_errors[network];
    report.messages.push_back("rdmanet-ipam reconcile of network " + network + ": " +
                              done.error().msg());
    return;
  }
  for (const auto& p : done->pools) {
    report.pools.push_back(
        {network, p.where, p.description, p.size, p.used, p.blocks, done->cluster});
  }
  if (done->silent_nodes) {
    // A fresh listing replaces what the last one said of this network.
    std::erase_if(totals_.silent_blocks,
                  [&](const auto& entry) { return entry.first.first == network; });
    for (const auto& [node, n] : *done->silent_nodes) {
      totals_.silent_blocks[{network, node}] = n;
    }
  }
  if (!done->etcd_error.empty()) {
    ++report.etcd_errors[network];
    report.messages.push_back("etcd, for network " + network + ": " + done->etcd_error);
  }
  for (const auto& [reason, n] : done->released) {
    if (n > 0) {
      report.leases_reclaimed[{network, reason}] += n;
    }
  }
}

Clock::time_point NodeAgent::healthy_until() const {
  return last_done_ + 3 * std::max(config_.interval, std::chrono::seconds(1));
}

bool NodeAgent::healthy(Clock::time_point now) const {
  return totals_.rounds > 0 && now <= healthy_until();
}

std::string NodeAgent::metrics() const { return exposition(last_, totals_); }

void Totals::add(const RoundReport& round, double done_unix) {
  for (const auto& [reason, n] : round.torn_down) {
    torn_down[reason] += n;
  }
  for (const auto& [key, n] : round.leases_reclaimed) {
    leases_reclaimed[key] += n;
  }
  for (const auto& [network, n] : round.ipam_errors) {
    ipam_errors[network] += n;
  }
  for (const auto& [network, n] : round.etcd_errors) {
    etcd_errors[network] += n;
  }
  for (const auto& [stage, n] : round.errors) {
    errors[stage] += n;
  }
  gid_index_changes += round.gid_index_changes;
  ++rounds;
  last_done_unix = done_unix;
}

}  // namespace rdmanet::agent
