// rdmanet-ipam's CNI commands (ADD, DEL, CHECK, GC, STATUS): run by its own binary
// (ipam/main.cc), and by rdmanet in process when a network's IPAM type is rdmanet-ipam
// (plugin/steps/ipam.h, handed in by agent/main.cc), so that one ADD is one exec. Both ways run
// this code on the same store under the same lock, and answer alike.
#pragma once

#include <memory>

#include "base/error.h"
#include "cni/skel.h"
#include "ipam/allocator.h"
#include "ipam/cluster.h"
#include "ipam/etcd.h"

namespace rdmanet::ipam {

// The plugin, named "rdmanet-ipam".
const cni::Plugin& cni_plugin();

EtcdClient etcd_client_for(const ClusterConfig& c);

// The allocator of the call's network; in cluster mode with the node's blocks
// and their etcd client (which must outlive it, hence one object).
struct Network {
  std::unique_ptr<EtcdClient> etcd;
  std::unique_ptr<ClusterBlocks> blocks;
  std::unique_ptr<Allocator> allocator;
  Allocator* operator->() const { return allocator.get(); }
};

// `adding`: only ADD needs the node's name and its block list (to allocate
// inside its blocks). DEL, CHECK and GC without them (node name file missing,
// blocks.json damaged) still release and check leases, as in node mode, so
// cluster metadata never makes a DEL fail; blocks emptied meanwhile are
// released by a later DEL or GC.
Expected<Network> allocator_for(const cni::Call& call, bool adding = false);

}  // namespace rdmanet::ipam
