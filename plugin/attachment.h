// One attachment while a command works on it: the context every step shares, and the
// record of the steps taken.
//
// ADD runs its steps (plugin/steps.h) against an Attachment. A step that changes the node
// first records what it is about to change (record(): one durable write), then changes it.
// undo() walks the recorded steps in reverse and runs each one's inverse, which reads only
// what its step recorded; rollback of a failed ADD, DEL, GC and the reclaim of a device
// from a dead pod are all undo(). A step that never ran left no record and is never undone.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "cni/env.h"
#include "cni/result.h"
#include "cni/skel.h"
#include "netns/netns.h"
#include "plugin/conf.h"
#include "plugin/device.h"
#include "plugin/record.h"
#include "plugin/store.h"
#include "rdma/nldev.h"

namespace rdmanet::plugin {

// What ADD will do about RDMA, decided in the host netns before anything changes.
struct RdmaPlan {
  bool active = false;  // false: no RDMA subsystem or no RDMA device, and none asked for
  rdma::NetnsMode node_mode = rdma::NetnsMode::kShared;
  std::optional<rdma::Device> device;  // the netdev's own RDMA device (not soft-RoCE)
  uint32_t port = 1;                   // its port whose netdev is the attached one
  bool move = false;                   // the RDMA device moves into the pod netns
  bool infiniband = false;             // moves before the netdev
};

class Attachment {
 public:
  // For ADD: the call's attachment, with its pod netns (not the plugin's own) opened.
  static Expected<Attachment> for_add(const PluginConf& conf, const cni::Call& call);
  // For undoing what a record describes (DEL, GC, reclaim, an earlier ADD). The pod netns
  // is opened only while its path still names the namespace ADD used.
  static Expected<Attachment> for_undo(const std::string& state_dir, AttachmentRecord record,
                                       const cni::Environment& env, int ipam_timeout_seconds);

  // Records a step about to change the node (a durable write of the whole record). When
  // the write fails the step is not recorded, and must not run.
  Status record(StepKind kind, nlohmann::json data);
  // Undoes the recorded steps, last first. All undone: the record is removed. One failed:
  // the steps not yet undone stay recorded (the next DEL retries them) and its error is
  // returned, naming the step.
  Status undo();
  // Runs ADD's node-changing steps; when one fails, undoes the steps recorded so far.
  Expected<cni::Result> roll_back_on_error(const std::function<Expected<cni::Result>()>& steps);
  // The last write of a successful ADD: the result, the RDMA report, phase "added".
  Expected<cni::Result> finish(cni::Result result);

  // Shared by the steps.
  StateStore& store() { return store_; }
  AttachmentRecord& rec() { return record_; }
  const AttachmentRecord& rec() const { return record_; }
  const netns::Netns& host() const { return host_; }
  // ADD: the pod netns. Undo: std::nullopt when the pod netns is gone (or is now another).
  const std::optional<netns::Netns>& pod() const { return pod_; }
  // The environment of the call, with the attachment's own container id, ifname and netns
  // (the IPAM plugin is called with them).
  const cni::Environment& env() const { return env_; }
  int ipam_timeout_seconds() const { return ipam_timeout_seconds_; }

  // ADD only.
  const PluginConf& conf() const { return *conf_; }
  const cni::Call& call() const { return *call_; }
  HostDevice& device() { return *device_; }
  void set_device(HostDevice device) { device_ = std::move(device); }
  RdmaPlan& rdma() { return rdma_; }
  // A dead pod's attachment of this device was just undone (claim_device): its RDMA device
  // may still be on its way back from the dead netns.
  bool reclaimed() const { return reclaimed_; }
  void set_reclaimed() { reclaimed_ = true; }

 private:
  Attachment(StateStore store, AttachmentRecord record, netns::Netns host,
             std::optional<netns::Netns> pod, cni::Environment env, int ipam_timeout_seconds)
      : store_(std::move(store)),
        record_(std::move(record)),
        host_(std::move(host)),
        pod_(std::move(pod)),
        env_(std::move(env)),
        ipam_timeout_seconds_(ipam_timeout_seconds) {}

  // Whether the device's hold names another attachment (see undo()).
  bool device_held_by_another() const;

  StateStore store_;
  AttachmentRecord record_;
  netns::Netns host_;
  std::optional<netns::Netns> pod_;
  cni::Environment env_;
  int ipam_timeout_seconds_;
  const PluginConf* conf_ = nullptr;
  const cni::Call* call_ = nullptr;
  std::optional<HostDevice> device_;
  RdmaPlan rdma_;
  bool reclaimed_ = false;
};

// The attachment's pod netns, if its path still names the namespace ADD used: a path that
// now names another namespace (a reused /proc/<pid>/ns/net, a netns recreated under the
// same name) counts as gone, so DEL and reclaim never change links in somebody else's pod.
Expected<std::optional<netns::Netns>> open_pod_netns(const AttachmentRecord& record);

}  // namespace rdmanet::plugin
