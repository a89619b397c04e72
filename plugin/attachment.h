// One attachment while a command works on it: the context every step shares, and the
// record of the steps taken.
//
// ADD runs its steps (plugin/steps/table.h) against an Attachment. A step that changes the
// node first records what it is about to change (record(): one durable write), then changes
// it. undo() runs the recorded steps' inverses in the table's undo order, each reading only
// what its step recorded; rollback of a failed ADD, DEL, GC, the node agent's teardown and
// the reclaim of a device from a dead pod are all undo(). A step that never ran left no
// record and is never undone.
#pragma once

#include <concepts>
#include <functional>
#include <optional>
#include <span>
#include <string>

#include "cni/env.h"
#include "cni/result.h"
#include "cni/skel.h"
#include "netns/netns.h"
#include "plugin/conf.h"
#include "plugin/device.h"
#include "plugin/record.h"
#include "plugin/steps/ipam.h"
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

// The rail's link as ADD saw it last (port-wait): usable when the pod interface has carrier
// and the RDMA port the pod uses, if any, is ACTIVE.
struct RailLink {
  bool carrier = false;
  std::string rdma_port;     // "<device>/<port>", when the rail has an RDMA port the pod uses
  std::string rdma_state;    // its state as `rdma link` names it: "ACTIVE", "DOWN (physical ...)"
  bool rdma_active = false;  // that state is ACTIVE
  bool usable() const { return carrier && (rdma_port.empty() || rdma_active); }
  // "no carrier on net1, RDMA port rxe0a1b2c3d4e5f/1 DOWN (physical state POLLING)"
  std::string summary(const std::string& ifname) const;
};

// What undoing an attachment needs besides its record: where the state is, the call's
// environment (CNI_PATH, for an IPAM plugin that is exec'd) and how IPAM plugins run.
struct UndoContext {
  std::string state_dir;
  cni::Environment env;
  IpamPlugins ipam;
};

// A step's record: the fields its inverse reads (each step's file owns the codec). Its kind
// is static (kKind), or a member where one step records at two places (rdma-move).
template <class S>
concept StepFields = requires(const S& s) {
  { s.to_json() } -> std::convertible_to<nlohmann::json>;
};

class Attachment {
 public:
  // For ADD: the call's attachment, with its pod netns (not the plugin's own) opened.
  static Expected<Attachment> for_add(const PluginConf& conf, const cni::Call& call,
                                      std::span<const cni::Plugin* const> linked_ipam);
  // For undoing what a record describes (DEL, GC, reclaim, an earlier ADD, the node agent).
  // The pod netns is opened only while its path still names the namespace ADD used.
  static Expected<Attachment> for_undo(const UndoContext& context, AttachmentRecord record);

  // Records a step about to change the node (a durable write of the whole record). When
  // the write fails the step is not recorded, and must not run.
  template <StepFields S>
  Status record(const S& step) {
    return record(kind_of(step), step.to_json());
  }
  // Replaces what the last recorded step (of the same kind) says, from the next write on:
  // for what a step learns only once it acted (a macvlan child's ifindex).
  template <StepFields S>
  void amend(const S& step) {
    amend(kind_of(step), step.to_json());
  }
  // Undoes the recorded steps in the table's undo order. All undone: the record is removed.
  // One failed: the steps not yet undone stay recorded (the next DEL retries them) and its
  // error is returned, naming the step.
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
  const IpamPlugins& ipam() const { return ipam_; }
  // What undoing another attachment from this call needs (an earlier ADD, a dead holder).
  UndoContext undo_context() const { return {store_.root(), env_, ipam_}; }

  // ADD only.
  const PluginConf& conf() const { return *conf_; }
  const cni::Call& call() const { return *call_; }
  HostDevice& device() { return *device_; }
  const HostDevice& device() const { return *device_; }
  void set_device(HostDevice device) { device_ = std::move(device); }
  RdmaPlan& rdma() { return rdma_; }
  const RdmaPlan& rdma() const { return rdma_; }
  // A dead pod's attachment of this device was just undone (claim_device): its RDMA device
  // may still be on its way back from the dead netns.
  bool reclaimed() const { return reclaimed_; }
  void set_reclaimed() { reclaimed_ = true; }
  // What the IPAM plugin gave (ipam_add), and the pod interface as configured
  // (configure_pod_interface), for the steps after them.
  cni::Result& ipam_result() { return ipam_result_; }
  const cni::Result& ipam_result() const { return ipam_result_; }
  netns::LinkInfo& pod_link() { return pod_link_; }
  const netns::LinkInfo& pod_link() const { return pod_link_; }
  // What wait_for_port saw; std::nullopt before it looked.
  std::optional<RailLink>& rail_link() { return rail_link_; }
  const std::optional<RailLink>& rail_link() const { return rail_link_; }

 private:
  Attachment(StateStore store, AttachmentRecord record, netns::Netns host,
             std::optional<netns::Netns> pod, cni::Environment env, IpamPlugins ipam)
      : store_(std::move(store)),
        record_(std::move(record)),
        host_(std::move(host)),
        pod_(std::move(pod)),
        env_(std::move(env)),
        ipam_(ipam) {}

  template <class S>
  static StepKind kind_of(const S& step) {
    if constexpr (requires { S::kKind; }) {
      return S::kKind;
    } else {
      return step.kind;
    }
  }
  Status record(StepKind kind, nlohmann::json data);
  void amend(StepKind kind, nlohmann::json data);
  // Whether the device's hold names another attachment (see undo()).
  bool device_held_by_another() const;

  StateStore store_;
  AttachmentRecord record_;
  netns::Netns host_;
  std::optional<netns::Netns> pod_;
  cni::Environment env_;
  IpamPlugins ipam_;
  const PluginConf* conf_ = nullptr;
  const cni::Call* call_ = nullptr;
  std::optional<HostDevice> device_;
  RdmaPlan rdma_;
  bool reclaimed_ = false;
  cni::Result ipam_result_;
  netns::LinkInfo pod_link_;
  std::optional<RailLink> rail_link_;
};

// Whether the caller holds the device's lock already (a flock is per open file: taking it
// again from the same process would wait forever).
enum class DeviceLock { kTake, kHeldByCaller };

// Undoes the attachment of `seen` as its record is now: with its device's lock, the record
// read again (a DEL, GC, the node agent or another ADD's reclaim may have finished it
// meanwhile: then there is nothing to do), `still_wanted` asked of the fresh record (its error
// leaves everything as it is), then every recorded step undone (Attachment::undo).
Status undo_attachment(const UndoContext& context, const AttachmentRecord& seen, DeviceLock lock,
                       const std::function<Status(const AttachmentRecord&)>& still_wanted = {});

// The attachment's pod netns, if its path still names the namespace ADD used: a path that
// now names another namespace (a reused /proc/<pid>/ns/net, a netns recreated under the
// same name) counts as gone, so DEL and reclaim never change links in somebody else's pod.
Expected<std::optional<netns::Netns>> open_pod_netns(const AttachmentRecord& record);

}  // namespace rdmanet::plugin
