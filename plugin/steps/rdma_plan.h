// Which RDMA device belongs to the attached netdev and whether it moves into the pod netns,
// decided in the host netns before anything changes (Attachment::rdma(), the RdmaPlan).
#pragma once

#include "base/error.h"

namespace rdmanet::plugin {

class Attachment;

// Errors: rdmaIsolation "required" that the node cannot give (105, naming the mode and how to
// change it), softRoce without an RDMA subsystem (102). Without an RDMA subsystem or device,
// and none asked for, the attachment goes on without RDMA.
Status plan_rdma(Attachment& a);

}  // namespace rdmanet::plugin
