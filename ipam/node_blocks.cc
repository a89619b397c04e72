#include "ipam/node_blocks.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "base/files.h"
#include "base/json_fields.h"

namespace rdmanet::ipam {

using nlohmann::json;

bool NodeBlocks::holds(const Prefix& block) const {
  return std::any_of(held.begin(), held.end(),
                     [&](const HeldBlock& h) { return h.block == block; });
}

std::string format_node_blocks(const NodeBlocks& blocks, const std::string& node) {
  auto to_json = [](const std::vector<HeldBlock>& list) {
    json out = json::array();
    for (const auto& b : list) {
      json item = {{"block", b.block.str()}, {"revision", b.revision}};
      if (b.empty_since) {
        item["emptySince"] = *b.empty_since;
      }
      out.push_back(std::move(item));
    }
    return out;
  };
  json doc = {{"node", node}, {"blocks", to_json(blocks.held)}};
  if (!blocks.releasing.empty()) {
    doc["releasing"] = to_json(blocks.releasing);
  }
  return doc.dump(1) + "\n";
}

Expected<NodeBlocks> parse_node_blocks(const std::string& text, const std::string& node,
                                       const std::string& path) {
  json doc = parse_json(text);
  // Written atomically: anything unreadable is damage, never a torn write.
  if (!doc.is_object() || !doc.contains("node") || !doc["node"].is_string() ||
      !doc.contains("blocks") || !doc["blocks"].is_array() ||
      (doc.contains("releasing") && !doc["releasing"].is_array())) {
    return Error(ErrorKind::kState, path + " is corrupt");
  }
  if (doc["node"] != node) {
    return Error(ErrorKind::kState, path + " lists the blocks of node " +
                                        doc["node"].get<std::string>() + ", this node is " + node +
                                        " (a store must not move between nodes)");
  }
  NodeBlocks out;
  for (auto [key, list] :
       {std::pair{"blocks", &out.held}, std::pair{"releasing", &out.releasing}}) {
    for (const auto& item : doc.value(key, json::array())) {
      HeldBlock b;
      std::optional<Prefix> p;
      if (item.is_object() && item.contains("block") && item["block"].is_string()) {
        p = parse_prefix(item["block"].get<std::string>());
      }
      if (!p || !item.contains("revision") || !item["revision"].is_number_integer()) {
        return Error(ErrorKind::kState, path + " has a malformed entry: " + item.dump());
      }
      b.block = *p;
      b.revision = item["revision"].get<int64_t>();
      if (item.contains("emptySince") && item["emptySince"].is_number_integer()) {
        b.empty_since = item["emptySince"].get<int64_t>();
      }
      list->push_back(b);
    }
  }
  return out;
}

Expected<NodeBlocks> load_node_blocks(const std::string& store_dir, const std::string& node) {
  std::string path = store_dir + "/" + kBlocksFile;
  TRY_ASSIGN(auto text, read_file(path));
  if (!text) {
    return NodeBlocks{};
  }
  return parse_node_blocks(*text, node, path);
}

Status save_node_blocks(const std::string& store_dir, const std::string& node,
                        const NodeBlocks& blocks) {
  return write_file_atomically(store_dir + "/" + kBlocksFile, format_node_blocks(blocks, node),
                               0600, Survives::kMachineCrash);
}

}  // namespace rdmanet::ipam
