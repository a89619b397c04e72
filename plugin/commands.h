// rdmanet's CNI commands. ADD runs its steps (plugin/steps/table.h); DEL, GC and the rollback
// of a failed ADD undo the steps an attachment recorded (plugin/attachment.h), so they are
// the same code.
#pragma once

#include <span>

#include "cni/skel.h"

namespace rdmanet::plugin {

// The IPAM plugins the binary links, handed in by its main: a network whose IPAM type names
// one of them runs it in process; any other IPAM type is exec'd from CNI_PATH.
using LinkedIpam = std::span<const cni::Plugin* const>;

Expected<cni::Result> cmd_add(const cni::Call& call, LinkedIpam ipam);
Status cmd_del(const cni::Call& call, LinkedIpam ipam);
Status cmd_check(const cni::Call& call, LinkedIpam ipam);
Status cmd_status(const cni::Call& call, LinkedIpam ipam);
Status cmd_gc(const cni::Call& call, LinkedIpam ipam);

// The plugin "rdmanet", its commands running `ipam` in process (which must outlive it).
cni::Plugin cni_plugin(LinkedIpam ipam);

}  // namespace rdmanet::plugin
