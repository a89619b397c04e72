// The inverse of every ADD step. teardown() serves both the rollback of a
// failed ADD and DEL, so the two cannot drift apart; every step tolerates
// finding its work already undone.
#pragma once

#include <string>

#include "cni/env.h"
#include "plugin/state.h"

namespace rdmanet::plugin {

// Undoes whatever of an attachment exists; safe to repeat. Keeps the state
// when something could not be undone, so the next DEL tries again.
Status teardown(StateStore& store, const AttachmentState& state, const cni::Environment& env,
                int ipam_timeout);

// IPAM DEL through the delegated plugin. An IPAM plugin that is not installed,
// or that rejects the config itself, cannot hold anything for it: a warning,
// not an error (a failing DEL is retried forever and keeps the pod Terminating).
Status ipam_del(const std::string& type, const cni::Environment& env, const std::string& config,
                int timeout);

// Makes sure no live attachment holds the device `key`: busy (101) while the
// holder's pod netns lives; a holder whose netns is gone (missed DEL, node
// reboot) is torn down and the device reclaimed.
// *reclaimed says whether a holder was torn down.
Status claim_device(StateStore& store, const std::string& key, const AttachmentState& me,
                    const cni::Environment& env, int ipam_timeout, bool* reclaimed = nullptr);

}  // namespace rdmanet::plugin
