// ADD's RDMA steps and their inverse: which RDMA device belongs to the attached netdev,
// whether it moves into the pod netns (rdmaIsolation and the node's netns mode), the
// soft-RoCE device rdmanet creates on request, RDMA-CM defaults, and the wait for the
// pod addresses' RoCE v2 GIDs.
//
// Order: an InfiniBand device moves before its netdev (moving it recreates the IPoIB
// netdev in the netns it leaves), a RoCE device after. DEL moves the device home first in
// both cases, then the netdev.
#pragma once

#include <optional>
#include <vector>

#include "netns/ip_address.h"
#include "netns/netns.h"
#include "plugin/conf.h"
#include "plugin/device.h"
#include "plugin/state.h"
#include "rdma/gid.h"
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

// Errors: rdmaIsolation "required" when the node is not in exclusive mode or there is no
// device to move (105, naming the mode and how to change it); softRoce without an RDMA
// subsystem (102). `after_reclaim`: a dead pod's attachment of this device was just torn
// down, so its RDMA device may still be on its way back from the dead netns: wait for it.
Expected<RdmaPlan> plan_rdma(const PluginConf& conf, const HostDevice& dev, bool after_reclaim);

// roce.dcb, in the host netns before anything moves: PFC and DSCP->priority of the PF (the
// VF's PF, else the device itself, the macvlan parent in macvlan mode). Policy "verify"
// fails ADD (102) listing every difference; "apply" sets what differs. Node-level and shared
// by every pod on the PF, so DEL leaves it.
Status node_qos(StateStore& store, const PluginConf& conf, const HostDevice& dev,
                netns::Rtnl& host_rtnl);

// Step for InfiniBand devices, before the netdev moves.
Status rdma_before_netdev(StateStore& store, const PluginConf& conf, const RdmaPlan& plan,
                          const netns::Netns& pod, AttachmentState* state);

// Steps after the pod interface is configured: create the soft-RoCE device, move the RDMA
// device (RoCE), RDMA-CM defaults, wait for the RoCE v2 GIDs of `addresses` as the pod
// sees them. Returns the GID report (std::nullopt when there is no RDMA device or nothing
// to report, e.g. InfiniBand). Records every change in state before making it.
Expected<std::optional<rdma::GidReport>> rdma_after_netdev(
    StateStore& store, const PluginConf& conf, const RdmaPlan& plan, const std::string& ifname,
    const netns::Netns& pod, const std::vector<netns::IpAddress>& addresses,
    AttachmentState* state);

// runtimeConfig.CNIDeviceInfoFile (Multus passes it when the device plugin gave a deviceID):
// merges pci-address, pf-pci-address and rdma-device into the device-info-spec file, so
// Multus's network-status shows the pod's RDMA device. Best effort, as Multus reads the file
// best effort: a failure is logged, never fails ADD. The spec has no room for the GID index
// (Multus decodes a fixed type); it is in the log and the attachment state.
void report_device_info(StateStore& store, const PluginConf& conf, const HostDevice& dev,
                        AttachmentState* state);

// The inverse: deletes the soft-RoCE device rdmanet created and moves a moved device back
// to the host netns. Tolerates finding either already done (or done by the kernel: a
// destroyed netns hands its RDMA devices back to the initial one).
Status rdma_teardown(StateStore& store, const AttachmentState& state,
                     const std::optional<netns::Netns>& pod, const netns::Netns& host);

// The soft-RoCE device name of an attachment: "rxe_<ifname>_<8 hex digits>", unique per
// (network, container, ifname), only [A-Za-z0-9_-].
std::string soft_roce_name(const std::string& network, const std::string& container_id,
                           const std::string& ifname);

}  // namespace rdmanet::plugin
