// ADD's steps, one row each, in the order ADD takes them: what each is called, what it does,
// and, for a step that changes the node, the kind it is recorded as, its inverse, its place
// in undo order and what its inverse acts on. Every other fact about a step kind is read
// from here (plugin/README.md: adding a step).
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace rdmanet::plugin {

class Attachment;
struct StepRecord;

// The steps ADD records, each before it changes the node (a row of the table each).
enum class StepKind : uint8_t {
  kHoldDevice,
  kVfGuids,
  kRdmaMoveBeforeNetdev,
  kRdmaMoveAsWritten,
  kNetdevMove,
  kMacvlan,
  kVfSettings,
  kIpam,
  kSourceRouting,
  kSoftRoce,
  kRdmaMove,
  kPodInfo,
  kDeviceInfo,
};
inline constexpr size_t kStepKinds = 13;

// What a recorded step's inverse acts on.
enum class DeviceRole : uint8_t {
  kNone,
  // The device itself, or what ADD made of it (moves it home, puts back what was set on it or
  // through its PF, deletes a child or a soft-RoCE device): skipped when the device's hold
  // names another attachment since (a reboot lost this one's hold and another pod took it).
  kTouches,
  // The address and the files about the device: undone only once the device is home or
  // gone (the table puts them after every step that takes the device out of the pod), so an
  // address is never released, nor the pod's files removed, while the pod may still hold it.
  kFollows,
};

struct Step {
  std::string_view name;  // a recorded step's "step" in the record
  // ADD's part: looks (and may refuse), or records what it is about to change
  // (Attachment::record) and then changes it; a step for another mode or device does
  // nothing. nullptr: a kind only older records hold.
  Status (*run)(Attachment& a) = nullptr;
  // For the steps that change the node:
  std::optional<StepKind> kind;
  // Reads only what its step recorded and undoes exactly that; finding it undone already is
  // fine (a repeated DEL, the kernel cleaning up after a dead netns).
  Status (*undo)(Attachment& a, const nlohmann::json& recorded) = nullptr;
  int undo_place = 0;  // 1: undone first
  DeviceRole device = DeviceRole::kNone;
};

// Every step of ADD, in order: the steps that only look, then those that change the node.
std::span<const Step> add_steps();

// The row of a recorded kind.
const Step& step_of(StepKind kind);
std::string_view name_of(StepKind kind);

// The kind of a recorded step from its name and data; `netdev_move_follows`: a netdev-move
// comes after it in the record. An rdma-move says where ADD took it (beforeNetdev); one
// written before that flag existed and taken before the netdev is undone after the netdev,
// as the rdmanet that wrote it did. std::nullopt for a name no row has (a newer rdmanet's).
std::optional<StepKind> recorded_kind(std::string_view name, const nlohmann::json& data,
                                      bool netdev_move_follows);

// Puts recorded steps in undo order, first undone last (undo() pops from the back): by
// their kinds' undo places. Ordering twice changes nothing.
void order_for_undo(std::vector<StepRecord>& steps);

}  // namespace rdmanet::plugin
