// SR-IOV: the VF attributes the config sets (sriov-cni's keys) and the VF does not have yet,
// through the PF, under the PF's lock, one request each. After the move, so that DEL resets
// them through the PF before the netdev comes home (as sriov-cni does): igb refuses a VF's own
// MAC while the PF holds an admin MAC for it. A VF whose driver takes an admin MAC only when it
// resets (igbvf) is reset (up, down) in the pod so it has the MAC before it is configured.
// The inverse puts back, attribute by attribute and last first, those that differ; a MAC that
// was the VF's own (not one the PF pinned) is given back by clearing the admin MAC, so the VF
// is not left pinned.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "base/error.h"

namespace rdmanet::plugin {

class Attachment;

Status apply_vf_settings(Attachment& a);
Status restore_vf_settings(Attachment& a, const nlohmann::json& recorded);

}  // namespace rdmanet::plugin
