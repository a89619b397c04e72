// softRoce: an rxe device on the pod interface, created from inside the pod netns (the kernel
// registers it in the initial netns; exclusive mode then moves it in). The inverse deletes it
// wherever it is.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "base/error.h"

namespace rdmanet::plugin {

class Attachment;
struct AttachmentId;

Status create_soft_roce(Attachment& a);
Status delete_soft_roce(Attachment& a, const nlohmann::json& recorded);

// The soft-RoCE device name of an attachment: "rxe" and 12 hex digits of a hash of (network,
// container, ifname), 15 characters: what every consumer takes (UCX keeps an RDMA device's
// name in 16 bytes, UCT_MD_NAME_MAX, and cannot open a longer one; NCCL's limit is 63).
std::string soft_roce_name(const AttachmentId& id);
// The name rdmanet 0.1 gave: "rxe_<ifname>_<8 hex digits>", up to 28 characters. Records
// written before an upgrade still name it; DEL, GC and the node agent delete it by them.
std::string legacy_soft_roce_name(const AttachmentId& id);
// Whether `device` is a name ADD gives this attachment's soft-RoCE device (either form).
bool is_soft_roce_name_of(const std::string& device, const AttachmentId& id);

}  // namespace rdmanet::plugin
