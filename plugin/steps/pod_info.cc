#include "plugin/steps/pod_info.h"

#include <spdlog/spdlog.h>

#include "base/files.h"
#include "base/json_fields.h"
#include "netns/gpudirect.h"
#include "netns/pci_topology.h"
#include "plugin/attachment.h"
#include "plugin/pod_files.h"
#include "plugin/workload_settings.h"

namespace rdmanet::plugin {

using nlohmann::json;

json PodInfoRecord::to_json() const {
  return {{"root", root}, {"uid", uid}, {"interface", interface}};
}

Expected<PodInfoRecord> PodInfoRecord::from_json(const json& step, const std::string& ifname) {
  PodInfoRecord r;
  Fields f(step, "pod-info", ErrorKind::kState);
  f.required_string("root", &r.root)
      .required_string("uid", &r.uid)
      .required_string("interface", &r.interface);
  TRY(f.status());
  TRY(check_absolute_path(r.root, "pod-info.root", ErrorKind::kState));
  if (r.interface != ifname) {
    return Error(ErrorKind::kState, "pod-info.interface " + in_quotes(r.interface) +
                                        " is not the record's (" + ifname + ")");
  }
  return r;
}

Expected<std::optional<PodInfoRecord>> pod_info_of(const AttachmentRecord& record) {
  const StepRecord* step = record.step(StepKind::kPodInfo);
  if (step == nullptr) {
    return std::optional<PodInfoRecord>();
  }
  TRY_ASSIGN(auto r, PodInfoRecord::from_json(step->data, record.ifname));
  return std::optional<PodInfoRecord>(std::move(r));
}

namespace {

// The rail's RDMA device as the pod sees it: device, port, link layer, the GIDs of the pod
// interface with their indexes and types, the RoCE v2 GID index of each address family,
// whether other pods share the device's GID table, and the traffic class to send with.
json rdma_entry(const Attachment& a) {
  const RdmaReport& rdma = *a.rec().rdma;
  const bool roce = !a.rdma().infiniband;
  json entry = {{"device", rdma.device},
                {"port", rdma.port},
                {"linkLayer", roce ? "Ethernet" : "InfiniBand"}};
  if (!rdma.driver.empty()) {
    entry["driver"] = rdma.driver;
  }
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

// The rail's entry: interface, network, addresses, RDMA device, PCI facts.
json rail_entry(const Attachment& a) {
  json rail = {{"interface", a.rec().ifname}, {"network", a.rec().network}};
  json addresses = json::array();
  for (const auto& ip : a.ipam_result().ips) {
    addresses.push_back(ip.address);
  }
  rail["addresses"] = addresses;
  if (const auto& link = a.rail_link(); link) {
    // Whether the rail was usable when ADD answered (wait_for_port), so a launcher can tell.
    rail["state"] = link->usable() ? "up" : "down";
    json seen = {{"carrier", link->carrier}};
    if (!link->rdma_port.empty()) {
      seen["rdmaPortState"] = link->rdma_state;
    }
    rail["link"] = seen;
  }
  if (a.rdma().active && a.rec().rdma && !a.rec().rdma->device.empty()) {
    rail["rdma"] = rdma_entry(a);
  }
  const std::string& pci = a.device().pci;
  if (!pci.empty()) {
    rail["pciAddress"] = pci;
    if (auto node = netns::pci_numa_node(a.conf().sysfs_root, pci); node) {
      rail["numaNode"] = *node;
    }
    add_gpu_facts(a.conf().sysfs_root, pci, &rail);
  }
  return rail;
}

}  // namespace

Status write_pod_info(Attachment& a) {
  if (a.rdma().active && a.rec().rdma && a.rec().rdma->device.size() > kUcxDeviceNameMax) {
    spdlog::warn(
        "RDMA device {} of {}: UCX cannot open it, its name has {} characters and "
        "UCX takes at most {} (UCT_MD_NAME_MAX); rename it (udev NAME_KERNEL or "
        "`rdma dev set ... name`) for UCX workloads",
        a.rec().rdma->device, a.rec().ifname, a.rec().rdma->device.size(), kUcxDeviceNameMax);
  }
  const std::string& root = a.conf().pod_info_dir;
  const std::string& uid = a.call().args.k8s_pod_uid;
  if (root.empty() || uid.empty()) {
    return ok_status();
  }
  json rail = rail_entry(a);
  TRY(a.record(PodInfoRecord{root, uid, a.rec().ifname}));
  return PodInfoStore(root, a.store().root() + "/locks")
      .put({uid, a.rec().container_id, a.rec().ifname}, rail);
}

Status remove_pod_info(Attachment& a, const json& recorded) {
  auto r = PodInfoRecord::from_json(recorded, a.rec().ifname);
  Status s = r ? PodInfoStore(r->root, a.store().root() + "/locks")
                     .remove({r->uid, a.rec().container_id, r->interface})
               : Status(std::move(r).error());
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
