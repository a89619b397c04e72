// roce.tos / roce.mode on the pod's RDMA device, after any move (a move rebuilds the device's
// rdma_cm state). Not recorded: for a device moved or created for the pod, moving it home or
// deleting it resets them; a device the pod shares is node-level like roce.dcb, and DEL leaves
// it.
#pragma once

#include "base/error.h"

namespace rdmanet::plugin {

class Attachment;

Status set_rdma_cm_defaults(Attachment& a);

}  // namespace rdmanet::plugin
