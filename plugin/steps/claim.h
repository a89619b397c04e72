// Who has the device, before ADD changes anything: an earlier ADD of this very attachment,
// another pod's hold (refused while that pod lives, reclaimed once its netns is gone); then
// the device resolved, and held for this attachment (netdev mode: a macvlan parent is
// shared by design, so nothing holds it).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "base/error.h"

namespace rdmanet::plugin {

class Attachment;

// An earlier ADD of this very attachment (crashed, or repeated without DEL) is undone first,
// so its device and addresses are not leaked.
Status undo_earlier_add(Attachment& a);
// netdev mode: refuses (101) a device another pod holds while that pod's netns lives; a holder
// whose netns is gone (missed DEL, node reboot) is undone and the device reclaimed.
Status claim_device(Attachment& a);
// Resolves the config's device selector in the host netns.
Status find_host_device(Attachment& a);

// netdev mode: the device's hold file names this attachment, so a second pod is refused.
Status hold_device(Attachment& a);
Status release_hold(Attachment& a, const nlohmann::json& recorded);

}  // namespace rdmanet::plugin
