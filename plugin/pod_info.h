// What a pod needs to know about its RDMA rails, written where the pod can read it.
//
// For each pod (keyed by K8S_POD_UID from CNI_ARGS) rdmanet keeps, under a node directory
// (podInfoDir, default /run/rdmanet/pods):
//   <uid>/rails/<ifname>.json  one rail's entry, written by its ADD and removed by its DEL
//   <uid>/rails.json           every rail in CNI_IFNAME order, and the NCCL/UCX settings
//   <uid>/rdma.env             the same as KEY=value lines a shell can source
// The two files are regenerated from rails/ after each change, under one lock, so rails
// attached at once never lose an entry; the last DEL removes the pod's directory. Pods
// mount <podInfoDir> with a hostPath volume and subPathExpr: $(POD_UID), read-only.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"

namespace rdmanet::plugin {

// Interface names in the order users number rails: net2 before net10.
bool ifname_less(const std::string& a, const std::string& b);

// The settings NCCL and UCX need for these rails (each a rails/<ifname>.json entry), in
// rail order: NCCL_IB_HCA ("=dev:port,..."), NCCL_IB_GID_INDEX when every rail has the
// same RoCE v2 GID index, else NCCL_IB_ADDR_FAMILY (and NCCL_IB_ADDR_RANGE when one subnet
// holds every rail) so NCCL picks each rail's GID itself; NCCL_SOCKET_IFNAME,
// UCX_NET_DEVICES; and RDMANET_RAILS with RDMANET_RAIL<i>_* per rail.
std::map<std::string, std::string> rail_env(const std::vector<nlohmann::json>& rails);

// rails.json's content: {"version", "podUID", "rails": [...], "env": {...}}.
nlohmann::json pod_document(std::vector<nlohmann::json> rails, const std::string& uid);

// rdma.env's content: "KEY=value" lines, sorted; values are names and numbers, never
// quoted text.
std::string env_file(const nlohmann::json& document);

// A K8S_POD_UID fit to name a directory: 1-64 of [A-Za-z0-9-] (Kubernetes gives a UUID).
bool is_pod_uid(const std::string& uid);

// The pod info directory tree (see above).
class PodInfoStore {
 public:
  explicit PodInfoStore(std::string root) : root_(std::move(root)) {}

  // Adds (or replaces) the rail `ifname` of pod `uid`, and regenerates the pod's files.
  Status put(const std::string& uid, const std::string& ifname, const nlohmann::json& rail);
  // Removes the rail and regenerates; the pod's last rail takes the directory with it. A
  // rail or pod that is not there is fine.
  Status remove(const std::string& uid, const std::string& ifname);

  const std::string& root() const { return root_; }

 private:
  Status regenerate(const std::string& uid);

  std::string root_;
};

}  // namespace rdmanet::plugin
