// rdmanet's own configuration keys, on top of the shared NetConf.
#pragma once

#include <optional>
#include <string>

#include "base/names.h"
#include "cni/config.h"
#include "cni/env.h"
#include "netns/dcb.h"
#include "netns/hw_address.h"
#include "netns/link.h"
#include "netns/vf.h"
#include "rdma/cm_defaults.h"

namespace rdmanet::plugin {

// mode: the device itself moves into the pod, or a macvlan child of it is created there.
enum class Mode { kNetdev, kMacvlan };
inline constexpr Name<Mode> kModeNames[] = {{Mode::kNetdev, "netdev"}, {Mode::kMacvlan, "macvlan"}};

// rdmaIsolation: whether the pod's RDMA device moves into the pod netns.
//   auto      move it when the node's RDMA subsystem is in exclusive netns mode, else share
//   required  fail ADD unless it can be moved (exclusive mode, a movable device)
//   off       never move it
enum class RdmaIsolation { kAuto, kRequired, kOff };
inline constexpr Name<RdmaIsolation> kRdmaIsolationNames[] = {
    {RdmaIsolation::kAuto, "auto"},
    {RdmaIsolation::kRequired, "required"},
    {RdmaIsolation::kOff, "off"}};

// How the device was named in the config, in the documented precedence.
struct DeviceSelector {
  enum class Kind { kPci, kAuxiliary, kRdma, kName, kHwaddr } kind = Kind::kName;
  std::string value;
  std::string field;  // the config key it came from, for messages
  std::string str() const { return field + "=" + value; }
};

struct PluginConf {
  cni::NetConf net;
  Mode mode = Mode::kNetdev;
  netns::MacvlanMode macvlan_mode = netns::MacvlanMode::kBridge;
  DeviceSelector device;
  std::optional<uint32_t> mtu;
  std::optional<netns::HwAddress> mac;  // mac, runtimeConfig.mac or CNI_ARGS MAC
  netns::VfConfig vf;                   // SR-IOV settings applied through the PF (sriov-cni's keys)
  std::string vf_field;                 // the first VF key set, for messages
  bool multi_rail_sysctls = true;
  bool source_routing = true;  // a routing table and a "from <addr>" rule per rail
  RdmaIsolation rdma_isolation = RdmaIsolation::kAuto;
  bool soft_roce = false;          // create a soft-RoCE device on the pod interface
  rdma::CmDefaults roce_cm;        // roce.tos / roce.mode: RDMA-CM defaults of the device
  std::optional<int> control_tos;  // roce.controlTos: NCCL's control messages (NCCL_IB_FIFO_TC)
  netns::DcbConfig dcb;            // roce.dcb: PFC and DSCP->priority on the PF (node level)
  bool dcb_apply = false;          // roce.dcb.policy "apply"; "verify" (default) only checks
  int gid_timeout_ms = 10000;      // gidTimeout (seconds in the config)
  int port_timeout_ms = 5000;      // portTimeout (seconds): carrier and RDMA port ACTIVE
  bool require_active = false;     // requireActive: a rail still down then fails ADD
  std::string configfs_root = "/sys/kernel/config";
  std::string state_dir = "/var/lib/cni/rdmanet";
  std::string pod_info_dir = "/run/rdmanet/pods";  // empty: no pod rails files
  std::string sysfs_root = "/sys";
  int ipam_timeout_seconds = 60;
};

// The traffic class (IP ToS byte: DSCP << 2 | ECN) a RoCE v2 workload on this network should
// send with, and where it comes from: roce.tos as given ("roce.tos"); else the lowest DSCP
// that roce.dcb maps to its lowest PFC priority, marked ECT(0) as 106 is DSCP 26
// ("roce.dcb"): the lossless class the PF was checked or set to have. None when the config
// names neither (rdmanet does not guess the fabric's class).
struct TrafficClass {
  int value = 0;
  std::string source;
};
std::optional<TrafficClass> roce_traffic_class(const PluginConf& conf);

// Reads rdmanet's keys from the config; errors name the field (code 7, or 2
// for a value rdmanet does not support).
Expected<PluginConf> load_conf(const cni::NetConf& net, const cni::CniArgs& args);

}  // namespace rdmanet::plugin
