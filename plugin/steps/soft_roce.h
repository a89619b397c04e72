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

// The soft-RoCE device name of an attachment: "rxe_<ifname>_<8 hex digits>", unique per
// (network, container, ifname), only [A-Za-z0-9_-].
std::string soft_roce_name(const AttachmentId& id);

}  // namespace rdmanet::plugin
