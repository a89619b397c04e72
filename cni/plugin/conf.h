// rdmanet's own configuration keys, on top of the shared NetConf.
#pragma once

#include <optional>
#include <string>

#include "cni/config.h"
#include "cni/env.h"
#include "netns/hw_address.h"
#include "netns/link.h"
#include "netns/vf.h"

namespace rdmanet::plugin {

enum class Mode { kNetdev, kMacvlan };

// How the device was named in the config, in the documented precedence.
struct DeviceSelector {
  enum class Kind { kPci, kAuxiliary, kName, kHwaddr } kind = Kind::kName;
  std::string value;
  std::string field;  // the config key it came from, for messages
  std::string str() const { return field + "=" + value; }
};

struct PluginConf {
  cni::NetConf net;
  Mode mode = Mode::kNetdev;
  netns::MacvlanMode macvlan_mode = netns::MacvlanMode::kBridge;
  DeviceSelector device;
  std::optional<uint32_t> mtu;
  std::optional<netns::HwAddress> mac;  // mac, runtimeConfig.mac or CNI_ARGS MAC
  netns::VfConfig vf;                   // SR-IOV settings applied through the PF (sriov-cni's keys)
  std::string vf_field;                 // the first VF key set, for messages
  bool multi_rail_sysctls = true;
  std::string state_dir = "/var/lib/cni/rdmanet";
  std::string sysfs_root = "/sys";
  int ipam_timeout_seconds = 60;
};

// Reads rdmanet's keys from the config; errors name the field (code 7, or 2
// for a value rdmanet does not support).
Expected<PluginConf> load_conf(const cni::NetConf& net, const cni::CniArgs& args);

}  // namespace rdmanet::plugin
