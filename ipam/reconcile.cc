#include "ipam/reconcile.h"

#include "cni/skel.h"
#include "ipam/cluster_admin.h"
#include "ipam/commands.h"
#include "ipam/config.h"
#include "ipam/node_name.h"

namespace rdmanet::ipam {

namespace {

// Cluster mode: the node's heartbeat and the owners of blocks who have none, as asked.
Status report_cluster(const ReconcileRequest& request, EtcdClient& etcd, NetworkReport* report) {
  TRY_ASSIGN(IpamConfig config, parse_ipam_config(request.ipam));
  if (!config.cluster) {
    return ok_status();
  }
  if (request.heartbeat_ttl > 0) {
    TRY_ASSIGN(std::string node, read_node_name(config.cluster->node_name_file));
    TRY(heartbeat(*config.cluster, node, request.heartbeat_ttl, etcd));
  }
  if (request.list_silent) {
    TRY_ASSIGN(report->silent_nodes, silent_block_owners(config, request.network, etcd));
  }
  return ok_status();
}

}  // namespace

Expected<NetworkReport> reconcile_network(const ReconcileRequest& request) {
  cni::Call call;
  call.conf.name = request.network;
  call.conf.ipam = request.ipam;
  TRY_ASSIGN(Network net, allocator_for(call));
  if (request.lock_wait) {
    net->set_store_lock_wait(*request.lock_wait);
  }
  TRY_ASSIGN(Allocator::Reconciled done, net->reconcile(request.keep));
  NetworkReport report;
  report.cluster = net.blocks != nullptr;
  report.released = std::move(done.released);
  report.pools = std::move(done.pools);
  if (net.etcd && (request.heartbeat_ttl > 0 || request.list_silent)) {
    if (auto s = report_cluster(request, *net.etcd, &report); !s) {
      report.etcd_error = s.error().msg();
    }
  }
  return report;
}

}  // namespace rdmanet::ipam
