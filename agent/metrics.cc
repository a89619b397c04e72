#include "agent/metrics.h"

#include <algorithm>
#include <sstream>
#include <vector>

namespace rdmanet::agent {

namespace {

using Labels = std::vector<std::pair<std::string, std::string>>;

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

// One metric family's samples, written as they are added.
class Samples {
 public:
  Samples(std::ostringstream& out, const char* name) : out_(out), name_(name) {}
  void add(const Labels& labels, double value) {
    out_ << name_;
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
  void add(double value) { add({}, value); }

 private:
  std::ostringstream& out_;
  const char* name_;
};

using Pool = RoundReport::Pool;

double count(size_t n) { return static_cast<double>(n); }

void per_pool(const RoundReport& last, Samples& s, double (*value)(const Pool&)) {
  for (const auto& p : last.pools) {
    s.add({{"network", p.network}, {"range_set", p.range_set}}, value(p));
  }
}

struct Metric {
  const char* name;
  const char* type;
  const char* help;
  void (*samples)(const RoundReport& last, const Totals& totals, Samples& s);
};

constexpr Metric kMetrics[] = {
    {"rdmanet_attachments", "gauge", "Attachments whose pod netns exists, by network and mode.",
     [](const RoundReport& last, const Totals&, Samples& s) {
       for (const auto& [key, n] : last.attachments) {
         s.add({{"network", key.first}, {"mode", key.second}}, count(n));
       }
     }},
    {"rdmanet_held_devices", "gauge", "Devices held by a pod (netdev mode).",
     [](const RoundReport& last, const Totals&, Samples& s) { s.add(count(last.held_devices)); }},
    {"rdmanet_orphaned_attachments", "gauge",
     "Attachments whose pod netns is gone, waiting out the grace period.",
     [](const RoundReport& last, const Totals&, Samples& s) {
       s.add(count(last.orphans_waiting));
     }},
    {"rdmanet_unreadable_records", "gauge",
     "State files the agent cannot trust or parse (never deleted; see rdmanet state list).",
     [](const RoundReport& last, const Totals&, Samples& s) { s.add(count(last.unreadable)); }},
    {"rdmanet_orphan_teardowns_total", "counter", "Attachments the agent tore down, by reason.",
     [](const RoundReport&, const Totals& totals, Samples& s) {
       auto it = totals.torn_down.find("netns-gone");
       s.add({{"reason", "netns-gone"}}, count(it == totals.torn_down.end() ? 0 : it->second));
     }},
    {"rdmanet_gid_index_changes_total", "counter",
     "Rails whose RoCE v2 GID index moved or went while the pod ran (pod files rewritten).",
     [](const RoundReport&, const Totals& totals, Samples& s) {
       s.add(count(totals.gid_index_changes));
     }},
    {"rdmanet_ipam_pool_size_addresses", "gauge",
     "Addresses a range set can hand out (cluster mode: in the node's blocks).",
     [](const RoundReport& last, const Totals&, Samples& s) {
       per_pool(last, s, [](const Pool& p) { return p.size; });
     }},
    {"rdmanet_ipam_pool_used_addresses", "gauge", "Addresses leased in a range set.",
     [](const RoundReport& last, const Totals&, Samples& s) {
       per_pool(last, s, [](const Pool& p) { return count(p.used); });
     }},
    {"rdmanet_ipam_pool_free_addresses", "gauge", "Addresses still free in a range set.",
     [](const RoundReport& last, const Totals&, Samples& s) {
       per_pool(last, s, [](const Pool& p) { return std::max(0.0, p.size - count(p.used)); });
     }},
    {"rdmanet_ipam_blocks_held", "gauge",
     "Cluster mode: address blocks this node holds, per range set.",
     [](const RoundReport& last, const Totals&, Samples& s) {
       for (const auto& p : last.pools) {
         if (p.cluster) {
           s.add({{"network", p.network}, {"range_set", p.range_set}}, count(p.blocks));
         }
       }
     }},
    {"rdmanet_ipam_silent_node_blocks", "gauge",
     "Cluster mode: blocks held by nodes whose agent stopped heartbeating (taken back only by "
     "rdmanet-ipam cluster reclaim-node).",
     [](const RoundReport&, const Totals& totals, Samples& s) {
       for (const auto& [key, n] : totals.silent_blocks) {
         s.add({{"network", key.first}, {"node", key.second}}, count(n));
       }
     }},
    {"rdmanet_ipam_etcd_errors_total", "counter",
     "Cluster mode: rounds whose heartbeat or block listing etcd did not answer.",
     [](const RoundReport&, const Totals& totals, Samples& s) {
       for (const auto& [network, n] : totals.etcd_errors) {
         s.add({{"network", network}}, count(n));
       }
     }},
    {"rdmanet_ipam_leases_reclaimed_total", "counter",
     "Leases rdmanet-ipam's reclaim rule released in the agent's rounds, by reason.",
     [](const RoundReport&, const Totals& totals, Samples& s) {
       for (const auto& [key, n] : totals.leases_reclaimed) {
         s.add({{"network", key.first}, {"reason", key.second}}, count(n));
       }
     }},
    {"rdmanet_ipam_reconcile_errors_total", "counter",
     "Failed rdmanet-ipam reconciles (cluster mode: etcd unreachable among them).",
     [](const RoundReport&, const Totals& totals, Samples& s) {
       for (const auto& [network, n] : totals.ipam_errors) {
         s.add({{"network", network}}, count(n));
       }
     }},
    {"rdmanet_reconcile_errors_total", "counter",
     "Errors in the agent's rounds, by stage (state-dir, netns, teardown, gid-refresh, "
     "networks-dir).",
     [](const RoundReport&, const Totals& totals, Samples& s) {
       for (const auto& [stage, n] : totals.errors) {
         s.add({{"stage", stage}}, count(n));
       }
     }},
    {"rdmanet_reconcile_rounds_total", "counter", "Rounds the agent finished.",
     [](const RoundReport&, const Totals& totals, Samples& s) { s.add(count(totals.rounds)); }},
    {"rdmanet_reconcile_duration_seconds", "gauge", "How long the last round took.",
     [](const RoundReport& last, const Totals&, Samples& s) { s.add(last.duration_seconds); }},
    {"rdmanet_reconcile_last_timestamp_seconds", "gauge",
     "When the last round finished (Unix time).",
     [](const RoundReport&, const Totals& totals, Samples& s) { s.add(totals.last_done_unix); }},
};

}  // namespace

std::string exposition(const RoundReport& last, const Totals& totals) {
  std::ostringstream out;
  for (const Metric& m : kMetrics) {
    out << "# HELP " << m.name << " " << m.help << "\n# TYPE " << m.name << " " << m.type << "\n";
    Samples samples(out, m.name);
    m.samples(last, totals, samples);
  }
  return out.str();
}

}  // namespace rdmanet::agent
