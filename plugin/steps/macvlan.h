// macvlan mode: a child of the device (the shared parent stays in the host), created
// directly in the pod netns; the inverse deletes it.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "base/error.h"

namespace rdmanet::plugin {

class Attachment;

Status create_macvlan(Attachment& a);
Status delete_macvlan(Attachment& a, const nlohmann::json& recorded);

}  // namespace rdmanet::plugin
