// The pod's files: what a pod needs to know about its RDMA rails, written where the pod can
// read it.
//
// For each pod (keyed by K8S_POD_UID from CNI_ARGS) rdmanet keeps, under a node directory
// (podInfoDir, default /run/rdmanet/pods):
//   <uid>/rails/<sandbox>.<hex(ifname)>.json  one rail's entry, written by its ADD and
//                                              removed by its DEL
//   <uid>/rails.json     every rail in CNI_IFNAME order, and the NCCL/UCX settings
//   <uid>/rdma.env       the same as KEY=value lines a shell can source
//   <uid>/nccl.conf      its NCCL_* lines, for NCCL_CONF_FILE=<mount>/nccl.conf
//   <uid>/ucx.conf       its UCX_* lines, for UCX_CONFIG_DIR=<mount>
// The two files are regenerated from rails/ after each change, under one lock per pod, so
// rails attached at once never lose an entry; the last DEL removes what rdmanet wrote.
// Pods mount <podInfoDir> with a hostPath volume and subPathExpr: $(POD_UID), read-only.
//
// Everything under <uid> is the pod's to tamper with (a pod that mounts it writable, or
// shares the hostPath): it is walked from the trusted podInfoDir without following a
// symlink (base/dir.h), only regular files rdmanet wrote are read, only names rdmanet
// writes are removed, its lock lives in the state directory (pods cannot reach it) and is
// waited on for a bounded time, and DEL never fails because of what it finds there.
// Entries are keyed by sandbox and interface: a late DEL of a pod's earlier sandbox
// removes its own entry, not the live sandbox's; where both name an interface, the newer
// entry is the one the files show.
#pragma once

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/file_lock.h"

namespace rdmanet::plugin {

// A K8S_POD_UID fit to name a directory: 1-64 of [A-Za-z0-9-] (Kubernetes gives a UUID).
bool is_pod_uid(const std::string& uid);

// One attachment's rail: which pod, which sandbox (container id), which interface.
struct RailKey {
  std::string uid;
  std::string container_id;
  std::string ifname;
};

// The pod info directory tree (see above).
class PodInfoStore {
 public:
  // `root`: podInfoDir; `lock_dir`: a directory pods cannot reach (the state dir's locks/);
  // `lock_wait`: how long put and remove wait for another call on the same pod (they hold
  // it for a few file writes: a holder slower than this is stuck), then 11.
  PodInfoStore(std::string root, std::string lock_dir,
               std::chrono::milliseconds lock_wait = std::chrono::seconds(10))
      : root_(std::move(root)), lock_dir_(std::move(lock_dir)), lock_wait_(lock_wait) {}

  // The checks ADD makes before anything is recorded: a valid pod UID (4) and, when
  // podInfoDir exists, a private one (5), each naming the culprit.
  Status check(const std::string& uid) const;

  // Adds (or replaces) the rail of `key`, and regenerates the pod's files.
  Status put(const RailKey& key, const nlohmann::json& rail);
  // Removes the rail's entry and regenerates; when no entry is left, removes what rdmanet
  // wrote. A rail or pod that is not there is fine. What the pod left in its directory is
  // skipped, never followed or removed; an error here is for the caller to report.
  Status remove(const RailKey& key);

  // Replaces the GID fields of the rail entry of `key` (see gid_fields) when its gidIndex
  // differs from the one in `fields`, and regenerates the pod's files. An entry that is not
  // there (the rail's DEL came first) stays absent. Returns the gidIndex the entry had when
  // it was replaced, std::nullopt when nothing changed.
  Expected<std::optional<nlohmann::json>> refresh_gids(const RailKey& key,
                                                       const nlohmann::json& fields);

  const std::string& root() const { return root_; }

 private:
  Expected<FileLock> lock(const std::string& uid) const;

  std::string root_;
  std::string lock_dir_;
  std::chrono::milliseconds lock_wait_;
};

}  // namespace rdmanet::plugin
