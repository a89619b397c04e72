// ADD's steps in the order cmd_add takes them, each beside its inverse.
//
// The first group only looks (and may refuse): nothing to undo. From hold_device on, a step
// that changes the node records what it is about to change (Attachment::record) and then
// changes it; its inverse reads that record alone and undoes exactly that, one kernel
// request per attribute, naming the attribute and the kernel's error when one fails. Every
// inverse tolerates finding its work already undone (a repeated DEL, a kernel that cleaned
// up after a dead netns), because DEL may run it again after a crash.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "cni/delegate.h"
#include "cni/env.h"
#include "cni/result.h"
#include "netns/link.h"
#include "plugin/attachment.h"

namespace rdmanet::plugin {

// ---- Looking, before anything changes ----

// An earlier ADD of this very attachment (crashed, or repeated without DEL) is undone
// first, so its device and addresses are not leaked.
Status undo_earlier_add(Attachment& a);
// netdev mode: refuses (101) a device another pod holds while that pod's netns lives; a
// holder whose netns is gone (missed DEL, node reboot) is undone and the device reclaimed.
Status claim_device(Attachment& a);
// Resolves the config's device selector in the host netns.
Status find_host_device(Attachment& a);
// Which RDMA device belongs to the netdev and whether it moves into the pod netns. Errors:
// rdmaIsolation "required" that the node cannot give (105, naming the mode and how to
// change it), softRoce without an RDMA subsystem (102).
Status plan_rdma(Attachment& a);
// roce.dcb: PFC and DSCP->priority of the PF (the VF's PF, else the device itself, the
// macvlan parent in macvlan mode). "verify" fails ADD (102) listing every difference;
// "apply" sets what differs. Node-level, shared by every pod on the PF: no inverse.
Status check_node_qos(Attachment& a);

// ---- Changing the node, each recorded first ----

// netdev mode: the device's hold file names this attachment, so a second pod is refused.
Status hold_device(Attachment& a);
Status release_hold(Attachment& a, const nlohmann::json& step);

// InfiniBand VFs: runtimeConfig.infinibandGUID (or args.cni.guid) as node and port GUID,
// through the PF, under the PF's lock; then the VF is rebound to its driver, which takes
// GUIDs only when it probes the VF (mlx5, as ib-sriov-cni does), and the device and its
// RDMA plan are found again (the netdev and RDMA device are made anew). The inverse gives
// the GUIDs back (all-ones, "no GUID", where the PF reported none), rebinds, and names the
// netdev as it was. Before the moves: a rebind recreates the netdev in the host.
Status set_vf_guids(Attachment& a);
Status reset_vf_guids(Attachment& a, const nlohmann::json& step);

// The netdev's RDMA device into the pod netns (exclusive mode): an InfiniBand device before
// its netdev (moving it recreates the IPoIB netdev where it leaves; the netdev is then
// found again), a RoCE device after. The inverse sends it home from inside the pod netns.
enum class RdmaOrder { kBeforeNetdev, kAfterNetdev };
Status move_rdma_device_in(Attachment& a, RdmaOrder order);
Status move_rdma_device_home(Attachment& a, const nlohmann::json& step);

// netdev mode: down, altnames dropped (they would clash in the pod), moved into the pod
// netns and renamed to CNI_IFNAME in one request. Handing the device to the pod hands it
// its name, MTU, MAC, alias and admin state: the inverse brings it home and gives each of
// them back.
Status move_netdev_in(Attachment& a);
Status bring_netdev_home(Attachment& a, const nlohmann::json& step);

// macvlan mode: a child of the device, created directly in the pod netns.
Status create_macvlan(Attachment& a);
Status delete_macvlan(Attachment& a, const nlohmann::json& step);

// SR-IOV: the VF attributes the config sets and the VF does not have yet, through the PF,
// under the PF's lock, one request each. After the move, so that DEL resets them through
// the PF before the netdev comes home (as sriov-cni does): igb refuses a VF's own MAC
// while the PF holds an admin MAC for it. A VF whose driver takes an admin MAC only when it
// resets (igbvf) is reset (up, down) in the pod so it has the MAC before it is configured.
// The inverse puts back, attribute by attribute and last first, those that differ; a MAC
// that was the VF's own (not one the PF pinned) is given back by clearing the admin MAC,
// so the VF is not left pinned.
Status apply_vf_settings(Attachment& a);
Status restore_vf_settings(Attachment& a, const nlohmann::json& step);

// The IPAM plugin's ADD; the inverse is its DEL with the config ADD used.
Expected<cni::Result> ipam_add(Attachment& a);
Status ipam_release(Attachment& a, const nlohmann::json& step);

// Inside the pod netns: MTU, MAC, multi-rail sysctls, addresses, up, routes, announcements;
// returns the interface as it ends up. Not recorded: addresses, routes and sysctls go with the
// interface (the kernel drops them when it leaves the pod netns, or deletes it with a macvlan
// child), and the MTU and MAC of a moved netdev are given back by bring_netdev_home.
Expected<netns::LinkInfo> configure_pod_interface(Attachment& a, const cni::Result& ipam);

// sourceRouting (default on): the pod interface gets a routing table of its own (its
// addresses' subnets and the IPAM routes, through it) and a "from <address>" rule per
// address, so a pod with several rails sends what each rail's address sources out of that
// rail, and the peer's replies come back on it, also when the rails share a subnet. The
// table's routes go with the interface; the inverse deletes the rules.
Status add_source_routing(Attachment& a, const cni::Result& ipam, const netns::LinkInfo& pod_link);
Status remove_source_routing(Attachment& a, const nlohmann::json& step);

// softRoce: an rxe device on the pod interface, created from inside the pod netns. The
// inverse deletes it wherever it is.
Status create_soft_roce(Attachment& a);
Status delete_soft_roce(Attachment& a, const nlohmann::json& step);

// roce.tos / roce.mode on the pod's RDMA device. Not recorded: for a device moved or
// created for the pod, moving it home or deleting it resets them; a device the pod shares
// is node-level like roce.dcb, and DEL leaves it.
Status set_rdma_cm_defaults(Attachment& a);
// Waits (gidTimeout) for the RoCE v2 GIDs of the IPAM addresses, as the pod sees the GID
// table, and reports them. Only looks.
Status wait_for_gids(Attachment& a, const cni::Result& ipam);

// The rail's entry in the pod's rails files (plugin/pod_info.h: interface, RDMA device,
// port, link layer, GIDs and the RoCE v2 GID index of each address family, ToS, PCI address,
// NUMA node) and the NCCL/UCX settings derived from all of the pod's rails. Only for a pod
// whose CNI_ARGS carry K8S_POD_UID, and unless podInfoDir is "". The inverse removes the
// entry (the pod's last one, its directory).
Status write_pod_info(Attachment& a, const cni::Result& ipam);
Status remove_pod_info(Attachment& a, const nlohmann::json& step);

// runtimeConfig.CNIDeviceInfoFile: merges pci-address, pf-pci-address and rdma-device
// into the device-info-spec file, so network-status shows the pod's RDMA device. Best
// effort, as Multus reads it: a failure is logged, never fails ADD.
void write_device_info(Attachment& a);
Status remove_device_info(Attachment& a, const nlohmann::json& step);

// The result: prevResult (in a chain) plus the pod interface and the IPAM addresses.
cni::Result build_result(Attachment& a, const netns::LinkInfo& pod_link, const cni::Result& ipam);

// ---- CHECK ----

// The pod interface is there and up, with the sysctls ADD set and prevResult's MAC,
// addresses and routes.
Status check_pod_interface(const cni::Call& call, const PluginConf& conf, const netns::Netns& pod);
// The RDMA device ADD moved into the pod or created for it is still visible there.
Status check_rdma_device(const AttachmentRecord& record, const netns::Netns& pod);

// ---- Shared ----

// A delegated IPAM call may take this long before it is killed (error 11).
cni::DelegateOptions ipam_options(int seconds);

// IPAM DEL through the delegated plugin. An IPAM plugin that is not installed, or that
// rejects the config itself, cannot hold anything for it: a warning, not an error (a
// failing DEL is retried forever and keeps the pod Terminating).
Status ipam_del(const std::string& type, const cni::Environment& env, const std::string& config,
                int timeout_seconds);

// A link name read back from a record: one the kernel could hold, else kState naming
// `field` (state that names what no link can be named was not written by ADD).
Status check_recorded_link_name(const std::string& name, const std::string& field);

// The soft-RoCE device name of an attachment: "rxe_<ifname>_<8 hex digits>", unique per
// (network, container, ifname), only [A-Za-z0-9_-].
std::string soft_roce_name(const AttachmentId& id);

}  // namespace rdmanet::plugin
