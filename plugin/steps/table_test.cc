#include "plugin/steps/table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "plugin/record.h"

namespace rdmanet::plugin {
namespace {

using nlohmann::json;

std::vector<StepKind> every_kind() {
  std::vector<StepKind> kinds;
  kinds.reserve(kStepKinds);
  for (size_t k = 0; k < kStepKinds; ++k) {
    kinds.push_back(static_cast<StepKind>(k));
  }
  return kinds;
}

// The place of a kind's row in the table: its place in ADD.
size_t add_place(StepKind kind) {
  auto steps = add_steps();
  return static_cast<size_t>(
      std::find_if(steps.begin(), steps.end(), [&](const Step& s) { return s.kind == kind; }) -
      steps.begin());
}

// Every kind a record can hold has one row: a name, an inverse, a place in ADD and one in
// undo order of its own; every row ADD runs has its step. A kind added to the enum without a
// row, or a row without an inverse, fails here.
TEST(StepTable, EveryKindHasANameAnInverseAndAPlaceInBothOrders) {
  std::set<int> undo_places;
  for (StepKind kind : every_kind()) {
    auto steps = add_steps();
    const auto rows =
        std::count_if(steps.begin(), steps.end(), [&](const Step& s) { return s.kind == kind; });
    ASSERT_EQ(rows, 1) << "kind " << static_cast<int>(kind);
    const Step& row = step_of(kind);
    EXPECT_FALSE(row.name.empty());
    EXPECT_NE(row.undo, nullptr) << row.name;
    EXPECT_LT(add_place(kind), steps.size()) << row.name;
    EXPECT_GE(row.undo_place, 1) << row.name;
    EXPECT_LE(row.undo_place, static_cast<int>(kStepKinds)) << row.name;
    EXPECT_TRUE(undo_places.insert(row.undo_place).second)
        << row.name << " shares undo place " << row.undo_place;
    EXPECT_TRUE(row.run != nullptr || kind == StepKind::kRdmaMoveAsWritten)
        << row.name << ": only a kind older records hold has no step in ADD";
  }
  for (const Step& row : add_steps()) {
    EXPECT_FALSE(row.run == nullptr && !row.kind) << row.name << " neither runs nor undoes";
    if (!row.kind) {
      EXPECT_EQ(row.undo, nullptr) << row.name << " records nothing, so has no inverse";
    }
  }
}

// The steps ADD takes before the first one that records are the ones that only look: ADD
// runs them outside the rollback, so none may change the node.
TEST(StepTable, TheStepsThatOnlyLookComeFirst) {
  auto steps = add_steps();
  auto first = std::find_if(steps.begin(), steps.end(), [](const Step& s) { return s.kind; });
  ASSERT_NE(first, steps.end());
  EXPECT_EQ(first->kind, StepKind::kHoldDevice) << "the hold is the first change";
  for (auto it = steps.begin(); it != first; ++it) {
    EXPECT_NE(it->run, nullptr) << it->name;
  }
}

// The address and the pod's files about the device (kFollows) are undone only after every
// step that takes the device, its macvlan child or its RDMA device out of the pod, so an
// address is never released while the pod may still carry it.
TEST(StepTable, WhatFollowsTheDeviceIsUndoneAfterItIsHome) {
  const StepKind device_home[] = {
      StepKind::kNetdevMove,        StepKind::kMacvlan,  StepKind::kRdmaMoveBeforeNetdev,
      StepKind::kRdmaMoveAsWritten, StepKind::kRdmaMove, StepKind::kSoftRoce};
  int followers = 0;
  for (StepKind kind : every_kind()) {
    const Step& row = step_of(kind);
    if (row.device != DeviceRole::kFollows) {
      continue;
    }
    ++followers;
    for (StepKind home : device_home) {
      EXPECT_GT(row.undo_place, step_of(home).undo_place)
          << row.name << " is undone before " << step_of(home).name;
    }
  }
  EXPECT_EQ(followers, 3) << "ipam, pod-info, device-info";
  for (StepKind home : device_home) {
    EXPECT_EQ(step_of(home).device, DeviceRole::kTouches)
        << step_of(home).name << " acts on the device: skipped when another pod holds it";
  }
  EXPECT_LT(step_of(StepKind::kRdmaMoveBeforeNetdev).undo_place,
            step_of(StepKind::kNetdevMove).undo_place)
      << "an InfiniBand device goes home before its netdev";
}

// The undo order DEL uses (order_for_undo, which Attachment::undo applies) is the table's:
// a record holding every kind in ADD order comes out by undo place, first undone last.
TEST(StepTable, DelUndoesInTheTablesUndoOrder) {
  std::vector<StepKind> in_add_order = every_kind();
  std::sort(in_add_order.begin(), in_add_order.end(),
            [](StepKind a, StepKind b) { return add_place(a) < add_place(b); });
  std::vector<StepRecord> record;
  record.reserve(in_add_order.size());
  for (StepKind kind : in_add_order) {
    record.push_back({kind, json::object()});
  }
  order_for_undo(record);
  ASSERT_EQ(record.size(), kStepKinds);
  for (size_t i = 0; i < record.size(); ++i) {
    // undo() pops from the back: the last entry is undone first (place 1).
    EXPECT_EQ(step_of(record[i].kind).undo_place, static_cast<int>(kStepKinds - i))
        << step_of(record[i].kind).name;
  }
}

// Each kind's record name reads back as that kind; an rdma-move says where ADD took it.
TEST(StepTable, RecordedNamesReadBackAsTheirKinds) {
  for (StepKind kind : every_kind()) {
    json data = json::object();
    bool netdev_follows = false;
    if (kind == StepKind::kRdmaMoveBeforeNetdev || kind == StepKind::kRdmaMove) {
      data["beforeNetdev"] = kind == StepKind::kRdmaMoveBeforeNetdev;
    }
    if (kind == StepKind::kRdmaMoveAsWritten) {
      netdev_follows = true;
    }
    EXPECT_EQ(recorded_kind(name_of(kind), data, netdev_follows), kind) << name_of(kind);
  }
  EXPECT_EQ(recorded_kind("rdma-move", json::object(), false), StepKind::kRdmaMove)
      << "an unflagged move after the netdev (rdmanet 0.1's) is a RoCE move";
  EXPECT_FALSE(recorded_kind("teleport", json::object(), false));
  EXPECT_FALSE(recorded_kind("pod-interface", json::object(), false))
      << "a step that records nothing is no kind";
}

}  // namespace
}  // namespace rdmanet::plugin
