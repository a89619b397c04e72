// Keeping a running pod's RDMA settings right: a RoCE v2 GID index is where the kernel put
// the GID of an address, and it moves when the pod's link flaps or its addresses are added
// again in another order (NCCL keeps the index it started with). The node agent looks at
// each live RoCE rail's GID table every round and rewrites the pod's files when the index
// of the rail's address moved or went.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "netns/netns.h"
#include "plugin/record.h"
#include "rdma/gid.h"

namespace rdmanet::agent {

// GID tables the node agent read in one round, by device and port: a shared HCA's table is
// read once a round, however many pods have a rail on it.
using GidTables = std::map<std::pair<std::string, uint32_t>, std::vector<rdma::Gid>>;

// What refresh_pod_gids changed: the rail's gidIndex before and after ({"ipv4": 3}).
struct GidChange {
  std::string device;  // "rxe0 port 1"
  nlohmann::json before;
  nlohmann::json after;
};

// For an added attachment with a RoCE device and pod files: reads the device port's GID
// table (through the pod netns in exclusive mode, where only the pod sees the device; else
// from `sysfs_root`, where a shared-mode device shows its whole table, once per round:
// `shared_tables` keeps what this round read), finds the RoCE v2
// GID of each address ADD gave the rail, and when an index moved or went, rewrites the
// rail's entry and the pod's files (PodInfoStore::refresh_gids, under the pod's lock in
// `lock_dir`). std::nullopt when nothing changed or the attachment has nothing to keep.
// Never touches the record: it keeps what ADD saw.
Expected<std::optional<GidChange>> refresh_pod_gids(const plugin::AttachmentRecord& record,
                                                    const netns::Netns& pod,
                                                    const std::string& lock_dir,
                                                    GidTables* shared_tables,
                                                    const std::string& sysfs_root = "/sys");

}  // namespace rdmanet::agent
