#include "plugin/steps/vf.h"

#include <spdlog/spdlog.h>

#include <tuple>

#include "base/files.h"
#include "base/json_fields.h"
#include "netns/sysfs.h"

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

}  // namespace

json VfRecord::to_json() const {
  return {{"pfPci", pf_pci}, {"pfName", pf_name}, {"sysfsRoot", sysfs_root},
          {"vf", vf},        {"vfPci", vf_pci},   {"original", settings_to_json(original)}};
}

Expected<VfRecord> VfRecord::from_json(const json& doc, const std::string& step) {
  VfRecord r;
  json original_doc;
  Fields f(doc, step, ErrorKind::kState);
  f.required_string("pfPci", &r.pf_pci).string("pfName", &r.pf_name).string("vfPci", &r.vf_pci);
  f.string("sysfsRoot", &r.sysfs_root).integer_in("vf", 0, 0xffff, &r.vf);
  f.object("original", &original_doc);
  TRY(f.status());
  for (auto [field, value] : {std::pair{"pfPci", &r.pf_pci}, std::pair{"vfPci", &r.vf_pci}}) {
    if (!value->empty() && !netns::is_pci_address(*value)) {
      return Error(ErrorKind::kState,
                   step + "." + field + " " + in_quotes(*value) + " is not a PCI address");
    }
  }
  TRY(check_absolute_path(r.sysfs_root, step + ".sysfsRoot", ErrorKind::kState));
  TRY_ASSIGN(r.original, settings_from_json(original_doc, step + ".original"));
  return r;
}

std::string pf_lock_key(const std::string& pf_pci) { return "pf-" + pf_pci; }

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

Expected<std::optional<PfAndVf>> find_pf_and_vf(netns::Rtnl& rtnl, const VfRecord& r) {
  std::string pf_name = r.pf_name;
  if (auto current = netns::Sysfs(r.sysfs_root).pci_netdev(r.pf_pci); current) {
    pf_name = *current;
  }
  auto pf = netns::find_link_by_name(rtnl, pf_name);
  if (!pf && pf.error().kind() == ErrorKind::kDeviceNotFound) {
    spdlog::warn("PF {} ({}) is gone; VF {} settings not restored", pf_name, r.pf_pci, r.vf);
    return std::optional<PfAndVf>();
  }
  if (!pf) {
    return std::move(pf).error();  // could not look: not "gone"
  }
  auto current = netns::read_vf(rtnl, pf->index, pf->name, r.vf);
  if (!current && current.error().kind() == ErrorKind::kDeviceNotFound) {
    spdlog::warn("{}; its settings are gone with it", current.error().msg());
    return std::optional<PfAndVf>();
  }
  if (!current) {
    return std::move(current).error();
  }
  return std::optional<PfAndVf>(PfAndVf{std::move(*pf), std::move(*current)});
}

}  // namespace rdmanet::plugin
