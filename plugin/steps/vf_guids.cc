#include "plugin/steps/vf_guids.h"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <chrono>
#include <thread>

#include "base/json_fields.h"
#include "netns/link.h"
#include "netns/sysfs.h"
#include "plugin/attachment.h"
#include "plugin/steps/claim.h"
#include "plugin/steps/rdma_plan.h"
#include "plugin/steps/vf.h"

namespace rdmanet::plugin {

using netns::VfAttribute;
using netns::VfConfig;
using nlohmann::json;

namespace {

// What the vf-guids step records: the VF, the GUIDs it had, and its netdev's host name (the
// rebind makes the netdev anew, under the kernel's name).
struct VfGuidsRecord : VfRecord {
  static constexpr StepKind kKind = StepKind::kVfGuids;
  std::string host_name;

  json to_json() const {
    json doc = VfRecord::to_json();
    doc["hostName"] = host_name;
    return doc;
  }
  static Expected<VfGuidsRecord> from_json(const json& step) {
    VfGuidsRecord r;
    TRY_ASSIGN(static_cast<VfRecord&>(r), VfRecord::from_json(step, "vf-guids"));
    TRY(Fields(step, "vf-guids", ErrorKind::kState).string("hostName", &r.host_name).status());
    if (!r.host_name.empty()) {
      TRY(check_recorded_link_name(r.host_name, "vf-guids.hostName"));
    }
    return r;
  }
};

// What mlx5 reads as "no GUID", given back to a VF whose PF reported none (the all-zero GUID
// is refused as invalid; ib-sriov-cni does the same).
constexpr uint64_t kNoGuid = ~uint64_t{0};

// A rebound VF's driver makes its netdev anew; it shows in sysfs once probed.
Expected<std::string> wait_for_vf_netdev(const netns::Sysfs& sysfs, const std::string& vf_pci) {
  for (int tries = 0;; ++tries) {
    auto name = sysfs.pci_netdev(vf_pci);
    if (name || tries == 50) {
      return std::move(name).with_context("VF " + vf_pci + " after its driver was bound again");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// The rebound VF's netdev under its recorded host name again (the kernel named it anew).
Status rename_back(netns::Rtnl& rtnl, const std::string& name, const VfGuidsRecord& r) {
  if (r.host_name.empty() || name == r.host_name) {
    return ok_status();
  }
  TRY_ASSIGN(auto link, netns::find_link_by_name(rtnl, name));
  if (auto renamed = netns::rename_link(rtnl, link, r.host_name); !renamed) {
    if (renamed.error().sys_errno() != EEXIST) {
      return renamed;
    }
    spdlog::warn("VF {} is back as {}: {}", r.vf_pci, name, renamed.error().msg());
  }
  return ok_status();
}

}  // namespace

Status set_vf_guids(Attachment& a) {
  const PluginConf& conf = a.conf();
  if (!conf.vf.node_guid && !conf.vf.port_guid) {
    return ok_status();
  }
  const HostDevice& dev = a.device();
  if (!dev.vf) {
    return Error(ErrorKind::kInvalidConfig,
                 "infinibandGUID: device " + dev.link.name +
                     " is not an SR-IOV VF (select an InfiniBand VF by its PCI address)");
  }
  TRY_ASSIGN(auto lock, a.store().lock(pf_lock_key(dev.vf->pf_pci)));
  TRY_ASSIGN(auto rtnl, netns::Rtnl::open());
  TRY_ASSIGN(auto pf, netns::find_link_by_name(rtnl, dev.pf_name));
  TRY_ASSIGN(auto current, netns::read_vf(rtnl, pf.index, pf.name, dev.vf->index));
  VfConfig guids;
  guids.node_guid = conf.vf.node_guid;
  guids.port_guid = conf.vf.port_guid;
  VfConfig changes = changes_from(current, guids);
  if (changes.empty()) {
    return ok_status();  // the VF has them already: no rebind, nothing to give back
  }
  VfGuidsRecord r;
  r.pf_pci = dev.vf->pf_pci;
  r.pf_name = pf.name;
  r.sysfs_root = conf.sysfs_root;
  r.vf = dev.vf->index;
  r.vf_pci = dev.pci;
  r.host_name = dev.link.name;
  r.original = netns::settings_for(current, changes);
  TRY(a.record(r));
  TRY(netns::set_vf(rtnl, pf, dev.vf->index, changes));
  netns::Sysfs sysfs(conf.sysfs_root);
  TRY(sysfs.rebind_pci_driver(dev.pci));
  TRY(wait_for_vf_netdev(sysfs, dev.pci));
  TRY(find_host_device(a));
  return plan_rdma(a);
}

Status reset_vf_guids(Attachment& a, const json& recorded) {
  TRY_ASSIGN(VfGuidsRecord r, VfGuidsRecord::from_json(recorded));
  VfConfig back;
  back.node_guid = r.original.node_guid.value_or(kNoGuid);
  back.port_guid = r.original.port_guid.value_or(kNoGuid);
  TRY_ASSIGN(auto lock, a.store().lock(pf_lock_key(r.pf_pci)));
  TRY_ASSIGN(auto rtnl, netns::Rtnl::open());
  TRY_ASSIGN(auto found, find_pf_and_vf(rtnl, r));
  if (!found) {
    return ok_status();
  }
  bool changed = false;
  for (VfAttribute attribute : {VfAttribute::kNodeGuid, VfAttribute::kPortGuid}) {
    if (!netns::has_setting(found->vf, back, attribute)) {
      TRY(netns::set_vf_attribute(rtnl, found->pf, r.vf, back, attribute));
      changed = true;
    }
  }
  if (!changed || r.vf_pci.empty()) {
    return ok_status();
  }
  netns::Sysfs sysfs(r.sysfs_root);
  TRY(sysfs.rebind_pci_driver(r.vf_pci));
  TRY_ASSIGN(std::string name, wait_for_vf_netdev(sysfs, r.vf_pci));
  return rename_back(rtnl, name, r);
}

}  // namespace rdmanet::plugin
