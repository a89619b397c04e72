#include "plugin/steps/gid_wait.h"

#include <spdlog/spdlog.h>

#include <chrono>

#include "netns/ip_address.h"
#include "plugin/attachment.h"
#include "rdma/gid.h"

namespace rdmanet::plugin {

Status wait_for_gids(Attachment& a) {
  const RdmaPlan& plan = a.rdma();
  const PluginConf& conf = a.conf();
  if (!plan.active || plan.infiniband) {
    return ok_status();
  }
  RdmaReport& rdma = *a.rec().rdma;
  if (plan.node_mode == rdma::NetnsMode::kExclusive && !plan.move) {
    return ok_status();  // the pod cannot see the device (plan_rdma warned)
  }
  std::vector<netns::IpAddress> addresses;
  for (const auto& ip : a.ipam_result().ips) {
    if (auto prefix = netns::IpPrefix::parse(ip.address); prefix) {
      addresses.push_back(prefix->addr);
    }
  }
  if (addresses.empty()) {
    return ok_status();
  }
  auto timeout = std::chrono::milliseconds(conf.gid_timeout_ms);
  auto report = rdma::wait_for_roce_gids(*a.pod(), rdma.device, rdma.port, addresses, timeout);
  if (!report) {
    Error e = std::move(report).error();
    if (e.kind() != ErrorKind::kGidTimeout) {
      return e;
    }
    if (conf.gid_timeout_ms == 0) {
      spdlog::warn("{}", e.msg());  // 0: report what is there, never fail
      return ok_status();
    }
    return e.context("gidTimeout " + std::to_string(conf.gid_timeout_ms / 1000) + " s");
  }
  rdma.gids = report->to_json();
  spdlog::info("RDMA {} in {}: RoCE v2 GID index {} ({})", rdma.device, a.rec().netns,
               report->v2_index(), report->summary());
  return ok_status();
}

}  // namespace rdmanet::plugin
