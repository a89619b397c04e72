// rdmanet's CNI commands. ADD reads top to bottom as its list of steps (plugin/steps.h);
// DEL, GC and the rollback of a failed ADD undo the steps an attachment recorded
// (plugin/attachment.h), so they are the same code.
#pragma once

#include "cni/skel.h"

namespace rdmanet::plugin {

Expected<cni::Result> cmd_add(const cni::Call& call);
Status cmd_del(const cni::Call& call);
Status cmd_check(const cni::Call& call);
Status cmd_status(const cni::Call& call);
Status cmd_gc(const cni::Call& call);

}  // namespace rdmanet::plugin
