#include "plugin/steps/ipam.h"

#include <spdlog/spdlog.h>

#include "cni/error_code.h"
#include "cni/skel.h"
#include "plugin/attachment.h"

namespace rdmanet::plugin {

namespace {

// What the ipam step records: nothing (its inverse reads the config ADD used from the record).
struct IpamRecord {
  static constexpr StepKind kKind = StepKind::kIpam;
  nlohmann::json to_json() const { return nlohmann::json::object(); }
};

// Errors that say the IPAM plugin cannot hold anything for this config: it is not
// installed, or it rejects the config itself.
bool permanent_config_error(const Error& error) {
  if (error.kind() == ErrorKind::kPluginNotFound) {
    return true;
  }
  return cni::rejects_the_config(error);
}

}  // namespace

cni::DelegateOptions IpamPlugins::options(const std::string& type) const {
  cni::DelegateOptions options{std::chrono::milliseconds(timeout_seconds * 1000LL)};
  for (const cni::Plugin* plugin : linked) {
    if (plugin->name == type) {
      options.in_process = plugin;
    }
  }
  return options;
}

Status ipam_add(Attachment& a) {
  const cni::NetConf& net = a.conf().net;
  if (net.ipam_type.empty()) {
    return ok_status();
  }
  TRY(a.record(IpamRecord{}));
  TRY_ASSIGN(a.ipam_result(), cni::delegate_add(net.ipam_type, a.env(), a.rec().config,
                                                net.cni_version, a.ipam().options(net.ipam_type)));
  return ok_status();
}

Status ipam_release(Attachment& a, const nlohmann::json& /*recorded*/) {
  auto conf = cni::parse_netconf(a.rec().config);
  if (!conf || conf->ipam_type.empty()) {
    return ok_status();
  }
  return ipam_del(a.ipam(), conf->ipam_type, a.env(), a.rec().config);
}

Status ipam_del(const IpamPlugins& ipam, const std::string& type, const cni::Environment& env,
                const std::string& config) {
  auto s = cni::delegate_command(type, cni::Command::kDel, env, config, ipam.options(type));
  if (!s && permanent_config_error(s.error())) {
    // The IPAM plugin is not installed or rejects this config outright, so it cannot hold
    // an address for it either; failing would only loop DEL forever.
    spdlog::warn("IPAM DEL cannot hold anything for this config: {}", s.error().msg());
    return ok_status();
  }
  return s;
}

}  // namespace rdmanet::plugin
