// rdmanet's CNI commands. Each reads as a list of steps; every step that
// changes the node has its inverse in teardown(), which serves both the
// rollback of a failed ADD and DEL.
#pragma once

#include "cni/skel.h"

namespace rdmanet::plugin {

Expected<cni::Result> cmd_add(const cni::Call& call);
Status cmd_del(const cni::Call& call);
Status cmd_check(const cni::Call& call);
Status cmd_status(const cni::Call& call);
Status cmd_gc(const cni::Call& call);

}  // namespace rdmanet::plugin
