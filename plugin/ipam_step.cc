// The IPAM plugin's ADD, and its DEL as the inverse.
#include <spdlog/spdlog.h>

#include "cni/delegate.h"
#include "cni/error_code.h"
#include "ipam/commands.h"
#include "plugin/steps.h"

namespace rdmanet::plugin {

namespace {

// Errors that say the IPAM plugin cannot hold anything for this config: it is not
// installed, or it rejects the config itself.
bool permanent_config_error(const Error& error) {
  if (error.kind() == ErrorKind::kPluginNotFound) {
    return true;
  }
  return cni::rejects_the_config(error);
}

}  // namespace

cni::DelegateOptions ipam_options(int seconds) {
  // rdmanet-ipam runs in this process (ipam/commands.h): one exec less per call. Any other
  // IPAM plugin is exec'd, killed after `seconds`.
  return cni::DelegateOptions{std::chrono::milliseconds(seconds * 1000LL), &ipam::cni_plugin()};
}

Expected<cni::Result> ipam_add(Attachment& a) {
  const cni::NetConf& net = a.conf().net;
  if (net.ipam_type.empty()) {
    return cni::Result();
  }
  TRY(a.record(StepKind::kIpam, nlohmann::json::object()));
  return cni::delegate_add(net.ipam_type, a.env(), a.rec().config, net.cni_version,
                           ipam_options(a.ipam_timeout_seconds()));
}

Status ipam_release(Attachment& a, const nlohmann::json& /*step*/) {
  // The config ADD used, not DEL's: a NAD may have changed since.
  auto conf = cni::parse_netconf(a.rec().config);
  if (!conf || conf->ipam_type.empty()) {
    return ok_status();
  }
  return ipam_del(conf->ipam_type, a.env(), a.rec().config, a.ipam_timeout_seconds());
}

Status ipam_del(const std::string& type, const cni::Environment& env, const std::string& config,
                int timeout_seconds) {
  auto s =
      cni::delegate_command(type, cni::Command::kDel, env, config, ipam_options(timeout_seconds));
  if (!s && permanent_config_error(s.error())) {
    // The IPAM plugin is not installed or rejects this config outright, so it cannot hold
    // an address for it either; failing would only loop DEL forever.
    spdlog::warn("IPAM DEL cannot hold anything for this config: {}", s.error().msg());
    return ok_status();
  }
  return s;
}

}  // namespace rdmanet::plugin
