// SR-IOV VF settings through the PF, and putting them back.
#include <spdlog/spdlog.h>

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
// the VF keeps it across driver resets).
VfConfig wanted_settings(const PluginConf& conf, const HostDevice& dev) {
  VfConfig cfg = conf.vf;
  if (conf.mac && dev.vf) {
    cfg.mac = conf.mac;
  }
  return cfg;
}

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
  std::string pf_pci;
  std::string pf_name;
  std::string sysfs_root = "/sys";
  std::string vf_pci;
  int vf = 0;
  bool mac_was_vf_own = false;
  json original_doc;
  Fields f(step, "vf-settings", ErrorKind::kState);
  f.required_string("pfPci", &pf_pci).string("pfName", &pf_name).string("vfPci", &vf_pci);
  f.string("sysfsRoot", &sysfs_root).integer_in("vf", 0, 0xffff, &vf);
  f.object("original", &original_doc).boolean("macWasVfOwn", &mac_was_vf_own);
  TRY(f.status());
  for (auto [field, value] : {std::pair{"pfPci", &pf_pci}, std::pair{"vfPci", &vf_pci}}) {
    if (!value->empty() && !netns::is_pci_address(*value)) {
      return Error(ErrorKind::kState, std::string("vf-settings.") + field + " " +
                                          in_quotes(*value) + " is not a PCI address");
    }
  }
  TRY(check_absolute_path(sysfs_root, "vf-settings.sysfsRoot", ErrorKind::kState));
  TRY_ASSIGN(auto original, settings_from_json(original_doc, "vf-settings.original"));
  TRY_ASSIGN(auto lock, a.store().lock(pf_lock_key(pf_pci)));
  // The PF's name is resolved again from its PCI address: names change across reboots.
  if (auto current = netns::Sysfs(sysfs_root).pci_netdev(pf_pci); current) {
    pf_name = *current;
  }
  TRY_ASSIGN(auto rtnl, netns::Rtnl::open());
  auto pf = netns::find_link_by_name(rtnl, pf_name);
  if (!pf) {
    spdlog::warn("PF {} ({}) is gone; VF {} settings not restored", pf_name, pf_pci, vf);
    return ok_status();
  }
  auto current = netns::read_vf(rtnl, pf->index, pf->name, vf);
  if (!current && current.error().kind() == ErrorKind::kDeviceNotFound) {
    spdlog::warn("{}; its settings are gone with it", current.error().msg());
    return ok_status();
  }
  if (!current) {
    return std::move(current).error();
  }
  // Last applied, first put back; what already has its old value is left alone.
  VfConfig wanted_back = original;
  if (mac_was_vf_own && original.mac) {
    wanted_back.mac = no_admin_mac();
  }
  bool mac_cleared = false;
  auto attributes = netns::attributes_of(original);
  for (auto it = attributes.rbegin(); it != attributes.rend(); ++it) {
    if (!netns::has_setting(*current, wanted_back, *it)) {
      TRY(restore_attribute(rtnl, *pf, vf, original, *it, mac_was_vf_own));
      mac_cleared = mac_cleared || (*it == VfAttribute::kMac && mac_was_vf_own);
    }
  }
  return mac_cleared && !vf_pci.empty() ? reregister_vf_mac(a, vf_pci) : ok_status();
}

}  // namespace rdmanet::plugin
