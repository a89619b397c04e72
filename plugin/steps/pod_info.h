// The pod-info step: the rail's entry in the pod's files (plugin/pod_files.h: interface, RDMA
// device, port, link layer, GIDs and the RoCE v2 GID index of each address family, traffic class,
// PCI address, NUMA node, GPU facts), from which the pod's NCCL/UCX settings are derived
// (plugin/workload_settings.h). Only for a pod whose CNI_ARGS carry K8S_POD_UID, and unless
// podInfoDir is "". The inverse removes the entry (the pod's last one, its files).
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>

#include "base/error.h"
#include "plugin/steps/table.h"

namespace rdmanet::plugin {

class Attachment;
struct AttachmentRecord;

// What the pod-info step records: where the pod's files are and which rail is this one's.
struct PodInfoRecord {
  static constexpr StepKind kKind = StepKind::kPodInfo;
  std::string root;       // podInfoDir
  std::string uid;        // K8S_POD_UID
  std::string interface;  // CNI_IFNAME

  nlohmann::json to_json() const;
  // Refuses (kState) a root that is not absolute, or an interface other than `ifname`.
  static Expected<PodInfoRecord> from_json(const nlohmann::json& step, const std::string& ifname);
};

// The pod-info step of `record`, if ADD took one (the node agent keeps those files current).
Expected<std::optional<PodInfoRecord>> pod_info_of(const AttachmentRecord& record);

Status write_pod_info(Attachment& a);
// Fails only when it could not look (is_transient: out of descriptors, a lock held too long):
// the next DEL looks again. What the pod did to its files never keeps DEL from finishing (the
// device and the address come home all the same): it is logged, naming the pod.
Status remove_pod_info(Attachment& a, const nlohmann::json& recorded);

}  // namespace rdmanet::plugin
