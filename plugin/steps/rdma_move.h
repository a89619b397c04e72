// The netdev's RDMA device into the pod netns (exclusive mode): an InfiniBand device before
// its netdev (moving it recreates the IPoIB netdev where it leaves; the netdev is then found
// again), a RoCE device after. The inverse sends it home from inside the pod netns. Every move
// holds the node-wide RDMA lock: device names can reshuffle under parallel moves.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "base/error.h"
#include "netns/netns.h"

namespace rdmanet::plugin {

class Attachment;
struct AttachmentRecord;

// InfiniBand: before the netdev moves.
Status move_ib_device_in(Attachment& a);
// RoCE: after the netdev moved (or the macvlan child or soft-RoCE device was made).
Status move_roce_device_in(Attachment& a);
Status move_rdma_device_home(Attachment& a, const nlohmann::json& recorded);

// CHECK: the RDMA device ADD moved into the pod or created for it is still visible there.
Status check_rdma_device(const AttachmentRecord& record, const netns::Netns& pod);

// The node-wide lock every RDMA device move holds (lock order: device -> pf -> this one).
inline constexpr const char* kRdmaLockKey = "rdma-netns";

}  // namespace rdmanet::plugin
