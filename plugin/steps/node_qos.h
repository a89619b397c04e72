// roce.dcb: PFC and DSCP->priority of the PF (the VF's PF, else the device itself, the
// macvlan parent in macvlan mode). "verify" fails ADD (102) listing every difference;
// "apply" sets what differs. Node-level, shared by every pod on the PF: nothing to undo.
#pragma once

#include "base/error.h"

namespace rdmanet::plugin {

class Attachment;

Status check_node_qos(Attachment& a);

}  // namespace rdmanet::plugin
