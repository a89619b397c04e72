// ADD's steps on the node: VF settings through the PF, moving the device or
// creating the macvlan child, IPAM, and the pod-side configuration. Their
// inverses live in teardown.h.
#pragma once

#include "cni/delegate.h"
#include "cni/skel.h"
#include "netns/netns.h"
#include "netns/rtnl.h"
#include "plugin/conf.h"
#include "plugin/device.h"
#include "plugin/state.h"

namespace rdmanet::plugin {

cni::DelegateOptions ipam_options(int seconds);

// SR-IOV: records the VF's settings in the state, then applies the config's
// through the PF, under the PF's lock. Nothing to do for other devices.
Status configure_vf(StateStore& store, const PluginConf& conf, const HostDevice& dev,
                    netns::Rtnl& host_rtnl, AttachmentState* state);

// Attaches dev to the pod (netdev or macvlan), runs IPAM, configures the pod
// interface and builds the result. On error the caller runs teardown().
Expected<cni::Result> attach(const PluginConf& conf, const cni::Call& call, const netns::Netns& pod,
                             const HostDevice& dev, netns::Rtnl& host_rtnl);

}  // namespace rdmanet::plugin
