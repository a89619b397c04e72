#include "cni/plugin/conf.h"

#include <cctype>

#include "cni/json_fields.h"
#include "netns/sysfs.h"

namespace rdmanet::plugin {

namespace {

using cni::Fields;

Status on_off(const Fields& f, const char* key, std::optional<bool>* out) {
  std::string text;
  if (auto s = f.string(key, &text); !s) {
    return s;
  }
  if (text.empty()) {
    return ok_status();
  }
  if (text != "on" && text != "off") {
    return f.error(key, "must be \"on\" or \"off\", got \"" + text + "\"");
  }
  *out = text == "on";
  return ok_status();
}

Status bounded(const Fields& f, const char* key, long long max, std::optional<uint32_t>* out) {
  if (!f.has(key)) {
    return ok_status();
  }
  long long value = 0;
  if (auto s = f.integer64(key, &value); !s) {
    return s;
  }
  if (value < 0 || value > max) {
    return f.error(key, "must be 0.." + std::to_string(max) + ", got " + std::to_string(value));
  }
  *out = static_cast<uint32_t>(value);
  return ok_status();
}

// SR-IOV VF settings with sriov-cni's names and values.
Status parse_vf(const Fields& f, netns::VfConfig* vf, std::string* first_key) {
  Status s = bounded(f, "vlan", 4095, &vf->vlan);
  if (s) {
    s = bounded(f, "vlanQoS", 7, &vf->qos);
  }
  std::string proto;
  if (s) {
    s = f.string("vlanProto", &proto);
  }
  if (s && !proto.empty()) {
    std::string lower;
    for (char c : proto) {
      lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    if (lower == "802.1q") {
      vf->vlan_proto = 0x8100;
    } else if (lower == "802.1ad") {
      vf->vlan_proto = 0x88a8;
    } else {
      s = Error(ErrorKind::kUnsupportedField,
                "vlanProto: unsupported value \"" + proto + "\" (use 802.1q or 802.1ad)");
    }
  }
  if (s) {
    s = on_off(f, "spoofchk", &vf->spoofchk);
  }
  if (s) {
    s = on_off(f, "trust", &vf->trust);
  }
  std::string state;
  if (s) {
    s = f.string("link_state", &state);
  }
  if (s && !state.empty()) {
    if (state == "auto") {
      vf->link_state = netns::VfLinkState::kAuto;
    } else if (state == "enable") {
      vf->link_state = netns::VfLinkState::kEnable;
    } else if (state == "disable") {
      vf->link_state = netns::VfLinkState::kDisable;
    } else {
      s = Error(ErrorKind::kUnsupportedField,
                "link_state: unsupported value \"" + state + "\" (use auto, enable or disable)");
    }
  }
  if (s) {
    s = bounded(f, "min_tx_rate", 0xffffffffLL, &vf->min_tx_rate);
  }
  if (s) {
    s = bounded(f, "max_tx_rate", 0xffffffffLL, &vf->max_tx_rate);
  }
  if (!s) {
    return s;
  }
  if ((vf->qos || vf->vlan_proto) && !vf->vlan) {
    return f.error(vf->qos ? "vlanQoS" : "vlanProto", "needs vlan");
  }
  if (vf->min_tx_rate && vf->max_tx_rate && *vf->max_tx_rate != 0 &&
      *vf->min_tx_rate > *vf->max_tx_rate) {
    return f.error("min_tx_rate", "is above max_tx_rate");
  }
  for (const char* key : {"vlan", "vlanQoS", "vlanProto", "spoofchk", "trust", "link_state",
                          "min_tx_rate", "max_tx_rate"}) {
    if (f.has(key)) {
      *first_key = key;
      break;
    }
  }
  return ok_status();
}

Expected<DeviceSelector> classify_id(const std::string& field, const std::string& value) {
  if (netns::is_pci_address(value)) {
    return DeviceSelector{DeviceSelector::Kind::kPci, value, field};
  }
  // Auxiliary devices (SFs) are named <driver>.<type>.<n>, e.g. mlx5_core.sf.2.
  if (value.find('.') != std::string::npos && value.find('/') == std::string::npos) {
    return DeviceSelector{DeviceSelector::Kind::kAuxiliary, value, field};
  }
  return Error(ErrorKind::kInvalidConfig,
               field + ": \"" + value + "\" is neither a PCI address nor an auxiliary device id");
}

Expected<DeviceSelector> select_device(const cni::NetConf& net, const Fields& f) {
  // Precedence: runtimeConfig.deviceID, deviceID, pciBusID, auxDeviceID, device, hwaddr.
  if (!net.runtime.device_id.empty()) {
    return classify_id("runtimeConfig.deviceID", net.runtime.device_id);
  }
  for (const char* key : {"deviceID", "pciBusID", "auxDeviceID", "device", "hwaddr"}) {
    std::string value;
    if (auto s = f.string(key, &value); !s) {
      return std::move(s).error();
    }
    if (value.empty()) {
      continue;
    }
    std::string k = key;
    if (k == "device") {
      if (auto s = netns::check_link_name(value); !s) {
        return Error(ErrorKind::kInvalidConfig, "device: " + s.error().msg());
      }
      return DeviceSelector{DeviceSelector::Kind::kName, value, k};
    }
    if (k == "hwaddr") {
      if (auto hw = netns::HwAddress::parse(value); !hw) {
        return Error(ErrorKind::kInvalidConfig, "hwaddr: " + hw.error().msg());
      }
      return DeviceSelector{DeviceSelector::Kind::kHwaddr, value, k};
    }
    if (k == "auxDeviceID") {
      return DeviceSelector{DeviceSelector::Kind::kAuxiliary, value, k};
    }
    return classify_id(k, value);
  }
  return Error(ErrorKind::kInvalidConfig,
               "no device selected: set one of runtimeConfig.deviceID, deviceID, pciBusID, "
               "auxDeviceID, device or hwaddr");
}

// roce.dcb: {"policy": "verify"|"apply", "pfc": [3], "dscpPriority": {"26": 3}}.
// "pfc" lists the priorities with PFC on; the others are off.
Status parse_dcb(const nlohmann::json& doc, PluginConf* conf) {
  Fields d(doc, "roce.dcb", ErrorKind::kInvalidConfig);
  std::string policy = "verify";
  if (auto s = d.string("policy", &policy); !s) {
    return s;
  }
  if (policy != "verify" && policy != "apply") {
    return d.error("policy", "\"" + policy + "\" is not one of verify, apply");
  }
  conf->dcb_apply = policy == "apply";
  if (d.has("pfc")) {
    const auto& list = doc["pfc"];
    if (!list.is_array()) {
      return d.error("pfc",
                     std::string("must be a list of priorities, got ") + cni::json_type_name(list));
    }
    uint8_t mask = 0;
    for (const auto& p : list) {
      if (!p.is_number_integer() || p.get<int>() < 0 || p.get<int>() > 7) {
        return d.error("pfc", "priorities are 0..7, got " + p.dump());
      }
      mask = static_cast<uint8_t>(mask | (1U << p.get<int>()));
    }
    conf->dcb.pfc_enable = mask;
  }
  nlohmann::json map;
  if (auto s = d.object("dscpPriority", &map); !s) {
    return s;
  }
  for (const auto& [key, value] : map.items()) {
    int dscp = -1;
    if (!key.empty() && key.size() <= 2 && key.find_first_not_of("0123456789") == key.npos) {
      dscp = std::stoi(key);
    }
    if (dscp < 0 || dscp > 63 || !value.is_number_integer() || value.get<int>() < 0 ||
        value.get<int>() > 7) {
      return d.error("dscpPriority",
                     "wants DSCP 0..63 -> priority 0..7, got \"" + key + "\": " + value.dump());
    }
    conf->dcb.dscp_prio[static_cast<uint8_t>(dscp)] = static_cast<uint8_t>(value.get<int>());
  }
  return netns::check_dcb_config(conf->dcb);
}

Status parse_rdma(const Fields& f, PluginConf* conf) {
  std::string isolation = "auto";
  if (auto s = f.string("rdmaIsolation", &isolation); !s) {
    return s;
  }
  if (isolation == "auto") {
    conf->rdma_isolation = RdmaIsolation::kAuto;
  } else if (isolation == "required") {
    conf->rdma_isolation = RdmaIsolation::kRequired;
  } else if (isolation == "off") {
    conf->rdma_isolation = RdmaIsolation::kOff;
  } else {
    return Error(ErrorKind::kInvalidConfig,
                 "rdmaIsolation: \"" + isolation + "\" is not one of auto, required, off");
  }
  if (auto s = f.boolean("softRoce", &conf->soft_roce); !s) {
    return s;
  }
  if (conf->rdma_isolation == RdmaIsolation::kRequired && conf->mode == Mode::kMacvlan &&
      !conf->soft_roce) {
    return Error(ErrorKind::kInvalidConfig,
                 "rdmaIsolation: \"required\" cannot hold in macvlan mode: the pods share the "
                 "parent's RDMA device (use mode netdev with a VF, or softRoce)");
  }
  if (f.has("gidTimeout")) {
    int seconds = 0;
    if (auto s = f.integer("gidTimeout", &seconds); !s) {
      return s;
    }
    if (seconds < 0 || seconds > 300) {
      return Error(ErrorKind::kInvalidConfig,
                   "gidTimeout: must be 0..300 seconds (0: report GIDs without waiting)");
    }
    conf->gid_timeout_ms = seconds * 1000;
  }
  if (auto s = f.string("configfsRoot", &conf->configfs_root); !s) {
    return s;
  }
  nlohmann::json roce;
  if (auto s = f.object("roce", &roce); !s) {
    return s;
  }
  if (roce.is_object()) {
    Fields r(roce, "roce", ErrorKind::kInvalidConfig);
    if (r.has("tos")) {
      int tos = 0;
      if (auto s = r.integer("tos", &tos); !s) {
        return s;
      }
      if (tos < 0 || tos > 255) {
        return Error(ErrorKind::kInvalidConfig,
                     "roce.tos: " + std::to_string(tos) + " is outside 0..255 (DSCP << 2 | ECN)");
      }
      conf->roce_cm.tos = tos;
    }
    std::string mode;
    if (auto s = r.string("mode", &mode); !s) {
      return s;
    }
    if (!mode.empty()) {
      auto parsed = rdma::parse_roce_mode(mode, "roce.mode");
      if (!parsed) {
        return std::move(parsed).error();
      }
      conf->roce_cm.mode = *parsed;
    }
    nlohmann::json dcb;
    if (auto s = r.object("dcb", &dcb); !s) {
      return s;
    }
    if (dcb.is_object()) {
      if (auto s = parse_dcb(dcb, conf); !s) {
        return s;
      }
    }
  }
  return ok_status();
}

}  // namespace

const char* isolation_name(RdmaIsolation isolation) {
  switch (isolation) {
    case RdmaIsolation::kAuto:
      return "auto";
    case RdmaIsolation::kRequired:
      return "required";
    case RdmaIsolation::kOff:
      return "off";
  }
  return "?";
}

Expected<PluginConf> load_conf(const cni::NetConf& net, const cni::CniArgs& args) {
  PluginConf conf;
  conf.net = net;
  Fields f(net.raw, "", ErrorKind::kInvalidConfig);

  std::string mode = "netdev";
  if (auto s = f.string("mode", &mode); !s) {
    return std::move(s).error();
  }
  if (mode == "netdev") {
    conf.mode = Mode::kNetdev;
  } else if (mode == "macvlan") {
    conf.mode = Mode::kMacvlan;
  } else {
    return Error(ErrorKind::kUnsupportedField,
                 "mode: unsupported value \"" + mode + "\" (use netdev or macvlan)");
  }
  std::string macvlan_mode = "bridge";
  if (auto s = f.string("macvlanMode", &macvlan_mode); !s) {
    return std::move(s).error();
  }
  static const std::pair<const char*, netns::MacvlanMode> modes[] = {
      {"bridge", netns::MacvlanMode::kBridge},
      {"private", netns::MacvlanMode::kPrivate},
      {"vepa", netns::MacvlanMode::kVepa},
      {"passthru", netns::MacvlanMode::kPassthru}};
  bool known = false;
  for (const auto& [name, value] : modes) {
    if (macvlan_mode == name) {
      conf.macvlan_mode = value;
      known = true;
    }
  }
  if (!known) {
    return Error(ErrorKind::kUnsupportedField, "macvlanMode: unsupported value \"" + macvlan_mode +
                                                   "\" (use bridge, private, vepa or passthru)");
  }

  auto device = select_device(net, f);
  if (!device) {
    return std::move(device).error();
  }
  conf.device = std::move(*device);

  if (f.has("mtu")) {
    int mtu = 0;
    if (auto s = f.integer("mtu", &mtu); !s) {
      return std::move(s).error();
    }
    if (mtu < 68 || mtu > 65535) {
      return Error(ErrorKind::kInvalidConfig,
                   "mtu: " + std::to_string(mtu) + " is outside 68..65535");
    }
    conf.mtu = static_cast<uint32_t>(mtu);
  }

  // MAC precedence: runtimeConfig.mac, CNI_ARGS MAC, then the mac key.
  std::string mac;
  std::string mac_field = "mac";
  if (auto s = f.string("mac", &mac); !s) {
    return std::move(s).error();
  }
  if (!args.get("MAC").empty()) {
    mac = args.get("MAC");
    mac_field = "CNI_ARGS MAC";
  }
  if (!net.runtime.mac.empty()) {
    mac = net.runtime.mac;
    mac_field = "runtimeConfig.mac";
  }
  if (!mac.empty()) {
    auto hw = netns::HwAddress::parse(mac);
    if (!hw) {
      return Error(ErrorKind::kInvalidConfig, mac_field + ": " + hw.error().msg());
    }
    if (hw->bytes().size() != 6 || (hw->bytes()[0] & 1) != 0) {
      return Error(ErrorKind::kInvalidConfig,
                   mac_field + ": \"" + mac + "\" is not a unicast Ethernet address");
    }
    conf.mac = std::move(*hw);
  }

  if (auto s = parse_vf(f, &conf.vf, &conf.vf_field); !s) {
    return std::move(s).error();
  }
  // InfiniBand VF GUID (node and port alike, as ib-sriov-cni sets them): the pod's
  // runtimeConfig.infinibandGUID, else args.cni.guid.
  std::string guid;
  std::string guid_field;
  if (!net.runtime.infiniband_guid.empty()) {
    guid = net.runtime.infiniband_guid;
    guid_field = "runtimeConfig.infinibandGUID";
  } else if (net.args_cni.is_object() && net.args_cni.contains("guid")) {
    guid_field = "args.cni.guid";
    if (!net.args_cni["guid"].is_string()) {
      return Error(ErrorKind::kInvalidConfig,
                   "args.cni.guid must be a string, got " +
                       std::string(cni::json_type_name(net.args_cni["guid"])));
    }
    guid = net.args_cni["guid"].get<std::string>();
  }
  if (!guid_field.empty()) {
    auto parsed = netns::parse_guid(guid, guid_field);
    if (!parsed) {
      return std::move(parsed).error();
    }
    conf.vf.node_guid = *parsed;
    conf.vf.port_guid = *parsed;
    if (conf.vf_field.empty()) {
      conf.vf_field = guid_field;
    }
  }
  if (!conf.vf.empty() && conf.mode != Mode::kNetdev) {
    return Error(ErrorKind::kInvalidConfig,
                 conf.vf_field + ": VF settings need mode netdev (the VF itself is attached)");
  }

  if (auto s = f.boolean("multiRailSysctls", &conf.multi_rail_sysctls); !s) {
    return std::move(s).error();
  }
  if (auto s = parse_rdma(f, &conf); !s) {
    return std::move(s).error();
  }
  if (auto s = f.string("stateDir", &conf.state_dir); !s) {
    return std::move(s).error();
  }
  if (conf.state_dir.empty() || conf.state_dir[0] != '/') {
    return Error(ErrorKind::kInvalidConfig,
                 "stateDir: \"" + conf.state_dir + "\" must be an absolute path");
  }
  if (auto s = f.string("sysfsRoot", &conf.sysfs_root); !s) {
    return std::move(s).error();
  }
  if (auto s = f.integer("ipamTimeout", &conf.ipam_timeout_seconds); !s) {
    return std::move(s).error();
  }
  if (conf.ipam_timeout_seconds < 1 || conf.ipam_timeout_seconds > 600) {
    return Error(ErrorKind::kInvalidConfig, "ipamTimeout: must be 1..600 seconds");
  }
  return conf;
}

}  // namespace rdmanet::plugin
