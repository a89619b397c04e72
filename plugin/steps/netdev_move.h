// netdev mode: the device itself goes into the pod. It is taken down, its altnames dropped
// (they would clash in the pod) and it is moved and renamed to CNI_IFNAME in one request.
// Handing the device to the pod hands it its name, MTU, MAC, alias and admin state: the
// inverse brings it home (plugin/steps/netdev_home.h) and gives each of them back.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "netns/link_identity.h"
#include "plugin/steps/table.h"

namespace rdmanet::plugin {

class Attachment;
struct AttachmentRecord;

// What the netdev-move step records: the device as the host had it, and its identity (what
// no pod can forge: its parent device, permanent MAC, veth peer), by which DEL finds it
// whatever the pod renamed or readdressed.
struct NetdevMoveRecord {
  static constexpr StepKind kKind = StepKind::kNetdevMove;
  std::string host_name;
  int index = 0;  // ifindex at ADD
  std::string mac;
  uint32_t mtu = 0;
  std::string alias;
  std::vector<std::string> altnames;
  bool was_up = false;
  std::string pci;
  // Weak (its index only) in records of rdmanet 0.1, which kept none.
  netns::LinkIdentity identity;

  nlohmann::json to_json() const;
  static Expected<NetdevMoveRecord> from_json(const nlohmann::json& step);
};

// The netdev-move step of `record`, if ADD took one.
Expected<std::optional<NetdevMoveRecord>> netdev_move_of(const AttachmentRecord& record);

Status move_netdev_in(Attachment& a);
Status bring_netdev_home(Attachment& a, const nlohmann::json& recorded);

}  // namespace rdmanet::plugin
