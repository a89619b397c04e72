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

}  // namespace

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
  if (!conf.vf.empty() && conf.mode != Mode::kNetdev) {
    return Error(ErrorKind::kInvalidConfig,
                 conf.vf_field + ": VF settings need mode netdev (the VF itself is attached)");
  }

  if (auto s = f.boolean("multiRailSysctls", &conf.multi_rail_sysctls); !s) {
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
