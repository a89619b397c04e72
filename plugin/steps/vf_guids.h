// InfiniBand VFs: runtimeConfig.infinibandGUID (or args.cni.guid) as node and port GUID,
// through the PF, under the PF's lock; then the VF is rebound to its driver, which takes
// GUIDs only when it probes the VF (mlx5, as ib-sriov-cni does), and the device and its RDMA
// plan are found again (the netdev and RDMA device are made anew). The inverse gives the GUIDs
// back (all-ones, "no GUID", where the PF reported none), rebinds, and names the netdev as it
// was. Before the moves: a rebind recreates the netdev in the host.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "base/error.h"

namespace rdmanet::plugin {

class Attachment;

Status set_vf_guids(Attachment& a);
Status reset_vf_guids(Attachment& a, const nlohmann::json& recorded);

}  // namespace rdmanet::plugin
