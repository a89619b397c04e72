#include "plugin/conf.h"

#include <cctype>

#include "base/files.h"
#include "base/json_fields.h"
#include "netns/sysfs.h"
#include "plugin/pod_files.h"

namespace rdmanet::plugin {

namespace {

enum class OnOff { kOn, kOff };
constexpr Name<OnOff> kOnOffNames[] = {{OnOff::kOn, "on"}, {OnOff::kOff, "off"}};

constexpr Name<uint16_t> kVlanProtoNames[] = {{0x8100, "802.1q"}, {0x88a8, "802.1ad"}};

enum class DcbPolicy { kVerify, kApply };
constexpr Name<DcbPolicy> kDcbPolicyNames[] = {{DcbPolicy::kVerify, "verify"},
                                               {DcbPolicy::kApply, "apply"}};

void on_off(Fields& f, const char* key, std::optional<bool>* out) {
  std::optional<OnOff> value;
  f.name(key, kOnOffNames, &value);
  if (value) {
    *out = *value == OnOff::kOn;
  }
}

std::string lower_case(const std::string& text) {
  std::string out;
  for (char c : text) {
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

// SR-IOV VF settings with sriov-cni's names and values.
Status parse_vf(Fields& f, netns::VfConfig* vf, std::string* first_key) {
  f.integer_in("vlan", 0, 4095, &vf->vlan).integer_in("vlanQoS", 0, 7, &vf->qos);
  std::string proto;
  f.string("vlanProto", &proto);
  if (!proto.empty()) {
    vf->vlan_proto = value_of(kVlanProtoNames, lower_case(proto));  // 802.1Q is common too
    if (!vf->vlan_proto) {
      f.fail(Error(ErrorKind::kUnsupportedField, "vlanProto: unsupported value \"" + proto +
                                                     "\" (use " + names_of(kVlanProtoNames) + ")"));
    }
  }
  on_off(f, "spoofchk", &vf->spoofchk);
  on_off(f, "trust", &vf->trust);
  f.name("link_state", netns::kVfLinkStateNames, &vf->link_state, ErrorKind::kUnsupportedField);
  f.integer_in("min_tx_rate", 0, 0xffffffffLL, &vf->min_tx_rate);
  f.integer_in("max_tx_rate", 0, 0xffffffffLL, &vf->max_tx_rate);
  TRY(f.status());
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

Expected<DeviceSelector> select_device(const cni::NetConf& net, Fields& f) {
  // Precedence: runtimeConfig.deviceID, deviceID, pciBusID, auxDeviceID, rdmaDevice, device,
  // hwaddr.
  if (!net.runtime.device_id.empty()) {
    return classify_id("runtimeConfig.deviceID", net.runtime.device_id);
  }
  for (const char* name :
       {"deviceID", "pciBusID", "auxDeviceID", "rdmaDevice", "device", "hwaddr"}) {
    const std::string key = name;
    std::string value;
    TRY(f.string(key, &value).status());
    if (value.empty()) {
      continue;
    }
    if (key == "device") {
      TRY(netns::check_link_name(value).with_context("device"));
      return DeviceSelector{DeviceSelector::Kind::kName, value, key};
    }
    if (key == "hwaddr") {
      TRY(netns::HwAddress::parse(value).with_context("hwaddr"));
      return DeviceSelector{DeviceSelector::Kind::kHwaddr, value, key};
    }
    if (key == "auxDeviceID") {
      return DeviceSelector{DeviceSelector::Kind::kAuxiliary, value, key};
    }
    if (key == "rdmaDevice") {
      if (value == "." || value == ".." || value.find('/') != std::string::npos ||
          value.size() > 64) {
        return f.error(key, "\"" + value + "\" is not an RDMA device name");
      }
      return DeviceSelector{DeviceSelector::Kind::kRdma, value, key};
    }
    return classify_id(key, value);
  }
  return Error(ErrorKind::kInvalidConfig,
               "no device selected: set one of runtimeConfig.deviceID, deviceID, pciBusID, "
               "auxDeviceID, rdmaDevice, device or hwaddr");
}

// roce.dcb: {"policy": "verify"|"apply", "pfc": [3], "dscpPriority": {"26": 3}}.
// "pfc" lists the priorities with PFC on; the others are off.
Status parse_dcb(const nlohmann::json& doc, PluginConf* conf) {
  Fields d(doc, "roce.dcb", ErrorKind::kInvalidConfig);
  DcbPolicy policy = DcbPolicy::kVerify;
  nlohmann::json map;
  d.name("policy", kDcbPolicyNames, &policy).object("dscpPriority", &map);
  TRY(d.status());
  conf->dcb_apply = policy == DcbPolicy::kApply;
  if (d.has("pfc")) {
    const auto& list = doc["pfc"];
    if (!list.is_array()) {
      return d.error("pfc",
                     std::string("must be a list of priorities, got ") + json_type_name(list));
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

Status parse_roce(const nlohmann::json& doc, PluginConf* conf) {
  Fields r(doc, "roce", ErrorKind::kInvalidConfig);
  std::string mode;
  nlohmann::json dcb;
  r.integer_in("tos", 0, 255, &conf->roce_cm.tos)
      .integer_in("controlTos", 0, 255, &conf->control_tos)
      .string("mode", &mode)
      .object("dcb", &dcb);
  TRY(r.status());
  if (!mode.empty()) {
    TRY_ASSIGN(conf->roce_cm.mode, rdma::parse_roce_mode(mode, "roce.mode"));
  }
  if (dcb.is_object()) {
    TRY(parse_dcb(dcb, conf));
  }
  return ok_status();
}

Status parse_rdma(Fields& f, PluginConf* conf) {
  int gid_timeout = conf->gid_timeout_ms / 1000;
  int port_timeout = conf->port_timeout_ms / 1000;
  nlohmann::json roce;
  f.name("rdmaIsolation", kRdmaIsolationNames, &conf->rdma_isolation);
  f.boolean("softRoce", &conf->soft_roce);
  f.integer_in("gidTimeout", 0, 300, &gid_timeout);    // 0: report GIDs without waiting
  f.integer_in("portTimeout", 0, 300, &port_timeout);  // 0: one look, no wait
  f.boolean("requireActive", &conf->require_active);
  f.string("configfsRoot", &conf->configfs_root).object("roce", &roce);
  TRY(f.status());
  conf->gid_timeout_ms = gid_timeout * 1000;
  conf->port_timeout_ms = port_timeout * 1000;
  if (conf->rdma_isolation == RdmaIsolation::kRequired && conf->mode == Mode::kMacvlan &&
      !conf->soft_roce) {
    return Error(ErrorKind::kRdmaIsolation,
                 "rdmaIsolation: \"required\" cannot hold in macvlan mode: the pods share the "
                 "parent's RDMA device (use mode netdev with a VF, or softRoce)");
  }
  return roce.is_object() ? parse_roce(roce, conf) : ok_status();
}

// MAC precedence: runtimeConfig.mac, CNI_ARGS MAC, then the mac key.
Status parse_mac(const cni::NetConf& net, const cni::CniArgs& args, Fields& f, PluginConf* conf) {
  std::string mac;
  std::string field = "mac";
  TRY(f.string("mac", &mac).status());
  if (!args.get("MAC").empty()) {
    mac = args.get("MAC");
    field = "CNI_ARGS MAC";
  }
  if (!net.runtime.mac.empty()) {
    mac = net.runtime.mac;
    field = "runtimeConfig.mac";
  }
  if (mac.empty()) {
    return ok_status();
  }
  TRY_ASSIGN(auto hw, netns::HwAddress::parse(mac).with_context(field));
  if (hw.bytes().size() != 6 || (hw.bytes()[0] & 1) != 0) {
    return Error(ErrorKind::kInvalidConfig,
                 field + ": \"" + mac + "\" is not a unicast Ethernet address");
  }
  conf->mac = std::move(hw);
  return ok_status();
}

// InfiniBand VF GUID (node and port alike, as ib-sriov-cni sets them): the pod's
// runtimeConfig.infinibandGUID, else args.cni.guid.
Status parse_guid(const cni::NetConf& net, PluginConf* conf) {
  std::string guid;
  std::string field;
  if (!net.runtime.infiniband_guid.empty()) {
    guid = net.runtime.infiniband_guid;
    field = "runtimeConfig.infinibandGUID";
  } else if (net.args_cni.is_object() && net.args_cni.contains("guid")) {
    field = "args.cni.guid";
    TRY(Fields(net.args_cni, "args.cni", ErrorKind::kInvalidConfig).string("guid", &guid).status());
  }
  if (field.empty()) {
    return ok_status();
  }
  TRY_ASSIGN(auto parsed, netns::parse_guid(guid, field));
  conf->vf.node_guid = parsed;
  conf->vf.port_guid = parsed;
  if (conf->vf_field.empty()) {
    conf->vf_field = field;
  }
  return ok_status();
}

}  // namespace

Expected<PluginConf> load_conf(const cni::NetConf& net, const cni::CniArgs& args) {
  PluginConf conf;
  conf.net = net;
  Fields f(net.raw, "", ErrorKind::kInvalidConfig);
  f.name("mode", kModeNames, &conf.mode, ErrorKind::kUnsupportedField);
  f.name("macvlanMode", netns::kMacvlanModeNames, &conf.macvlan_mode, ErrorKind::kUnsupportedField);
  TRY(f.status());
  TRY_ASSIGN(conf.device, select_device(net, f));
  if (f.has("mtu")) {
    int mtu = 0;
    TRY(f.integer("mtu", &mtu).status());
    if (mtu < 68 || mtu > 65535) {
      return Error(ErrorKind::kInvalidConfig,
                   "mtu: " + std::to_string(mtu) + " is outside 68..65535");
    }
    conf.mtu = static_cast<uint32_t>(mtu);
  }
  TRY(parse_mac(net, args, f, &conf));
  TRY(parse_vf(f, &conf.vf, &conf.vf_field));
  TRY(parse_guid(net, &conf));
  if (!conf.vf.empty() && conf.mode != Mode::kNetdev) {
    return Error(ErrorKind::kInvalidConfig,
                 conf.vf_field + ": VF settings need mode netdev (the VF itself is attached)");
  }
  TRY(f.boolean("multiRailSysctls", &conf.multi_rail_sysctls)
          .boolean("sourceRouting", &conf.source_routing)
          .status());
  TRY(parse_rdma(f, &conf));
  f.string("stateDir", &conf.state_dir).string("sysfsRoot", &conf.sysfs_root);
  f.string("podInfoDir", &conf.pod_info_dir);
  f.integer_in("ipamTimeout", 1, 600, &conf.ipam_timeout_seconds);
  TRY(f.status());
  TRY(check_absolute_path(conf.state_dir, "stateDir", ErrorKind::kInvalidConfig));
  if (!conf.pod_info_dir.empty()) {
    TRY(check_absolute_path(conf.pod_info_dir, "podInfoDir", ErrorKind::kInvalidConfig));
  }
  if (!conf.pod_info_dir.empty() && !args.k8s_pod_uid.empty()) {
    // Before anything is recorded: the pod files step must not be the first to find a bad
    // UID or an untrusted podInfoDir, half way through ADD.
    TRY(PodInfoStore(conf.pod_info_dir, conf.state_dir + "/locks").check(args.k8s_pod_uid));
  }
  TRY(check_absolute_path(conf.sysfs_root, "sysfsRoot", ErrorKind::kInvalidConfig));
  TRY(check_absolute_path(conf.configfs_root, "configfsRoot", ErrorKind::kInvalidConfig));
  return conf;
}

std::optional<TrafficClass> roce_traffic_class(const PluginConf& conf) {
  if (conf.roce_cm.tos) {
    return TrafficClass{*conf.roce_cm.tos, "roce.tos"};
  }
  if (!conf.dcb.pfc_enable) {
    return std::nullopt;
  }
  constexpr int kEct0 = 2;  // ECN-capable: what ECN marking (DCQCN) needs
  for (int prio = 0; prio < 8; ++prio) {
    if ((*conf.dcb.pfc_enable & (1U << prio)) == 0) {
      continue;
    }
    for (const auto& [dscp, mapped] : conf.dcb.dscp_prio) {  // in DSCP order
      if (mapped == prio) {
        return TrafficClass{(dscp << 2) | kEct0, "roce.dcb"};
      }
    }
  }
  return std::nullopt;
}

}  // namespace rdmanet::plugin
