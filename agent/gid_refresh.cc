#include "agent/gid_refresh.h"

#include "plugin/pod_files.h"
#include "plugin/steps/pod_info.h"
#include "plugin/workload_settings.h"
#include "rdma/gid.h"
#include "rdma/nldev.h"

namespace rdmanet::agent {

using nlohmann::json;
using plugin::AttachmentRecord;
using plugin::Phase;
using plugin::PodInfoStore;
using plugin::RdmaReport;

namespace {

// The addresses ADD found GIDs for: the rail's IPAM addresses.
std::vector<netns::IpAddress> rail_addresses(const json& gid_report) {
  std::vector<netns::IpAddress> out;
  for (const auto& e : gid_report.value("addresses", json::array())) {
    if (!e.is_object() || !e.contains("address") || !e["address"].is_string()) {
      continue;
    }
    if (auto addr = netns::IpAddress::parse(e["address"].get<std::string>()); addr) {
      out.push_back(*addr);
    }
  }
  return out;
}

}  // namespace

Expected<std::optional<GidChange>> refresh_pod_gids(const AttachmentRecord& record,
                                                    const netns::Netns& pod,
                                                    const std::string& lock_dir,
                                                    GidTables* shared_tables,
                                                    const std::string& sysfs_root) {
  if (record.phase != Phase::kAdded || !record.rdma || record.rdma->device.empty() ||
      !record.rdma->gids.is_object()) {
    return std::optional<GidChange>();
  }
  const RdmaReport& rdma = *record.rdma;
  const std::vector<netns::IpAddress> addresses = rail_addresses(rdma.gids);
  if (addresses.empty()) {
    return std::optional<GidChange>();  // InfiniBand, or no address: no RoCE GID to follow
  }
  TRY_ASSIGN(auto files, plugin::pod_info_of(record));
  if (!files) {
    return std::optional<GidChange>();  // no pod files to keep right
  }

  rdma::GidReport now;
  if (rdma.node_mode == rdma::netns_mode_name(rdma::NetnsMode::kExclusive)) {
    TRY_ASSIGN(now, rdma::read_roce_gids(pod, rdma.device, rdma.port, addresses, sysfs_root));
  } else {
    now.device = rdma.device;
    now.port = rdma.port;
    auto read = shared_tables->find({rdma.device, rdma.port});
    if (read == shared_tables->end()) {
      TRY_ASSIGN(auto table, rdma::read_gids(sysfs_root, rdma.device, rdma.port));
      read = shared_tables->emplace(std::pair{rdma.device, rdma.port}, std::move(table)).first;
    }
    now.table = read->second;
    rdma::match_addresses(&now, addresses);
  }
  json fields = plugin::gid_fields(now.to_json(), record.ifname);
  TRY_ASSIGN(auto before,
             PodInfoStore(files->root, lock_dir)
                 .refresh_gids({files->uid, record.container_id, record.ifname}, fields));
  if (!before) {
    return std::optional<GidChange>();
  }
  return std::optional<GidChange>(GidChange{rdma.device + " port " + std::to_string(rdma.port),
                                            std::move(*before), fields["gidIndex"]});
}

}  // namespace rdmanet::agent
