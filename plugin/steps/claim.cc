#include "plugin/steps/claim.h"

#include <spdlog/spdlog.h>

#include "base/json_fields.h"
#include "netns/sysfs.h"
#include "plugin/attachment.h"
#include "plugin/steps/netdev_move.h"

namespace rdmanet::plugin {

namespace {

// What the hold-device step records: the device's key, which must be the record's own.
struct HoldRecord {
  static constexpr StepKind kKind = StepKind::kHoldDevice;
  std::string key;

  nlohmann::json to_json() const { return {{"key", key}}; }
  static Expected<HoldRecord> from_json(const nlohmann::json& step, const AttachmentRecord& rec) {
    HoldRecord h;
    TRY(Fields(step, "hold-device", ErrorKind::kState).required_string("key", &h.key).status());
    if (h.key != rec.device_key) {
      return Error(ErrorKind::kState, "hold-device.key \"" + h.key +
                                          "\" is not the record's device (\"" + rec.device_key +
                                          "\")");
    }
    return h;
  }
};

// The holder's device as a user knows it: its host name, and its PCI address when the record
// of its move has one (a VF or PF selected by name or MAC).
std::string held_device_label(const AttachmentRecord& holder) {
  std::string label = holder.device_name;
  auto move = netdev_move_of(holder);
  if (!move || !*move) {
    return label;
  }
  const netns::LinkIdentity& id = (*move)->identity;
  if (id.parent_bus == "pci" && netns::is_pci_address(id.parent_dev)) {
    label += " at PCI " + id.parent_dev;
  }
  return label;
}

}  // namespace

Status undo_earlier_add(Attachment& a) {
  TRY_ASSIGN(auto earlier, a.store().load(a.rec().id()));
  if (!earlier) {
    return ok_status();
  }
  spdlog::warn("attachment exists (phase {}); undoing it before the new ADD",
               name_of(kPhaseNames, earlier->phase));
  return undo_attachment(a.undo_context(), *earlier, DeviceLock::kHeldByCaller);
}

Status claim_device(Attachment& a) {
  if (a.rec().mode != Mode::kNetdev) {
    return ok_status();  // a macvlan parent is shared by design
  }
  const std::string& key = a.rec().device_key;
  TRY_ASSIGN(auto holder, a.store().holder(key));
  if (!holder || *holder == a.rec().id()) {
    return ok_status();
  }
  TRY_ASSIGN(auto other, a.store().load(*holder));
  if (!other) {
    // The holder finished its DEL but died before dropping the hold.
    return a.store().clear_holder(key, *holder);
  }
  auto ns = open_pod_netns(*other);
  if (ns && ns->has_value()) {
    return Error(ErrorKind::kDeviceBusy, "device " + held_device_label(*other) + " (" +
                                             a.conf().device.str() + ") is held by " +
                                             other->holder() + ", whose netns is alive");
  }
  spdlog::warn("reclaiming device {} from {}: its netns {} is gone", held_device_label(*other),
               other->holder(), other->netns);
  a.set_reclaimed();
  return undo_attachment(a.undo_context(), *other, DeviceLock::kHeldByCaller);
}

Status find_host_device(Attachment& a) {
  TRY_ASSIGN(auto rtnl, netns::Rtnl::open());
  netns::Sysfs sysfs(a.conf().sysfs_root);
  TRY_ASSIGN(auto dev, resolve_device(a.conf().device, sysfs, rtnl));
  a.rec().device_name = dev.link.name;
  a.set_device(std::move(dev));
  return ok_status();
}

Status hold_device(Attachment& a) {
  if (a.rec().mode != Mode::kNetdev) {
    return ok_status();
  }
  TRY(a.record(HoldRecord{a.rec().device_key}));
  return a.store().set_holder(a.rec().device_key, a.rec().id());
}

Status release_hold(Attachment& a, const nlohmann::json& recorded) {
  TRY_ASSIGN(HoldRecord hold, HoldRecord::from_json(recorded, a.rec()));
  return a.store().clear_holder(hold.key, a.rec().id());
}

}  // namespace rdmanet::plugin
