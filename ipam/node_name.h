// The name of the node cluster mode claims blocks for: written by the rdmanet
// DaemonSet from NODE_NAME (downward API spec.nodeName), never guessed from the
// hostname, which need not be the Kubernetes node name.
#pragma once

#include <string>

#include "base/error.h"

namespace rdmanet::ipam {

// The node name in `file`, trailing newline and blanks removed. kTryAgainLater
// when it cannot be read (the DaemonSet has not written it yet), kInvalidConfig
// when it is not a Kubernetes node name; both name the file.
Expected<std::string> read_node_name(const std::string& file);

}  // namespace rdmanet::ipam
