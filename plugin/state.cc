#include "plugin/state.h"

#include <dirent.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "base/files.h"
#include "base/json_fields.h"

namespace rdmanet::plugin {

using nlohmann::json;

namespace {

Status ensure_dirs(const std::string& root, const std::string& sub) {
  // The root and its parents (e.g. /var/lib/cni) are created as needed.
  std::string dir = sub.empty() ? root : root + "/" + sub;
  if (auto s = make_directories(dir, 0700); !s) {
    return std::move(s).error().context("state directory");
  }
  // DEL trusts what it reads here: nobody else may be able to write it.
  if (auto s = check_private_directory(dir); !s) {
    return std::move(s).error().context("state directory");
  }
  return ok_status();
}

// Removes a state file and the temporary a killed write of it can leave
// (write_file_atomically writes <path>.tmp, then renames).
Status remove_file(const std::string& path) {
  for (const std::string& p : {path + ".tmp", path}) {
    if (::unlink(p.c_str()) != 0 && errno != ENOENT) {
      return Error(ErrorKind::kIo, "remove " + p + ": " + std::strerror(errno));
    }
  }
  return ok_status();
}

Expected<AttachmentState> parse_state(const std::string& text, const std::string& path) {
  json doc = json::parse(text, nullptr, false);
  if (!doc.is_object()) {
    return Error(ErrorKind::kState, "state file " + path + " is not a JSON object");
  }
  return AttachmentState::from_json(doc, path);
}

}  // namespace

namespace {

json vf_to_json(const VfRecord& vf) {
  const netns::VfState& o = vf.original;
  json doc = {{"pfPci", vf.pf_pci},
              {"pfName", vf.pf_name},
              {"sysfsRoot", vf.sysfs_root},
              {"index", vf.index},
              {"original",
               {{"mac", o.mac.str()},
                {"vlan", o.vlan},
                {"qos", o.qos},
                {"vlanProto", o.vlan_proto},
                {"spoofchk", o.spoofchk},
                {"trust", o.trust},
                {"linkState", static_cast<uint32_t>(o.link_state)},
                {"minTxRate", o.min_tx_rate},
                {"maxTxRate", o.max_tx_rate}}}};
  // GUIDs only when the PF reported them: DEL restores only what it knows.
  if (o.node_guid) {
    doc["original"]["nodeGuid"] = netns::format_guid(*o.node_guid);
  }
  if (o.port_guid) {
    doc["original"]["portGuid"] = netns::format_guid(*o.port_guid);
  }
  return doc;
}

json rdma_to_json(const RdmaRecord& r) {
  return {{"device", r.device},
          {"index", r.index},
          {"port", r.port},
          {"created", r.created},
          {"moved", r.moved},
          {"nodeMode", r.node_mode},
          {"configfsRoot", r.configfs_root},
          {"gids", r.gids}};
}

Expected<RdmaRecord> rdma_from_json(const json& doc, const std::string& where) {
  RdmaRecord r;
  Fields f(doc, where, ErrorKind::kState);
  f.string("device", &r.device).integer("index", &r.index).integer_in("port", 0, 255, &r.port);
  f.boolean("created", &r.created).boolean("moved", &r.moved);
  f.string("nodeMode", &r.node_mode).string("configfsRoot", &r.configfs_root);
  TRY(f.status());
  if (doc.contains("gids")) {
    r.gids = doc["gids"];
  }
  return r;
}

Expected<VfRecord> vf_from_json(const json& doc, const std::string& where) {
  VfRecord vf;
  Fields f(doc, where, ErrorKind::kState);
  json original;
  f.string("pfPci", &vf.pf_pci).string("pfName", &vf.pf_name);
  f.string("sysfsRoot", &vf.sysfs_root).integer("index", &vf.index);
  f.object("original", &original);
  TRY(f.status());
  Fields o(original, where + ".original", ErrorKind::kState);
  netns::VfState& v = vf.original;
  std::string mac;
  std::string node_guid;
  std::string port_guid;
  uint32_t link_state = 0;
  o.string("mac", &mac).integer_in("vlan", 0, 4095, &v.vlan).integer_in("qos", 0, 7, &v.qos);
  o.integer_in("vlanProto", 0, 0xffff, &v.vlan_proto).integer_in("linkState", 0, 2, &link_state);
  o.integer_in("minTxRate", 0, 0xffffffffLL, &v.min_tx_rate);
  o.integer_in("maxTxRate", 0, 0xffffffffLL, &v.max_tx_rate);
  o.boolean("spoofchk", &v.spoofchk).boolean("trust", &v.trust);
  o.string("nodeGuid", &node_guid).string("portGuid", &port_guid);
  TRY(o.status());
  v.link_state = static_cast<netns::VfLinkState>(link_state);
  if (auto hw = netns::HwAddress::parse(mac); hw) {
    v.mac = *hw;
  }
  for (auto [key, text, out] : {std::tuple{"nodeGuid", &node_guid, &v.node_guid},
                                std::tuple{"portGuid", &port_guid, &v.port_guid}}) {
    if (!text->empty()) {
      auto guid = netns::parse_guid(*text, where + ".original." + key);
      if (!guid) {
        return Error(ErrorKind::kState, guid.error().msg());
      }
      *out = *guid;
    }
  }
  return vf;
}

}  // namespace

json AttachmentState::to_json() const {
  return {{"version", 1},
          {"vf", vf ? vf_to_json(*vf) : json()},
          {"rdma", rdma ? rdma_to_json(*rdma) : json()},
          {"deviceInfoFile", device_info_file},
          {"network", network},
          {"containerID", container_id},
          {"ifname", ifname},
          {"netns", netns},
          {"netnsCookie", netns_cookie},
          {"mode", mode},
          {"phase", phase},
          {"device",
           {{"name", device.name},
            {"index", device.index},
            {"mac", device.mac},
            {"mtu", device.mtu},
            {"alias", device.alias},
            {"altnames", device.altnames},
            {"pci", device.pci},
            {"key", device.key},
            {"up", device.up}}},
          {"config", config},
          {"result", result}};
}

Expected<AttachmentState> AttachmentState::from_json(const json& doc, const std::string& where) {
  AttachmentState s;
  Fields f(doc, where, ErrorKind::kState);
  json dev;
  long long netns_cookie = 0;
  f.required_string("network", &s.network).string("containerID", &s.container_id);
  f.string("ifname", &s.ifname).string("netns", &s.netns).string("mode", &s.mode);
  f.string("phase", &s.phase).string("config", &s.config);
  f.string("deviceInfoFile", &s.device_info_file).integer64("netnsCookie", &netns_cookie);
  f.object("device", &dev);
  TRY(f.status());
  Fields d(dev, where + ".device", ErrorKind::kState);
  d.string("name", &s.device.name).string("mac", &s.device.mac).string("alias", &s.device.alias);
  d.string("pci", &s.device.pci).string("key", &s.device.key);
  d.string_list("altnames", &s.device.altnames).integer("index", &s.device.index);
  d.integer_in("mtu", 0, 0xffffffffLL, &s.device.mtu).boolean("up", &s.device.up);
  TRY(d.status());
  s.netns_cookie = static_cast<uint64_t>(netns_cookie);
  if (doc.contains("vf") && doc["vf"].is_object()) {
    auto vf = vf_from_json(doc["vf"], where + ".vf");
    if (!vf) {
      return std::move(vf).error();
    }
    s.vf = std::move(*vf);
  }
  if (doc.contains("rdma") && doc["rdma"].is_object()) {
    auto rdma = rdma_from_json(doc["rdma"], where + ".rdma");
    if (!rdma) {
      return std::move(rdma).error();
    }
    s.rdma = std::move(*rdma);
  }
  if (doc.contains("result")) {
    s.result = doc["result"];
  }
  return s;
}

Expected<std::optional<netns::Netns>> open_pod_netns(const AttachmentState& state) {
  if (state.netns.empty()) {
    return std::optional<netns::Netns>();
  }
  auto opened = netns::Netns::open_if_exists(state.netns);
  if (!opened || !opened->has_value()) {
    return opened;
  }
  if (state.netns_cookie != 0) {
    auto cookie = (*opened)->cookie();
    if (cookie && *cookie != state.netns_cookie) {
      spdlog::warn("netns {} is no longer the pod's (cookie {}, ADD saw {}): treating it as gone",
                   state.netns, *cookie, state.netns_cookie);
      return std::optional<netns::Netns>();
    }
  }
  return opened;
}

Expected<FileLock> StateStore::lock_device(const std::string& key) {
  if (auto s = ensure_dirs(root_, "locks"); !s) {
    return std::move(s).error();
  }
  std::string path = root_ + "/locks/" + key + ".lock";
  return FileLock::acquire(path);
}

std::string StateStore::attachment_path(const std::string& network, const std::string& container_id,
                                        const std::string& ifname) const {
  return root_ + "/" + bounded_name(network) + "/" + bounded_name(container_id) + "." +
         hex(ifname) + ".json";
}

Expected<std::optional<AttachmentState>> StateStore::load(const std::string& network,
                                                          const std::string& container_id,
                                                          const std::string& ifname) const {
  std::string path = attachment_path(network, container_id, ifname);
  auto text = read_file(path);
  if (!text) {
    return std::move(text).error();
  }
  if (!text->has_value()) {
    return std::optional<AttachmentState>();
  }
  auto state = parse_state(**text, path);
  if (!state) {
    return std::move(state).error();
  }
  return std::optional<AttachmentState>(std::move(*state));
}

Status StateStore::save(const AttachmentState& state) {
  if (auto s = ensure_dirs(root_, bounded_name(state.network)); !s) {
    return s;
  }
  return write_file_atomically(attachment_path(state.network, state.container_id, state.ifname),
                               state.to_json().dump(2), 0600);
}

Status StateStore::remove(const AttachmentState& state) {
  return forget(state.network, state.container_id, state.ifname);
}

Status StateStore::forget(const std::string& network, const std::string& container_id,
                          const std::string& ifname) {
  return remove_file(attachment_path(network, container_id, ifname));
}

Expected<std::optional<AttachmentState>> StateStore::holder(const std::string& key) const {
  std::string path = root_ + "/holds/" + key;
  auto text = read_file(path);
  if (!text) {
    return std::move(text).error();
  }
  if (!text->has_value()) {
    return std::optional<AttachmentState>();
  }
  json doc = json::parse(**text, nullptr, false);
  if (!doc.is_object()) {
    return Error(ErrorKind::kState, "hold file " + path + " is not a JSON object");
  }
  std::string network;
  std::string cid;
  std::string ifname;
  Fields f(doc, path, ErrorKind::kState);
  f.required_string("network", &network).required_string("containerID", &cid);
  f.required_string("ifname", &ifname);
  TRY(f.status());
  auto state = load(network, cid, ifname);
  if (!state) {
    return std::move(state).error();
  }
  if (!state->has_value()) {
    // The attachment finished its DEL but died before dropping the hold.
    AttachmentState orphan;
    orphan.network = network;
    orphan.container_id = cid;
    orphan.ifname = ifname;
    orphan.phase = "gone";
    return std::optional<AttachmentState>(orphan);
  }
  return state;
}

Status StateStore::set_holder(const std::string& key, const AttachmentState& state) {
  if (auto s = ensure_dirs(root_, "holds"); !s) {
    return s;
  }
  json doc = {
      {"network", state.network}, {"containerID", state.container_id}, {"ifname", state.ifname}};
  return write_file_atomically(root_ + "/holds/" + key, doc.dump(), 0600);
}

Status StateStore::clear_holder(const std::string& key, const AttachmentState& state) {
  auto current = holder(key);
  if (current && current->has_value() &&
      ((*current)->network != state.network || (*current)->container_id != state.container_id ||
       (*current)->ifname != state.ifname)) {
    return ok_status();  // someone else holds it now; not ours to clear
  }
  return remove_file(root_ + "/holds/" + key);
}

Expected<std::vector<AttachmentState>> StateStore::list(const std::string& network) const {
  std::vector<AttachmentState> out;
  std::string dir = root_ + "/" + bounded_name(network);
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) {
      return out;
    }
    return Error(ErrorKind::kIo, "list " + dir + ": " + std::strerror(errno));
  }
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.size() < 6 || name.compare(name.size() - 5, 5, ".json") != 0) {
      continue;
    }
    auto text = read_file(dir + "/" + name);
    if (!text || !text->has_value()) {
      continue;
    }
    auto state = parse_state(**text, dir + "/" + name);
    if (state) {
      out.push_back(std::move(*state));
    }
  }
  ::closedir(d);
  return out;
}

Status StateStore::check_writable() {
  if (auto s = ensure_dirs(root_, ""); !s) {
    return s;
  }
  if (::access(root_.c_str(), W_OK | X_OK) != 0) {
    return Error(ErrorKind::kNotAvailable,
                 "state directory " + root_ + " is not writable: " + std::strerror(errno));
  }
  return ok_status();
}

}  // namespace rdmanet::plugin
