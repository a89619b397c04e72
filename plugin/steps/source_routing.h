// sourceRouting (default on): the pod interface gets a routing table of its own (its
// addresses' subnets and the IPAM routes, through it) and a "from <address>" rule per
// address, so a pod with several rails sends what each rail's address sources out of that
// rail, and the peer's replies come back on it, also when the rails share a subnet. The
// table's routes go with the interface; the inverse deletes the rules.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "base/error.h"

namespace rdmanet::plugin {

class Attachment;

Status add_source_routing(Attachment& a);
Status remove_source_routing(Attachment& a, const nlohmann::json& recorded);

}  // namespace rdmanet::plugin
