#include "plugin/record.h"

#include <algorithm>
#include <limits>

#include "base/json_fields.h"
#include "netns/link.h"
#include "netns/vf.h"

namespace rdmanet::plugin {

using nlohmann::json;

namespace {

constexpr int kVersion = 2;

json rdma_to_json(const RdmaReport& r) {
  json doc = {{"device", r.device},
              {"index", r.index},
              {"port", r.port},
              {"nodeMode", r.node_mode},
              {"gids", r.gids}};
  if (!r.driver.empty()) {
    doc["driver"] = r.driver;
  }
  return doc;
}

Expected<RdmaReport> rdma_from_json(const json& doc, const std::string& where) {
  RdmaReport r;
  Fields f(doc, where, ErrorKind::kState);
  f.string("device", &r.device).integer("index", &r.index).integer_in("port", 0, 255, &r.port);
  f.string("nodeMode", &r.node_mode).string("driver", &r.driver);
  TRY(f.status());
  if (doc.contains("gids")) {
    r.gids = doc["gids"];
  }
  return r;
}

Expected<std::vector<StepRecord>> steps_from_json(const json& doc, const std::string& where) {
  std::vector<json> items;
  TRY(Fields(doc, where, ErrorKind::kState).object_list("steps", &items).status());
  std::vector<StepRecord> steps;
  for (size_t n = 0; n < items.size(); ++n) {
    std::string here = where + ".steps[" + std::to_string(n) + "]";
    StepRecord step;
    std::string kind;
    TRY(Fields(items[n], here, ErrorKind::kState).required_string("step", &kind).status());
    const bool netdev_move_follows =
        std::any_of(items.begin() + static_cast<std::ptrdiff_t>(n) + 1, items.end(),
                    [](const json& later) { return later.value("step", json()) == "netdev-move"; });
    auto known = recorded_kind(kind, items[n], netdev_move_follows);
    if (!known) {
      // A newer rdmanet's step: undoing less than it did would strand the device.
      return Error(ErrorKind::kState, here + ": unknown step \"" + kind +
                                          "\" (written by a newer rdmanet? use that one's DEL)");
    }
    step.kind = *known;
    step.data = std::move(items[n]);
    step.data.erase("step");
    steps.push_back(std::move(step));
  }
  return steps;
}

// Version 1 files held a snapshot of the device instead of steps. Its teardown undid, in
// this order: the device-info file, the RDMA device (home, then deleted if created), the
// netdev (home, with its name, MTU, MAC, alias, altnames and admin state) or the macvlan
// child, the VF settings, IPAM, the hold. These are the steps that reproduce it (ADD order,
// undone in reverse; IPAM now goes before the netdev, as ADD took it after the move).
Expected<AttachmentRecord> from_version1(const json& doc, const std::string& where,
                                         AttachmentRecord r) {
  Fields f(doc, where, ErrorKind::kState);
  json dev;
  json vf;
  json rdma;
  std::string device_info_file;
  f.object("device", &dev).object("vf", &vf).object("rdma", &rdma);
  f.string("deviceInfoFile", &device_info_file);
  TRY(f.status());
  Fields d(dev, where + ".device", ErrorKind::kState);
  json netdev = json::object();
  std::string name, mac, alias, pci, key;
  std::vector<std::string> altnames;
  int index = 0;
  uint32_t mtu = 0;
  bool up = false;
  d.string("name", &name).string("mac", &mac).string("alias", &alias).string("pci", &pci);
  d.string("key", &key).string_list("altnames", &altnames).integer("index", &index);
  d.integer_in("mtu", 0, 0xffffffffLL, &mtu).boolean("up", &up);
  TRY(d.status());
  r.device_key = key;
  r.device_name = name;
  if (r.mode == Mode::kNetdev) {
    r.steps.push_back({StepKind::kHoldDevice, {{"key", key}}});
  }
  if (vf.is_object()) {
    json original = vf.value("original", json::object());
    if (original.contains("linkState") && original["linkState"].is_number_unsigned()) {
      auto state = original["linkState"].get<uint32_t>();
      original["linkState"] = state <= 2
                                  ? std::string(name_of(netns::kVfLinkStateNames,
                                                        static_cast<netns::VfLinkState>(state)))
                                  : "auto";
    }
    r.steps.push_back({StepKind::kVfSettings,
                       {{"pfPci", vf.value("pfPci", "")},
                        {"pfName", vf.value("pfName", "")},
                        {"sysfsRoot", vf.value("sysfsRoot", "/sys")},
                        {"vf", vf.value("index", 0)},
                        {"original", original}}});
  }
  if (r.mode == Mode::kNetdev) {
    r.steps.push_back({StepKind::kNetdevMove,
                       {{"hostName", name},
                        {"index", index},
                        {"mac", mac},
                        {"mtu", mtu},
                        {"alias", alias},
                        {"altnames", altnames},
                        {"wasUp", up},
                        {"pci", pci}}});
  } else {
    r.steps.push_back({StepKind::kMacvlan, {{"name", r.ifname}}});
  }
  r.steps.push_back({StepKind::kIpam, json::object()});
  if (rdma.is_object()) {
    TRY_ASSIGN(r.rdma, rdma_from_json(rdma, where + ".rdma"));
    bool created = false;
    bool moved = false;
    std::string configfs_root;
    Fields(rdma, where + ".rdma", ErrorKind::kState)
        .boolean("created", &created)
        .boolean("moved", &moved)
        .string("configfsRoot", &configfs_root);
    if (created) {
      r.steps.push_back(
          {StepKind::kSoftRoce, {{"device", r.rdma->device}, {"configfsRoot", configfs_root}}});
    }
    if (moved) {
      r.steps.push_back(
          {StepKind::kRdmaMove, {{"device", r.rdma->device}, {"index", r.rdma->index}}});
    }
  }
  if (!device_info_file.empty()) {
    r.steps.push_back({StepKind::kDeviceInfo, {{"path", device_info_file}}});
  }
  return r;
}

}  // namespace

std::string AttachmentRecord::holder() const {
  std::string where =
      "container " + container_id.substr(0, 12) + ", " + ifname + " in network " + network;
  return pod.empty() ? where : "pod " + pod + " (" + where + ")";
}

std::string AttachmentId::str() const {
  return "container " + container_id + " (ifname " + ifname + ", network " + network + ")";
}

const StepRecord* AttachmentRecord::step(StepKind kind) const {
  for (const auto& s : steps) {
    if (s.kind == kind) {
      return &s;
    }
  }
  return nullptr;
}

json AttachmentRecord::to_json() const {
  json steps_json = json::array();
  for (const auto& s : steps) {
    json entry = {{"step", name_of(s.kind)}};
    entry.update(s.data);
    steps_json.push_back(std::move(entry));
  }
  return {{"version", kVersion},
          {"network", network},
          {"containerID", container_id},
          {"ifname", ifname},
          {"netns", netns},
          {"netnsCookie", netns_cookie},
          {"netnsId", netns_id},
          {"mode", name_of(kModeNames, mode)},
          {"phase", name_of(kPhaseNames, phase)},
          {"deviceKey", device_key},
          {"deviceName", device_name},
          {"pod", pod},
          {"steps", std::move(steps_json)},
          {"rdma", rdma ? rdma_to_json(*rdma) : json()},
          {"config", config},
          {"result", result}};
}

Expected<AttachmentRecord> AttachmentRecord::from_json(const json& doc, const std::string& where) {
  AttachmentRecord r;
  Fields f(doc, where, ErrorKind::kState);
  int version = 1;
  long long cookie = 0;
  f.integer("version", &version).required_string("network", &r.network);
  f.string("containerID", &r.container_id).string("ifname", &r.ifname);
  f.string("netns", &r.netns).integer64("netnsCookie", &cookie);
  f.integer_in("netnsId", -1, std::numeric_limits<int>::max(), &r.netns_id);
  f.name("mode", kModeNames, &r.mode).name("phase", kPhaseNames, &r.phase);
  f.string("config", &r.config);
  TRY(f.status());
  r.netns_cookie = static_cast<uint64_t>(cookie);
  if (doc.contains("result")) {
    r.result = doc["result"];
  }
  if (version == 1) {
    return from_version1(doc, where, std::move(r));
  }
  if (version != kVersion) {
    return Error(ErrorKind::kState, where + ": state version " + std::to_string(version) +
                                        " is not one this rdmanet reads (1 or 2)");
  }
  json rdma;
  f.string("deviceKey", &r.device_key).string("deviceName", &r.device_name);
  f.string("pod", &r.pod).object("rdma", &rdma);
  TRY(f.status());
  TRY_ASSIGN(r.steps, steps_from_json(doc, where));
  if (rdma.is_object()) {
    TRY_ASSIGN(r.rdma, rdma_from_json(rdma, where + ".rdma"));
  }
  return r;
}

Status check_recorded_link_name(const std::string& name, const std::string& field) {
  if (auto s = netns::check_link_name(name); !s) {
    return Error(ErrorKind::kState, field + ": " + s.error().msg());
  }
  return ok_status();
}

}  // namespace rdmanet::plugin
