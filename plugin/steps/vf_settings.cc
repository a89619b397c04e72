#include "plugin/steps/vf_settings.h"

#include <spdlog/spdlog.h>

#include <cerrno>

#include "base/json_fields.h"
#include "netns/link.h"
#include "netns/link_identity.h"
#include "plugin/attachment.h"
#include "plugin/steps/vf.h"

namespace rdmanet::plugin {

using netns::VfAttribute;
using netns::VfConfig;
using nlohmann::json;

namespace {

// What the vf-settings step records: the VF and the values ADD replaced, and whether the MAC
// the PF reported was the VF netdev's own (registered by the VF, not pinned through the PF).
struct VfSettingsRecord : VfRecord {
  static constexpr StepKind kKind = StepKind::kVfSettings;
  bool mac_was_vf_own = false;

  json to_json() const {
    json doc = VfRecord::to_json();
    doc["macWasVfOwn"] = mac_was_vf_own;
    return doc;
  }
  static Expected<VfSettingsRecord> from_json(const json& step) {
    VfSettingsRecord r;
    TRY_ASSIGN(static_cast<VfRecord&>(r), VfRecord::from_json(step, "vf-settings"));
    TRY(Fields(step, "vf-settings", ErrorKind::kState)
            .boolean("macWasVfOwn", &r.mac_was_vf_own)
            .status());
    return r;
  }
};

// The config's VF settings, with the PF's admin MAC when the pod interface gets a MAC (so
// the VF keeps it across driver resets). GUIDs are set_vf_guids's.
VfConfig wanted_settings(const PluginConf& conf, const HostDevice& dev) {
  VfConfig cfg = conf.vf;
  cfg.node_guid.reset();
  cfg.port_guid.reset();
  if (conf.mac && dev.vf) {
    cfg.mac = conf.mac;
  }
  return cfg;
}

netns::HwAddress no_admin_mac() { return netns::HwAddress(std::vector<uint8_t>(6, 0)); }

// Opening a VF's netdev resets the VF, which then takes the MAC the PF holds for it (igbvf)
// or, when the PF holds none, registers its own with the PF. The link is left up or down
// as it was. Setting the MAC it already has would not do: the kernel skips an unchanged
// address without asking the driver.
Status reset_vf(netns::Rtnl& rtnl, const netns::LinkInfo& link) {
  if (link.up()) {
    TRY(netns::set_link_down(rtnl, link));
    return netns::set_link_up(rtnl, link);
  }
  TRY(netns::set_link_up(rtnl, link));
  return netns::set_link_down(rtnl, link);
}

// Some VF drivers (igbvf) take an admin MAC set through the PF only when the VF resets, and
// an untrusted VF may not set that MAC itself. configure_pod_interface sets the MAC itself
// where the reset did not give it.
Status adopt_admin_mac(Attachment& a, const netns::HwAddress& mac) {
  return netns::in_netns(*a.pod(), [&]() -> Status {
    TRY_ASSIGN(auto rtnl, netns::Rtnl::open());
    TRY_ASSIGN(auto link, netns::find_link_by_name(rtnl, a.rec().ifname));
    if (link.hwaddr == mac) {
      return ok_status();
    }
    TRY(reset_vf(rtnl, link));
    TRY_ASSIGN(link, netns::find_link_by_name(rtnl, a.rec().ifname));
    spdlog::debug("VF {} after a reset: MAC {} ({} the admin MAC)", a.rec().ifname,
                  link.hwaddr.str(), link.hwaddr == mac ? "took" : "did not take");
    return ok_status();
  });
}

// Puts one attribute back. A MAC that was the VF's own is given back by clearing the admin
// MAC; a driver that refuses the all-zero MAC (EINVAL) gets the old value pinned instead.
Status restore_attribute(netns::Rtnl& rtnl, const netns::LinkInfo& pf, int vf,
                         const VfConfig& original, VfAttribute attribute, bool mac_was_vf_own) {
  if (attribute != VfAttribute::kMac || !mac_was_vf_own) {
    return netns::set_vf_attribute(rtnl, pf, vf, original, attribute);
  }
  VfConfig cleared = original;
  cleared.mac = no_admin_mac();
  auto s = netns::set_vf_attribute(rtnl, pf, vf, cleared, attribute);
  if (!s && s.error().sys_errno() == EINVAL) {
    spdlog::warn("{}; pinning the VF's own MAC {} instead", s.error().msg(), original.mac->str());
    return netns::set_vf_attribute(rtnl, pf, vf, original, attribute);
  }
  return s;
}

// After its admin MAC is cleared the PF has no MAC for the VF (and the VF receives nothing)
// until the VF registers one: it does when it resets, or when bring_netdev_home gives its
// netdev another MAC back. The netdev is in the pod, or back in the host when the pod netns
// is gone.
Status reregister_vf_mac(Attachment& a, const std::string& vf_pci) {
  netns::LinkIdentity id;
  id.parent_bus = "pci";
  id.parent_dev = vf_pci;
  auto reregister = [&](const netns::Netns& here) -> Expected<bool> {
    TRY_ASSIGN(auto rtnl, netns::Rtnl::open());
    TRY_ASSIGN(auto links, netns::find_links(rtnl, here, a.host(), id));
    if (links.size() != 1) {
      return false;
    }
    TRY(reset_vf(rtnl, links.front()));
    return true;
  };
  if (a.pod()) {
    TRY_ASSIGN(bool done, netns::in_netns(*a.pod(), [&] { return reregister(*a.pod()); }));
    if (done) {
      return ok_status();
    }
  }
  TRY_ASSIGN(bool done, reregister(a.host()));
  if (!done) {
    spdlog::warn("VF {}: no netdev found to register its MAC with the PF again", vf_pci);
  }
  return ok_status();
}

}  // namespace

Status apply_vf_settings(Attachment& a) {
  const HostDevice& dev = a.device();
  VfConfig wanted = wanted_settings(a.conf(), dev);
  if (wanted.empty()) {
    return ok_status();
  }
  if (!dev.vf) {
    return Error(ErrorKind::kInvalidConfig,
                 a.conf().vf_field + ": device " + dev.link.name +
                     " is not an SR-IOV VF (select a VF by its PCI address)");
  }
  // One PF's VFs are configured one pod at a time.
  TRY_ASSIGN(auto lock, a.store().lock(pf_lock_key(dev.vf->pf_pci)));
  TRY_ASSIGN(auto rtnl, netns::Rtnl::open());
  TRY_ASSIGN(auto pf, netns::find_link_by_name(rtnl, dev.pf_name));
  TRY_ASSIGN(auto current, netns::read_vf(rtnl, pf.index, pf.name, dev.vf->index));
  VfConfig changes = changes_from(current, wanted);
  if (changes.empty()) {
    return ok_status();  // the VF has every setting already: nothing to put back later
  }
  VfSettingsRecord r;
  r.pf_pci = dev.vf->pf_pci;
  r.pf_name = pf.name;
  r.sysfs_root = a.conf().sysfs_root;
  r.vf = dev.vf->index;
  r.vf_pci = dev.pci;
  r.original = netns::settings_for(current, changes);
  // The PF reports a MAC the VF registered itself just like one it pinned; this one is the
  // VF netdev's own.
  r.mac_was_vf_own = r.original.mac && *r.original.mac == dev.link.hwaddr;
  TRY(a.record(r));
  TRY(netns::set_vf(rtnl, pf, dev.vf->index, changes));
  return changes.mac ? adopt_admin_mac(a, *changes.mac) : ok_status();
}

Status restore_vf_settings(Attachment& a, const json& recorded) {
  TRY_ASSIGN(VfSettingsRecord r, VfSettingsRecord::from_json(recorded));
  const VfConfig& original = r.original;
  TRY_ASSIGN(auto lock, a.store().lock(pf_lock_key(r.pf_pci)));
  TRY_ASSIGN(auto rtnl, netns::Rtnl::open());
  TRY_ASSIGN(auto found, find_pf_and_vf(rtnl, r));
  if (!found) {
    return ok_status();
  }
  // Last applied, first put back; what already has its old value is left alone.
  VfConfig wanted_back = original;
  if (r.mac_was_vf_own && original.mac) {
    wanted_back.mac = no_admin_mac();
  }
  // A PF that already holds no MAC for a VF whose own MAC it held before ADD was cleared by
  // an earlier undo, killed before the VF registered its MAC again: registering it is still
  // to do (the loop below sees the MAC as given back and would not).
  bool mac_cleared = r.mac_was_vf_own && original.mac && found->vf.mac == no_admin_mac();
  auto attributes = netns::attributes_of(original);
  for (auto it = attributes.rbegin(); it != attributes.rend(); ++it) {
    if (!netns::has_setting(found->vf, wanted_back, *it)) {
      TRY(restore_attribute(rtnl, found->pf, r.vf, original, *it, r.mac_was_vf_own));
      mac_cleared = mac_cleared || (*it == VfAttribute::kMac && r.mac_was_vf_own);
    }
  }
  return mac_cleared && !r.vf_pci.empty() ? reregister_vf_mac(a, r.vf_pci) : ok_status();
}

}  // namespace rdmanet::plugin
