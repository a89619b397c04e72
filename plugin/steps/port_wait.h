// Waits (portTimeout) until the rail is usable: the pod interface has carrier and the RDMA
// port the pod uses is ACTIVE. A NIC moved into a pod renegotiates its link (the kernel
// closes a device that changes netns), and NCCL skips ports that are not ACTIVE when it
// scans its devices, so a workload started at once would go without the rail. Only looks;
// what it saw goes to the pod's files (Attachment::rail_link).
#pragma once

#include "base/error.h"

namespace rdmanet::plugin {

class Attachment;

// Driven by the kernel's link notifications in the pod netns (netns::LinkWatch). The RDMA
// port's state is asked (one request) when the link has carrier; RDMA netlink sends no
// notification of port state, so while carrier is on and the port not yet ACTIVE (an
// InfiniBand port waiting for its subnet manager) it is asked again at growing intervals
// (10 ms to 0.5 s). On timeout the rail is reported down and ADD goes on, or with
// requireActive fails with kPortNotActive (108) naming the interface and the port's state.
// A look that fails (the port cannot be asked) is reported as an unknown state, never an
// error of its own; a pod interface that vanished is.
//
// Tested: carrier against real veths (plugin/plugin_rail_link_test.cc); the RDMA port on
// soft-RoCE in the kernel lab (tests/lab/scenarios/two-node.sh). Not run anywhere: a port
// with carrier that is not yet ACTIVE (rxe follows carrier at once), so the retries above
// have no test of their own.
Status wait_for_port(Attachment& a);

}  // namespace rdmanet::plugin
