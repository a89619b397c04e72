// Reading sysfs as a process inside another network namespace sees it. sysfs shows the
// netdevs (and, in exclusive RDMA mode, the RDMA devices) of the netns that MOUNTED it, not
// of the reader's netns, so joining the pod's netns is not enough: the reader also needs a
// sysfs mounted from there. in_netns_sysfs() does that in a short-lived child process with
// its own mount namespace, leaving the plugin's own mounts untouched.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "base/error.h"
#include "netns/netns.h"

namespace rdmanet::netns {

// Runs fn in a child process that has joined ns and mounted a fresh sysfs over /sys in a
// private mount namespace; returns what fn returned (text or error). The child is killed
// when it has not answered within `timeout` (kInternal naming ns), and when the caller
// dies; it keeps only stdio open. The caller must be single-threaded (fork).
Expected<std::string> in_netns_sysfs(const Netns& ns,
                                     const std::function<Expected<std::string>()>& fn,
                                     std::chrono::milliseconds timeout);

}  // namespace rdmanet::netns
