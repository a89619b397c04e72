// Waits (gidTimeout) for the RoCE v2 GIDs of the IPAM addresses, as the pod sees the GID
// table, and reports them in the record's RDMA report. Only looks.
#pragma once

#include "base/error.h"

namespace rdmanet::plugin {

class Attachment;

Status wait_for_gids(Attachment& a);

}  // namespace rdmanet::plugin
