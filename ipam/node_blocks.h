// The blocks a node holds in a cluster-mode network, as it records them in its
// store: <dataDir>/<network>/blocks.json, replaced atomically under the store's
// lock. etcd says which node owns a block; this list says which blocks the node
// allocates from (see cluster.h for why the two are written in that order).
//
//   {"node": "n1",
//    "blocks":    [{"block": "10.1.0.64/26", "revision": 12, "emptySince": 1700000000}],
//    "releasing": [{"block": "10.1.0.0/26", "revision": 9}]}
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "ipam/ip.h"

namespace rdmanet::ipam {

inline constexpr const char* kBlocksFile = "blocks.json";

// A block the node holds.
struct HeldBlock {
  Prefix block;
  int64_t revision = 0;                // etcd mod_revision of the claim: a release compares it
  std::optional<int64_t> empty_since;  // unix seconds; set by the DEL that emptied it
};

struct NodeBlocks {
  std::vector<HeldBlock> held;  // allocated from
  // Unlisted for release, their etcd delete sent but not known to have happened: GC
  // retries it, and a claim that finds one still the node's in etcd takes it back.
  std::vector<HeldBlock> releasing;

  bool holds(const Prefix& block) const;
};

// blocks.json of `node`, and back. Parsing refuses (kState, naming `path`) what is
// not such a file, and a file of another node: a store must not move between nodes.
std::string format_node_blocks(const NodeBlocks& blocks, const std::string& node);
Expected<NodeBlocks> parse_node_blocks(const std::string& text, const std::string& node,
                                       const std::string& path);

// <store_dir>/blocks.json; no file is no block. Errors as parse_node_blocks, or kIo.
Expected<NodeBlocks> load_node_blocks(const std::string& store_dir, const std::string& node);
// Replaces <store_dir>/blocks.json atomically and durably.
Status save_node_blocks(const std::string& store_dir, const std::string& node,
                        const NodeBlocks& blocks);

}  // namespace rdmanet::ipam
