// The rail's entry in the pod's rails files, and taking it out again.
#include <spdlog/spdlog.h>

#include "base/files.h"
#include "base/json_fields.h"
#include "netns/gpudirect.h"
#include "netns/ip_address.h"
#include "netns/link.h"
#include "netns/pci_topology.h"
#include "plugin/pod_info.h"
#include "plugin/steps.h"

namespace rdmanet::plugin {

using nlohmann::json;

namespace {

// The rail's RDMA device as the pod sees it: device, port, link layer, the GIDs of the pod
// interface with their indexes and types, the RoCE v2 GID index of each address family,
// whether other pods share the device's GID table, and the traffic class to send with.
json rdma_entry(Attachment& a) {
  const RdmaReport& rdma = *a.rec().rdma;
  const bool roce = !a.rdma().infiniband;
  json entry = {{"device", rdma.device},
                {"port", rdma.port},
                {"linkLayer", roce ? "Ethernet" : "InfiniBand"}};
  entry.update(gid_fields(rdma.gids, a.rec().ifname));
  // A macvlan child of the node's HCA: every pod on it has its GIDs in the one table.
  entry["sharedDevice"] = a.conf().mode == Mode::kMacvlan && !a.conf().soft_roce;
  if (auto tc = roce_traffic_class(a.conf()); tc && roce) {
    entry["trafficClass"] = tc->value;
    entry["trafficClassFrom"] = tc->source;
  }
  if (a.conf().control_tos && roce) {
    entry["controlTrafficClass"] = *a.conf().control_tos;
  }
  return entry;
}

// Where the rail's GPU should sit (the PCIe root of its Data Direct function, or of the
// device itself) and how GPU memory can be registered on this node: direct lookups, no scan
// of the PCI bus (netns::rail_gpu_facts).
void add_gpu_facts(const std::string& sysfs_root, const std::string& pci, json* rail) {
  const netns::RailGpuFacts facts =
      netns::rail_gpu_facts(sysfs_root, pci, netns::running_kernel_release());
  if (!facts.pcie_root.empty()) {
    (*rail)["pcieRoot"] = facts.pcie_root;
  }
  if (!facts.data_direct_pci.empty()) {
    (*rail)["dataDirectPci"] = facts.data_direct_pci;
  }
  (*rail)["gpuDirectRdma"] = netns::gpudirect_rdma_name(facts.gpudirect.mode);
}

}  // namespace

Status write_pod_info(Attachment& a, const cni::Result& ipam) {
  const std::string& root = a.conf().pod_info_dir;
  const std::string& uid = a.call().args.k8s_pod_uid;
  if (root.empty() || uid.empty()) {
    return ok_status();
  }
  json rail = {{"interface", a.rec().ifname}, {"network", a.rec().network}};
  json addresses = json::array();
  for (const auto& ip : ipam.ips) {
    addresses.push_back(ip.address);
  }
  rail["addresses"] = addresses;
  if (a.rdma().active && a.rec().rdma && !a.rec().rdma->device.empty()) {
    rail["rdma"] = rdma_entry(a);
  }
  if (!a.device().pci.empty()) {
    rail["pciAddress"] = a.device().pci;
    if (auto node = netns::pci_numa_node(a.conf().sysfs_root, a.device().pci); node) {
      rail["numaNode"] = *node;
    }
    add_gpu_facts(a.conf().sysfs_root, a.device().pci, &rail);
  }
  TRY(a.record(StepKind::kPodInfo, {{"root", root}, {"uid", uid}, {"interface", a.rec().ifname}}));
  return PodInfoStore(root, a.store().root() + "/locks")
      .put({uid, a.rec().container_id, a.rec().ifname}, rail);
}

// Fails only when it could not look (is_transient: out of descriptors, a lock held too
// long): the next DEL looks again. What the pod did to its files never keeps DEL from
// finishing (the device and the address come home all the same): it is logged, naming the
// pod.
Status remove_pod_info(Attachment& a, const json& step) {
  std::string root;
  std::string uid;
  std::string ifname;
  Fields f(step, "pod-info", ErrorKind::kState);
  f.required_string("root", &root)
      .required_string("uid", &uid)
      .required_string("interface", &ifname);
  Status s = f.status();
  if (s) {
    s = check_absolute_path(root, "pod-info.root", ErrorKind::kState);
  }
  if (s && ifname != a.rec().ifname) {
    s = Error(ErrorKind::kState, "pod-info.interface " + in_quotes(ifname) +
                                     " is not the record's (" + a.rec().ifname + ")");
  }
  if (s) {
    s = PodInfoStore(root, a.store().root() + "/locks").remove({uid, a.rec().container_id, ifname});
  }
  if (!s && is_transient(s.error())) {
    return s;
  }
  if (!s) {
    spdlog::warn("pod files of {} not cleaned up (the attachment is undone all the same): {}",
                 a.rec().holder(), s.error().msg());
  }
  return ok_status();
}

}  // namespace rdmanet::plugin
