// SR-IOV VF settings through the PF, and putting them back.
#include <spdlog/spdlog.h>

#include <cerrno>
#include <chrono>
#include <thread>

#include "base/files.h"
#include "base/json_fields.h"
#include "netns/link.h"
#include "netns/link_identity.h"
#include "netns/sysfs.h"
#include "netns/vf.h"
#include "plugin/steps.h"

namespace rdmanet::plugin {

using netns::VfAttribute;
using netns::VfConfig;
using nlohmann::json;

namespace {

// The settings as the record holds them; only those set appear.
json settings_to_json(const VfConfig& cfg) {
  json doc = json::object();
  if (cfg.mac) {
    doc["mac"] = cfg.mac->str();
  }
  if (cfg.vlan) {
    doc["vlan"] = *cfg.vlan;
    doc["qos"] = cfg.qos.value_or(0);
    doc["vlanProto"] = cfg.vlan_proto.value_or(0x8100);
  }
  if (cfg.spoofchk) {
    doc["spoofchk"] = *cfg.spoofchk;
  }
  if (cfg.trust) {
    doc["trust"] = *cfg.trust;
  }
  if (cfg.link_state) {
    doc["linkState"] = name_of(netns::kVfLinkStateNames, *cfg.link_state);
  }
  if (cfg.min_tx_rate || cfg.max_tx_rate) {
    doc["minTxRate"] = cfg.min_tx_rate.value_or(0);
    doc["maxTxRate"] = cfg.max_tx_rate.value_or(0);
  }
  if (cfg.node_guid) {
    doc["nodeGuid"] = netns::format_guid(*cfg.node_guid);
  }
  if (cfg.port_guid) {
    doc["portGuid"] = netns::format_guid(*cfg.port_guid);
  }
  return doc;
}

Expected<VfConfig> settings_from_json(const json& doc, const std::string& where) {
  VfConfig cfg;
  Fields f(doc, where, ErrorKind::kState);
  std::string mac;
  std::string node_guid;
  std::string port_guid;
  f.string("mac", &mac).integer_in("vlan", 0, 4095, &cfg.vlan).integer_in("qos", 0, 7, &cfg.qos);
  f.integer_in("vlanProto", 0, 0xffff, &cfg.vlan_proto);
  f.boolean("spoofchk", &cfg.spoofchk).boolean("trust", &cfg.trust);
  f.name("linkState", netns::kVfLinkStateNames, &cfg.link_state);
  f.integer_in("minTxRate", 0, 0xffffffffLL, &cfg.min_tx_rate);
  f.integer_in("maxTxRate", 0, 0xffffffffLL, &cfg.max_tx_rate);
  f.string("nodeGuid", &node_guid).string("portGuid", &port_guid);
  TRY(f.status());
  if (!mac.empty()) {
    TRY_ASSIGN(cfg.mac, netns::HwAddress::parse(mac).with_context(where + ".mac"));
  }
  for (auto [key, text, out] : {std::tuple{"nodeGuid", &node_guid, &cfg.node_guid},
                                std::tuple{"portGuid", &port_guid, &cfg.port_guid}}) {
    if (!text->empty()) {
      auto guid = netns::parse_guid(*text, where + "." + key);
      if (!guid) {
        return Error(ErrorKind::kState, guid.error().msg());
      }
      *out = *guid;
    }
  }
  return cfg;
}

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

// What mlx5 reads as "no GUID", given back to a VF whose PF reported none (the all-zero GUID
// is refused as invalid; ib-sriov-cni does the same).
constexpr uint64_t kNoGuid = ~uint64_t{0};

// Only the attributes whose value the VF does not have yet.
VfConfig changes_from(const netns::VfState& current, const VfConfig& wanted) {
  VfConfig changes;
  for (VfAttribute attribute : netns::attributes_of(wanted)) {
    if (netns::has_setting(current, wanted, attribute)) {
      continue;
    }
    VfConfig one = netns::only(wanted, attribute);
    if (attribute == VfAttribute::kRate) {
      // One attribute carries both rates: keep the one the config leaves alone.
      one.min_tx_rate = one.min_tx_rate.value_or(current.min_tx_rate);
      one.max_tx_rate = one.max_tx_rate.value_or(current.max_tx_rate);
    }
    changes.merge(one);
  }
  return changes;
}

std::string pf_lock_key(const std::string& pf_pci) { return "pf-" + pf_pci; }

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

// The fields every VF step records about the VF and its PF.
struct VfStep {
  std::string pf_pci;
  std::string pf_name;
  std::string sysfs_root = "/sys";
  std::string vf_pci;
  int vf = 0;
  VfConfig original;
};

Expected<VfStep> vf_step_from_json(const json& step, const std::string& name) {
  VfStep s;
  json original_doc;
  Fields f(step, name, ErrorKind::kState);
  f.required_string("pfPci", &s.pf_pci).string("pfName", &s.pf_name).string("vfPci", &s.vf_pci);
  f.string("sysfsRoot", &s.sysfs_root).integer_in("vf", 0, 0xffff, &s.vf);
  f.object("original", &original_doc);
  TRY(f.status());
  for (auto [field, value] : {std::pair{"pfPci", &s.pf_pci}, std::pair{"vfPci", &s.vf_pci}}) {
    if (!value->empty() && !netns::is_pci_address(*value)) {
      return Error(ErrorKind::kState,
                   name + "." + field + " " + in_quotes(*value) + " is not a PCI address");
    }
  }
  TRY(check_absolute_path(s.sysfs_root, name + ".sysfsRoot", ErrorKind::kState));
  TRY_ASSIGN(s.original, settings_from_json(original_doc, name + ".original"));
  return s;
}

// The PF of a recorded VF step, by its PCI address (names change across reboots); nullopt
// when the PF or the VF is gone, and their settings with it.
struct PfAndVf {
  netns::LinkInfo pf;
  netns::VfState vf;
};
Expected<std::optional<PfAndVf>> find_pf_and_vf(netns::Rtnl& rtnl, const VfStep& s) {
  std::string pf_name = s.pf_name;
  if (auto current = netns::Sysfs(s.sysfs_root).pci_netdev(s.pf_pci); current) {
    pf_name = *current;
  }
  auto pf = netns::find_link_by_name(rtnl, pf_name);
  if (!pf && pf.error().kind() == ErrorKind::kDeviceNotFound) {
    spdlog::warn("PF {} ({}) is gone; VF {} settings not restored", pf_name, s.pf_pci, s.vf);
    return std::optional<PfAndVf>();
  }
  if (!pf) {
    return std::move(pf).error();  // could not look: not "gone"
  }
  auto current = netns::read_vf(rtnl, pf->index, pf->name, s.vf);
  if (!current && current.error().kind() == ErrorKind::kDeviceNotFound) {
    spdlog::warn("{}; its settings are gone with it", current.error().msg());
    return std::optional<PfAndVf>();
  }
  if (!current) {
    return std::move(current).error();
  }
  return std::optional<PfAndVf>(PfAndVf{std::move(*pf), std::move(*current)});
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
  TRY(a.record(StepKind::kVfGuids,
               {{"pfPci", dev.vf->pf_pci},
                {"pfName", pf.name},
                {"sysfsRoot", conf.sysfs_root},
                {"vf", dev.vf->index},
                {"vfPci", dev.pci},
                {"hostName", dev.link.name},
                {"original", settings_to_json(netns::settings_for(current, changes))}}));
  TRY(netns::set_vf(rtnl, pf, dev.vf->index, changes));
  netns::Sysfs sysfs(conf.sysfs_root);
  TRY(sysfs.rebind_pci_driver(dev.pci));
  TRY(wait_for_vf_netdev(sysfs, dev.pci));
  TRY(find_host_device(a));
  return plan_rdma(a);
}

Status reset_vf_guids(Attachment& a, const json& step) {
  TRY_ASSIGN(VfStep s, vf_step_from_json(step, "vf-guids"));
  std::string host_name;
  TRY(Fields(step, "vf-guids", ErrorKind::kState).string("hostName", &host_name).status());
  if (!host_name.empty()) {
    TRY(check_recorded_link_name(host_name, "vf-guids.hostName"));
  }
  VfConfig back;
  back.node_guid = s.original.node_guid.value_or(kNoGuid);
  back.port_guid = s.original.port_guid.value_or(kNoGuid);
  TRY_ASSIGN(auto lock, a.store().lock(pf_lock_key(s.pf_pci)));
  TRY_ASSIGN(auto rtnl, netns::Rtnl::open());
  TRY_ASSIGN(auto found, find_pf_and_vf(rtnl, s));
  if (!found) {
    return ok_status();
  }
  bool changed = false;
  for (VfAttribute attribute : {VfAttribute::kNodeGuid, VfAttribute::kPortGuid}) {
    if (!netns::has_setting(found->vf, back, attribute)) {
      TRY(netns::set_vf_attribute(rtnl, found->pf, s.vf, back, attribute));
      changed = true;
    }
  }
  netns::Sysfs sysfs(s.sysfs_root);
  if (!changed || s.vf_pci.empty()) {
    return ok_status();
  }
  TRY(sysfs.rebind_pci_driver(s.vf_pci));
  TRY_ASSIGN(std::string name, wait_for_vf_netdev(sysfs, s.vf_pci));
  if (host_name.empty() || name == host_name) {
    return ok_status();
  }
  TRY_ASSIGN(auto link, netns::find_link_by_name(rtnl, name));
  if (auto renamed = netns::rename_link(rtnl, link, host_name); !renamed) {
    if (renamed.error().sys_errno() != EEXIST) {
      return renamed;
    }
    spdlog::warn("VF {} is back as {}: {}", s.vf_pci, name, renamed.error().msg());
  }
  return ok_status();
}

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
  VfConfig original = netns::settings_for(current, changes);
  // The PF reports a MAC the VF registered itself just like one it pinned; this one is the
  // VF netdev's own.
  const bool mac_was_vf_own = original.mac && *original.mac == dev.link.hwaddr;
  TRY(a.record(StepKind::kVfSettings, {{"pfPci", dev.vf->pf_pci},
                                       {"pfName", pf.name},
                                       {"sysfsRoot", a.conf().sysfs_root},
                                       {"vf", dev.vf->index},
                                       {"vfPci", dev.pci},
                                       {"original", settings_to_json(original)},
                                       {"macWasVfOwn", mac_was_vf_own}}));
  TRY(netns::set_vf(rtnl, pf, dev.vf->index, changes));
  return changes.mac ? adopt_admin_mac(a, *changes.mac) : ok_status();
}

Status restore_vf_settings(Attachment& a, const json& step) {
  TRY_ASSIGN(VfStep s, vf_step_from_json(step, "vf-settings"));
  bool mac_was_vf_own = false;
  TRY(Fields(step, "vf-settings", ErrorKind::kState)
          .boolean("macWasVfOwn", &mac_was_vf_own)
          .status());
  const VfConfig& original = s.original;
  TRY_ASSIGN(auto lock, a.store().lock(pf_lock_key(s.pf_pci)));
  TRY_ASSIGN(auto rtnl, netns::Rtnl::open());
  TRY_ASSIGN(auto found, find_pf_and_vf(rtnl, s));
  if (!found) {
    return ok_status();
  }
  // Last applied, first put back; what already has its old value is left alone.
  VfConfig wanted_back = original;
  if (mac_was_vf_own && original.mac) {
    wanted_back.mac = no_admin_mac();
  }
  bool mac_cleared = false;
  auto attributes = netns::attributes_of(original);
  for (auto it = attributes.rbegin(); it != attributes.rend(); ++it) {
    if (!netns::has_setting(found->vf, wanted_back, *it)) {
      TRY(restore_attribute(rtnl, found->pf, s.vf, original, *it, mac_was_vf_own));
      mac_cleared = mac_cleared || (*it == VfAttribute::kMac && mac_was_vf_own);
    }
  }
  return mac_cleared && !s.vf_pci.empty() ? reregister_vf_mac(a, s.vf_pci) : ok_status();
}

}  // namespace rdmanet::plugin
