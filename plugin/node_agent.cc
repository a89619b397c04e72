#include "plugin/node_agent.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <set>
#include <sstream>

#include "base/files.h"
#include "base/json_fields.h"
#include "cni/delegate.h"
#include "plugin/attachment.h"
#include "plugin/conf.h"
#include "plugin/gid_refresh.h"
#include "plugin/networks_dir.h"
#include "plugin/store.h"

namespace rdmanet::plugin {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kAgentUsage =
    "usage: rdmanet node-agent [--config FILE] [--state-dir DIR]... [--networks-dir DIR]\n"
    "                          [--cni-path PATH] [--interval SECONDS] [--grace SECONDS]\n"
    "                          [--listen HOST:PORT] [--once]\n";

Status seconds_in(const std::string& what, long long value, std::chrono::seconds* out) {
  if (value < 0 || value > 86400) {
    return Error(ErrorKind::kInvalidConfig,
                 what + " must be 0..86400 seconds, not " + std::to_string(value));
  }
  *out = std::chrono::seconds(value);
  return ok_status();
}

Status read_config_file(const std::string& path, AgentConfig* config) {
  TRY_ASSIGN(auto text, read_file(path));
  if (!text) {
    return Error(ErrorKind::kInvalidConfig, "agent config " + path + " does not exist");
  }
  json doc = parse_json(*text);
  if (!doc.is_object()) {
    return Error(ErrorKind::kInvalidConfig, "agent config " + path + " is not a JSON object");
  }
  Fields f(doc, path, ErrorKind::kInvalidConfig);
  std::vector<std::string> dirs;
  long long interval = config->interval.count();
  long long grace = config->grace.count();
  f.string_list("stateDirs", &dirs).string("networksDir", &config->networks_dir);
  f.string("cniPath", &config->cni_path).string("listen", &config->listen);
  f.integer64("intervalSeconds", &interval).integer64("graceSeconds", &grace);
  TRY(f.status());
  if (!dirs.empty()) {
    config->state_dirs = dirs;
  }
  TRY(seconds_in(path + ": intervalSeconds", interval, &config->interval));
  return seconds_in(path + ": graceSeconds", grace, &config->grace);
}

// The orphans of one state directory: record file -> when the agent first saw its netns
// gone (Unix seconds). Kept on disk so that a restart does not start the grace anew.
class OrphanBook {
 public:
  explicit OrphanBook(const std::string& state_dir) : path_(state_dir + "/.agent/orphans.json") {
    auto text = read_file(path_);
    if (!text) {
      spdlog::warn("node-agent: {} (starting afresh)", text.error().msg());
      return;
    }
    if (!*text) {
      return;
    }
    json doc = parse_json(**text);
    if (!doc.is_object()) {
      spdlog::warn("node-agent: {} is not a JSON object (starting afresh)", path_);
      return;
    }
    for (const auto& [key, value] : doc.items()) {
      if (value.is_number_integer()) {
        since_[key] = value.get<long long>();
      }
    }
  }

  // When `key` was first seen orphaned (now, if this is the first time).
  long long first_seen(const std::string& key, long long now) {
    seen_.insert(key);
    auto [it, added] = since_.try_emplace(key, now);
    changed_ |= added;
    return it->second;
  }
  void forget(const std::string& key) {
    seen_.erase(key);
    changed_ |= since_.erase(key) > 0;
  }
  // Saves what this round saw (entries of records that are gone are dropped).
  Status save() {
    for (auto it = since_.begin(); it != since_.end();) {
      if (seen_.count(it->first) == 0) {
        it = since_.erase(it);
        changed_ = true;
      } else {
        ++it;
      }
    }
    if (!changed_) {
      return ok_status();
    }
    if (since_.empty()) {
      if (::unlink(path_.c_str()) != 0 && errno != ENOENT) {
        return Error(ErrorKind::kIo, "cannot remove " + path_ + ": " + std::strerror(errno));
      }
      return ok_status();
    }
    TRY(make_directories(parent_of(path_), 0700));
    return write_file_atomically(path_, json(since_).dump() + "\n", 0600, Survives::kProcessCrash);
  }

 private:
  std::string path_;
  std::map<std::string, long long> since_;
  std::set<std::string> seen_;
  bool changed_ = false;
};

long long unix_now() { return static_cast<long long>(std::time(nullptr)); }

// Tears an orphaned attachment down as DEL does, under its device's lock, after reading
// the record again and looking at its netns again under that lock: a DEL, or an ADD
// reclaiming the device, may have finished it, and a netns that exists is never touched.
Status tear_down(StateStore& store, const AttachmentRecord& seen, const AgentConfig& config) {
  TRY_ASSIGN(auto lock, store.lock(seen.device_key));
  TRY_ASSIGN(auto record, store.load(seen.id()));
  if (!record) {
    return ok_status();
  }
  TRY_ASSIGN(auto pod, open_pod_netns(*record));
  if (pod) {
    return Error(ErrorKind::kTryAgainLater, "netns " + record->netns + " is there again");
  }
  cni::Environment env;
  env.command = cni::Command::kDel;
  env.path = config.cni_path;
  TRY_ASSIGN(auto a, Attachment::for_undo(store.root(), std::move(*record), env,
                                          config.ipam_timeout_seconds));
  return a.undo();
}

// The network config's rdmanet-ipam section (its own, or a conflist plugin's), or
// nullptr when it has none.
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

// Prometheus text format: label values escaped, one sample per line.
std::string label_value(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

class Exposition {
 public:
  void family(const std::string& name, const std::string& type, const std::string& help) {
    out_ << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
  }
  void sample(const std::string& name,
              const std::vector<std::pair<std::string, std::string>>& labels, double value) {
    out_ << name;
    if (!labels.empty()) {
      out_ << "{";
      for (size_t i = 0; i < labels.size(); ++i) {
        out_ << (i ? "," : "") << labels[i].first << "=\"" << label_value(labels[i].second) << "\"";
      }
      out_ << "}";
    }
    std::ostringstream v;
    v.precision(17);
    v << value;
    out_ << " " << v.str() << "\n";
  }
  std::string str() const { return out_.str(); }

 private:
  std::ostringstream out_;
};

}  // namespace

Expected<AgentConfig> parse_agent_args(const std::vector<std::string>& args) {
  AgentConfig config;
  auto bad = [](const std::string& why) {
    return Error(ErrorKind::kInvalidConfig, why + "\n" + kAgentUsage);
  };
  // The config file first, so that flags override it wherever they stand.
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == "--config") {
      TRY(read_config_file(args[i + 1], &config));
    }
  }
  std::vector<std::string> dirs;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (flag == "--once") {
      config.once = true;
      continue;
    }
    static const char* const kTakesValue[] = {"--config",   "--state-dir", "--networks-dir",
                                              "--cni-path", "--listen",    "--interval",
                                              "--grace"};
    if (std::find(std::begin(kTakesValue), std::end(kTakesValue), flag) == std::end(kTakesValue)) {
      return bad("unknown option " + flag);
    }
    if (i + 1 >= args.size()) {
      return bad(flag + " needs a value");
    }
    const std::string& value = args[++i];
    if (flag == "--config") {
      continue;
    }
    if (flag == "--state-dir") {
      dirs.push_back(value);
    } else if (flag == "--networks-dir") {
      config.networks_dir = value;
    } else if (flag == "--cni-path") {
      config.cni_path = value;
    } else if (flag == "--listen") {
      config.listen = value;
    } else if (flag == "--interval" || flag == "--grace") {
      char* end = nullptr;
      long long n = std::strtoll(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0') {
        return bad(flag + " takes whole seconds, not \"" + value + "\"");
      }
      TRY(seconds_in(flag, n, flag == "--interval" ? &config.interval : &config.grace));
    }
  }
  if (!dirs.empty()) {
    config.state_dirs = dirs;
  }
  for (const auto& dir : config.state_dirs) {
    TRY(check_absolute_path(dir, "state dir", ErrorKind::kInvalidConfig));
  }
  if (config.interval.count() == 0 && !config.once) {
    return bad("--interval must be at least 1 second");
  }
  return config;
}

RoundReport NodeAgent::round() {
  const auto start = Clock::now();
  RoundReport report;
  beaten_.clear();
  gid_tables_.clear();
  std::map<std::string, json> networks;  // name -> a config that names it
  std::map<std::string, json> keep;      // name -> its attachments with a record
  for (const auto& dir : config_.state_dirs) {
    reconcile_state_dir(dir, report, networks, keep);
  }
  // Files in networksDir win over the configs attachments were made with: they are what
  // the operator says the networks are now.
  read_networks_dir(report, networks);
  for (auto& [network, doc] : networks) {
    const json* ipam = rdmanet_ipam_section(doc);
    if (ipam == nullptr) {
      continue;
    }
    const std::string etcd = cluster_etcd(*ipam);
    // What rdmanet still holds a record of is its own to release (with its teardown,
    // after the grace period), not the IPAM reclaim rule's.
    doc["rdmanetKeep"] = keep.count(network) ? keep[network] : json::array();
    reconcile_ipam(network, doc.dump(), etcd, report);
  }
  report.duration_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (const auto& [reason, n] : report.torn_down) {
    torn_down_total_[reason] += n;
  }
  for (const auto& [key, n] : report.leases_reclaimed) {
    reclaimed_total_[key] += n;
  }
  for (const auto& [network, n] : report.ipam_errors) {
    ipam_errors_total_[network] += n;
  }
  for (const auto& [network, n] : report.etcd_errors) {
    etcd_errors_total_[network] += n;
  }
  for (const auto& [stage, n] : report.errors) {
    errors_total_[stage] += n;
  }
  gid_index_changes_total_ += report.gid_index_changes;
  for (const auto& m : report.messages) {
    spdlog::error("node-agent: {}", m);
  }
  ++rounds_;
  last_ = report;
  last_done_ = Clock::now();
  last_done_unix_ = static_cast<double>(unix_now());
  return report;
}

void NodeAgent::read_networks_dir(RoundReport& report, std::map<std::string, json>& networks) {
  NetworksDir read = plugin::read_networks_dir(config_.networks_dir);
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
                                    std::map<std::string, json>& keep) {
  StateStore store(dir);
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
    keep[record.network].push_back(
        {{"containerID", record.container_id}, {"ifname", record.ifname}});
    auto pod = open_pod_netns(record);
    if (!pod) {
      // Could not look is not gone.
      ++report.errors["netns"];
      report.messages.push_back("pod netns of " + record.id().str() + ": " + pod.error().msg());
      continue;
    }
    if (*pod) {
      book.forget(key);
      ++report.attachments[{record.network, std::string(name_of(kModeNames, record.mode))}];
      report.held_devices += record.mode == Mode::kNetdev ? 1 : 0;
      refresh_gids(record, **pod, dir, report);
      continue;
    }
    const long long since = book.first_seen(key, now);
    if (now - since < config_.grace.count()) {
      ++report.orphans_waiting;
      continue;
    }
    spdlog::info("node-agent: tearing down {} of {}: its netns {} is gone (seen {} s ago)",
                 record.device_name, record.holder(), record.netns, now - since);
    if (auto s = tear_down(store, record, config_); !s) {
      ++report.errors["teardown"];
      report.messages.push_back("tearing down " + record.id().str() + ": " + s.error().msg());
      continue;
    }
    book.forget(key);
    ++report.torn_down["netns-gone"];
  }
  if (auto s = book.save(); !s) {
    ++report.errors["state-dir"];
    report.messages.push_back(s.error().msg());
  }
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

void NodeAgent::reconcile_ipam(const std::string& network, const std::string& config,
                               const std::string& etcd, RoundReport& report) {
  auto binary = cni::find_plugin("rdmanet-ipam", config_.cni_path);
  std::vector<std::string> args = {"reconcile"};
  // Cluster mode, kept light for etcd at a thousand nodes: one heartbeat per etcd per
  // round, lasting three rounds (an etcd lease), whatever the number of networks (rails);
  // the cluster-wide listing of silent owners (every block and heartbeat of the network)
  // every kSilentEvery rounds only.
  if (!etcd.empty() && beaten_.insert(etcd).second) {
    args.push_back("--heartbeat-ttl");
    args.push_back(std::to_string(3 * std::max<long long>(1, config_.interval.count())));
  }
  const bool list_silent = !etcd.empty() && rounds_ % kSilentEvery == 0;
  if (list_silent) {
    args.push_back("--list-silent");
  }
  args.push_back("-");
  auto out = binary ? cni::exec_program(*binary, args, config,
                                        std::chrono::seconds(config_.ipam_timeout_seconds))
                    : Expected<std::string>(std::move(binary).error());
  json doc = out ? parse_json(*out) : json();
  if (!doc.is_object() || !doc.value("pools", json()).is_array()) {
    ++report.ipam_errors[network];
    report.messages.push_back("rdmanet-ipam reconcile of network " + network + ": " +
                              (out ? "unexpected output" : out.error().msg()));
    return;
  }
  const bool cluster = doc.value("cluster", false);
  for (const auto& p : doc["pools"]) {
    RoundReport::Pool pool;
    pool.network = network;
    pool.cluster = cluster;
    Fields f(p, "rdmanet-ipam reconcile");
    f.string("where", &pool.range_set).string("ranges", &pool.ranges);
    long long used = 0;
    long long blocks = 0;
    f.integer64("used", &used).integer64("blocks", &blocks);
    pool.size = p.value("size", json(0.0)).is_number() ? p["size"].get<double>() : 0.0;
    pool.used = static_cast<size_t>(std::max(0LL, used));
    pool.blocks = static_cast<size_t>(std::max(0LL, blocks));
    report.pools.push_back(std::move(pool));
  }
  if (doc.contains("silentNodes")) {
    // A fresh listing replaces what the last one said of this network.
    std::erase_if(silent_, [&](const auto& entry) { return entry.first.first == network; });
    const json silent = doc["silentNodes"];
    for (const auto& [node, n] : silent.items()) {
      if (n.is_number_unsigned()) {
        silent_[{network, node}] = n.get<size_t>();
      }
    }
  }
  if (doc.contains("etcdError")) {
    ++report.etcd_errors[network];
    report.messages.push_back("etcd, for network " + network + ": " +
                              doc.value("etcdError", std::string()));
  }
  const json& released = doc.value("released", json::object());
  for (const auto& [reason, n] : released.items()) {
    if (n.is_number_unsigned() && n.get<size_t>() > 0) {
      report.leases_reclaimed[{network, reason}] += n.get<size_t>();
    }
  }
}

Clock::time_point NodeAgent::healthy_until() const {
  return last_done_ + 3 * std::max(config_.interval, std::chrono::seconds(1));
}

bool NodeAgent::healthy(Clock::time_point now) const {
  return rounds_ > 0 && now <= healthy_until();
}

std::string NodeAgent::metrics() const {
  Exposition m;
  m.family("rdmanet_attachments", "gauge",
           "Attachments whose pod netns exists, by network and mode.");
  for (const auto& [key, n] : last_.attachments) {
    m.sample("rdmanet_attachments", {{"network", key.first}, {"mode", key.second}},
             static_cast<double>(n));
  }
  m.family("rdmanet_held_devices", "gauge", "Devices held by a pod (netdev mode).");
  m.sample("rdmanet_held_devices", {}, static_cast<double>(last_.held_devices));
  m.family("rdmanet_orphaned_attachments", "gauge",
           "Attachments whose pod netns is gone, waiting out the grace period.");
  m.sample("rdmanet_orphaned_attachments", {}, static_cast<double>(last_.orphans_waiting));
  m.family("rdmanet_unreadable_records", "gauge",
           "State files the agent cannot trust or parse (never deleted; see rdmanet state list).");
  m.sample("rdmanet_unreadable_records", {}, static_cast<double>(last_.unreadable));
  m.family("rdmanet_orphan_teardowns_total", "counter",
           "Attachments the agent tore down, by reason.");
  m.sample("rdmanet_orphan_teardowns_total", {{"reason", "netns-gone"}},
           static_cast<double>(
               torn_down_total_.count("netns-gone") ? torn_down_total_.at("netns-gone") : 0));
  m.family("rdmanet_gid_index_changes_total", "counter",
           "Rails whose RoCE v2 GID index moved or went while the pod ran (pod files rewritten).");
  m.sample("rdmanet_gid_index_changes_total", {}, static_cast<double>(gid_index_changes_total_));
  using Pool = RoundReport::Pool;
  auto per_pool = [&](const char* name, double (*value)(const Pool&)) {
    for (const auto& p : last_.pools) {
      m.sample(name, {{"network", p.network}, {"range_set", p.range_set}}, value(p));
    }
  };
  m.family("rdmanet_ipam_pool_size_addresses", "gauge",
           "Addresses a range set can hand out (cluster mode: in the node's blocks).");
  per_pool("rdmanet_ipam_pool_size_addresses", [](const Pool& p) { return p.size; });
  m.family("rdmanet_ipam_pool_used_addresses", "gauge", "Addresses leased in a range set.");
  per_pool("rdmanet_ipam_pool_used_addresses",
           [](const Pool& p) { return static_cast<double>(p.used); });
  m.family("rdmanet_ipam_pool_free_addresses", "gauge", "Addresses still free in a range set.");
  per_pool("rdmanet_ipam_pool_free_addresses",
           [](const Pool& p) { return std::max(0.0, p.size - static_cast<double>(p.used)); });
  m.family("rdmanet_ipam_blocks_held", "gauge",
           "Cluster mode: address blocks this node holds, per range set.");
  for (const auto& p : last_.pools) {
    if (p.cluster) {
      m.sample("rdmanet_ipam_blocks_held", {{"network", p.network}, {"range_set", p.range_set}},
               static_cast<double>(p.blocks));
    }
  }
  m.family("rdmanet_ipam_silent_node_blocks", "gauge",
           "Cluster mode: blocks held by nodes whose agent stopped heartbeating (taken back "
           "only by rdmanet-ipam cluster reclaim-node).");
  for (const auto& [key, n] : silent_) {
    m.sample("rdmanet_ipam_silent_node_blocks", {{"network", key.first}, {"node", key.second}},
             static_cast<double>(n));
  }
  m.family("rdmanet_ipam_etcd_errors_total", "counter",
           "Cluster mode: rounds whose heartbeat or block listing etcd did not answer.");
  for (const auto& [network, n] : etcd_errors_total_) {
    m.sample("rdmanet_ipam_etcd_errors_total", {{"network", network}}, static_cast<double>(n));
  }
  m.family("rdmanet_ipam_leases_reclaimed_total", "counter",
           "Leases rdmanet-ipam's reclaim rule released in the agent's rounds, by reason.");
  for (const auto& [key, n] : reclaimed_total_) {
    m.sample("rdmanet_ipam_leases_reclaimed_total",
             {{"network", key.first}, {"reason", key.second}}, static_cast<double>(n));
  }
  m.family("rdmanet_ipam_reconcile_errors_total", "counter",
           "Failed rdmanet-ipam reconciles (cluster mode: etcd unreachable among them).");
  for (const auto& [network, n] : ipam_errors_total_) {
    m.sample("rdmanet_ipam_reconcile_errors_total", {{"network", network}}, static_cast<double>(n));
  }
  m.family("rdmanet_reconcile_errors_total", "counter",
           "Errors in the agent's rounds, by stage (state-dir, netns, teardown, gid-refresh, "
           "networks-dir).");
  for (const auto& [stage, n] : errors_total_) {
    m.sample("rdmanet_reconcile_errors_total", {{"stage", stage}}, static_cast<double>(n));
  }
  m.family("rdmanet_reconcile_rounds_total", "counter", "Rounds the agent finished.");
  m.sample("rdmanet_reconcile_rounds_total", {}, static_cast<double>(rounds_));
  m.family("rdmanet_reconcile_duration_seconds", "gauge", "How long the last round took.");
  m.sample("rdmanet_reconcile_duration_seconds", {}, last_.duration_seconds);
  m.family("rdmanet_reconcile_last_timestamp_seconds", "gauge",
           "When the last round finished (Unix time).");
  m.sample("rdmanet_reconcile_last_timestamp_seconds", {}, last_done_unix_);
  return m.str();
}

}  // namespace rdmanet::plugin
