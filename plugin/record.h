// The attachment record: who the attachment is, and the steps ADD took, in order, each with
// what its inverse needs to undo exactly that. It is the state file DEL reads
// (plugin/store.h); this file is its codec.
//
// Version 2 (this one) records steps; version 1 (before 0.2) recorded a snapshot of the
// device, its VF and its RDMA device. A version 1 file is read as the steps it implies, so
// an upgrade can delete the attachments of the release before.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/names.h"
#include "plugin/conf.h"
#include "plugin/steps/table.h"

namespace rdmanet::plugin {

// One step taken: its kind and what its inverse reads (the step's own keys).
struct StepRecord {
  StepKind kind;
  nlohmann::json data = nlohmann::json::object();
};

enum class Phase { kAdding, kAdded };
inline constexpr Name<Phase> kPhaseNames[] = {{Phase::kAdding, "adding"}, {Phase::kAdded, "added"}};

// The pod's RDMA device as ADD reported it (for CHECK and for people reading the state).
// (The NOLINTs: clang-tidy 14 finds a possible exception inside nlohmann::json, under the
// implicit noexcept members of any struct holding one, where nothing of ours throws.)
struct RdmaReport {  // NOLINT(bugprone-exception-escape)
  std::string device;
  int index = -1;         // the kernel's RDMA device index; -1 until known
  uint32_t port = 1;      // the port whose netdev is the pod interface
  std::string node_mode;  // the node's RDMA netns mode at ADD
  nlohmann::json gids;    // rdma::GidReport::to_json(), once known
  std::string driver;     // its driver ("rxe", "mlx5_ib", netns::Sysfs::rdma_driver); "" unknown
};

// An attachment's identity: what the runtime names it by in ADD, CHECK and DEL.
struct AttachmentId {
  std::string network;
  std::string container_id;
  std::string ifname;
  bool operator==(const AttachmentId&) const = default;
  // "container <id> (ifname <if>, network <net>)", for messages.
  std::string str() const;
};

struct AttachmentRecord {  // NOLINT(bugprone-exception-escape): see RdmaReport
  std::string network;
  std::string container_id;
  std::string ifname;
  std::string netns;
  uint64_t netns_cookie = 0;  // the pod netns's cookie at ADD; 0 when the kernel has none
  // The host's id for the pod netns (RTM_NEWNSID at ADD); -1 in records made without one.
  // Through it DEL still sees into the netns when its pin is gone but a process keeps the
  // netns alive.
  int netns_id = -1;
  Mode mode = Mode::kNetdev;
  Phase phase = Phase::kAdding;
  std::string device_key;   // the device's lock and hold key (plugin/device.h)
  std::string device_name;  // its host name at ADD, for messages
  std::string pod;          // "K8S_POD_NAMESPACE/K8S_POD_NAME" from CNI_ARGS, when given
  std::vector<StepRecord> steps;
  std::optional<RdmaReport> rdma;
  std::string config;     // the ADD's stdin, for the IPAM DEL after config changes
  nlohmann::json result;  // the ADD result (1.1.0 encoding), once known

  AttachmentId id() const { return {network, container_id, ifname}; }
  // Who holds the device, as a user knows it: "pod ns/name (container 0123456789ab, net1 in
  // network rail0)", or without the pod when the runtime did not say.
  std::string holder() const;
  // The first step of `kind`, if ADD took one.
  const StepRecord* step(StepKind kind) const;

  nlohmann::json to_json() const;
  // `where` names the file in errors (kState).
  static Expected<AttachmentRecord> from_json(const nlohmann::json& doc, const std::string& where);
};

// A link name read back from a record: one the kernel could hold, else kState naming
// `field` (state that names what no link can be named was not written by ADD).
Status check_recorded_link_name(const std::string& name, const std::string& field);

}  // namespace rdmanet::plugin
