// `<plugin> validate FILE...`: checks example and deployment configs with the
// plugin's own parser, outside the CNI protocol, so examples cannot rot.
#pragma once

#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "cni/config.h"

namespace rdmanet::cni {

// Which entries of a config the plugin should check: the plugin itself
// ("type") or an IPAM section ("ipam.type").
enum class ValidateWhat { kPluginType, kIpamType };

struct Validator {
  std::string type;  // "rdmanet" or "rdmanet-ipam"
  ValidateWhat what = ValidateWhat::kPluginType;
  std::function<Status(const NetConf&)> check;
};

// Validates each file: a single plugin config or a conflist ("plugins"), as
// libcni would hand it to the plugin (cniVersion and name injected from the
// list). Files without an entry of the validator's type fail, so a typo in a
// type cannot pass silently. Prints one line per file; returns 0 when all pass.
int validate_main(const Validator& validator, const std::vector<std::string>& files,
                  std::ostream& out);

}  // namespace rdmanet::cni
