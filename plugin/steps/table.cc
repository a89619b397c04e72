#include "plugin/steps/table.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "plugin/record.h"
#include "plugin/steps/claim.h"
#include "plugin/steps/device_info.h"
#include "plugin/steps/gid_wait.h"
#include "plugin/steps/ipam.h"
#include "plugin/steps/macvlan.h"
#include "plugin/steps/netdev_move.h"
#include "plugin/steps/node_qos.h"
#include "plugin/steps/pod_info.h"
#include "plugin/steps/pod_interface.h"
#include "plugin/steps/port_wait.h"
#include "plugin/steps/rdma_cm.h"
#include "plugin/steps/rdma_move.h"
#include "plugin/steps/rdma_plan.h"
#include "plugin/steps/soft_roce.h"
#include "plugin/steps/source_routing.h"
#include "plugin/steps/vf_guids.h"
#include "plugin/steps/vf_settings.h"

namespace rdmanet::plugin {

namespace {

using enum DeviceRole;
using K = StepKind;

// ADD, top to bottom. The undo places put the address and the pod's files after the device
// is home (kFollows), and an InfiniBand device home before its netdev: moving it recreates its
// IPoIB netdev in the netns it leaves, where the netdev's inverse then finds it.
// clang-format off
constexpr Step kSteps[] = {
    // Only look (and may refuse): nothing recorded, nothing to undo.
    {"earlier-add",      undo_earlier_add},
    {"claim-device",     claim_device},
    {"find-device",      find_host_device},
    {"plan-rdma",        plan_rdma},
    {"node-qos",         check_node_qos},
    // Change the node, each recorded first.
    // name              run                   kind                      inverse                undo  device
    {"hold-device",      hold_device,          K::kHoldDevice,           release_hold,          13,   kNone},
    {"vf-guids",         set_vf_guids,         K::kVfGuids,              reset_vf_guids,        12,   kTouches},
    {"rdma-move",        move_ib_device_in,    K::kRdmaMoveBeforeNetdev, move_rdma_device_home, 5,    kTouches},
    // Written before rdma-move said where it went (#16): undone after the netdev, as then.
    {"rdma-move",        nullptr,              K::kRdmaMoveAsWritten,    move_rdma_device_home, 8,    kTouches},
    {"netdev-move",      move_netdev_in,       K::kNetdevMove,           bring_netdev_home,     6,    kTouches},
    {"macvlan",          create_macvlan,       K::kMacvlan,              delete_macvlan,        7,    kTouches},
    {"vf-settings",      apply_vf_settings,    K::kVfSettings,           restore_vf_settings,   4,    kTouches},
    {"ipam",             ipam_add,             K::kIpam,                 ipam_release,          11,   kFollows},
    {"pod-interface",    configure_pod_interface},
    {"source-routing",   add_source_routing,   K::kSourceRouting,        remove_source_routing, 3,    kNone},
    {"soft-roce",        create_soft_roce,     K::kSoftRoce,             delete_soft_roce,      2,    kTouches},
    {"rdma-move",        move_roce_device_in,  K::kRdmaMove,             move_rdma_device_home, 1,    kTouches},
    {"rdma-cm-defaults", set_rdma_cm_defaults},
    {"gid-wait",         wait_for_gids},
    {"port-wait",        wait_for_port},
    {"pod-info",         write_pod_info,       K::kPodInfo,              remove_pod_info,       10,   kFollows},
    {"device-info",      write_device_info,    K::kDeviceInfo,           remove_device_info,    9,    kFollows},
};
// clang-format on

}  // namespace

std::span<const Step> add_steps() { return kSteps; }

const Step& step_of(StepKind kind) {
  const Step* found = std::find_if(std::begin(kSteps), std::end(kSteps),
                                   [&](const Step& s) { return s.kind == kind; });
  return *found;  // every kind has a row (table_test.cc)
}

std::string_view name_of(StepKind kind) { return step_of(kind).name; }

std::optional<StepKind> recorded_kind(std::string_view name, const nlohmann::json& data,
                                      bool netdev_move_follows) {
  if (name == "rdma-move") {
    auto flag = data.is_object() ? data.find("beforeNetdev") : data.end();
    if (data.is_object() && flag != data.end() && flag->is_boolean()) {
      return flag->get<bool>() ? K::kRdmaMoveBeforeNetdev : K::kRdmaMove;
    }
    return netdev_move_follows ? K::kRdmaMoveAsWritten : K::kRdmaMove;
  }
  for (const Step& s : kSteps) {
    if (s.kind && s.name == name) {
      return s.kind;
    }
  }
  return std::nullopt;
}

void order_for_undo(std::vector<StepRecord>& steps) {
  std::stable_sort(steps.begin(), steps.end(), [](const StepRecord& a, const StepRecord& b) {
    return step_of(a.kind).undo_place > step_of(b.kind).undo_place;
  });
}

}  // namespace rdmanet::plugin
