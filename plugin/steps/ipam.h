// The IPAM plugin's ADD, and its DEL as the inverse. rdmanet knows no IPAM implementation:
// the binary's main hands in the IPAM plugins it links (rdmanet-ipam), which then run in
// process; any other IPAM type is exec'd from CNI_PATH as the spec says.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string>

#include "base/error.h"
#include "cni/delegate.h"
#include "cni/env.h"

namespace rdmanet::cni {
struct Plugin;
}

namespace rdmanet::plugin {

class Attachment;

// How rdmanet runs a network's IPAM plugin.
struct IpamPlugins {
  // Linked into this binary: a type named like one of them runs in process (the same
  // handlers, result and errors, one exec less per call).
  std::span<const cni::Plugin* const> linked;
  // Any other is exec'd, and killed after this long (error 11).
  int timeout_seconds = 60;

  cni::DelegateOptions options(const std::string& type) const;
};

// ADD: the result goes to Attachment::ipam_result() for the steps after it.
Status ipam_add(Attachment& a);
// The DEL of the IPAM plugin ADD used, with the config ADD used (a NAD may change meanwhile).
Status ipam_release(Attachment& a, const nlohmann::json& recorded);

// IPAM DEL through the delegated plugin. An IPAM plugin that is not installed, or that
// rejects the config itself, cannot hold anything for it: a warning, not an error (a
// failing DEL is retried forever and keeps the pod Terminating).
Status ipam_del(const IpamPlugins& ipam, const std::string& type, const cni::Environment& env,
                const std::string& config);

}  // namespace rdmanet::plugin
