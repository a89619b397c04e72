#include "plugin/pod_info.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "base/dir.h"
#include "base/file_lock.h"
#include "base/files.h"
#include "base/hex.h"
#include "base/json_fields.h"
#include "netns/ip_address.h"

namespace rdmanet::plugin {

using nlohmann::json;

namespace {

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (const auto& p : parts) {
    out += (out.empty() ? "" : sep) + p;
  }
  return out;
}

// The RoCE v2 GID index of a rail's first address of a family, if it has one.
std::optional<int> gid_index(const json& rail, const char* family) {
  const json& rdma = rail.value("rdma", json::object());
  const json& indexes = rdma.value("gidIndex", json::object());
  if (indexes.contains(family) && indexes[family].is_number_integer()) {
    return indexes[family].get<int>();
  }
  return std::nullopt;
}

// The rail's first address of a family ("10.56.0.2/24"), if it has one.
std::optional<netns::IpPrefix> address(const json& rail, bool v4) {
  for (const auto& a : rail.value("addresses", json::array())) {
    if (!a.is_string()) {
      continue;
    }
    auto prefix = netns::IpPrefix::parse(a.get<std::string>());
    if (prefix && prefix->addr.is_v4() == v4) {
      return *prefix;
    }
  }
  return std::nullopt;
}

bool is_roce(const json& rail) {
  return rail.contains("rdma") && rail["rdma"].value("linkLayer", "") == "Ethernet";
}

// The value every rail has for `key`, if all have one and they agree.
std::optional<int> common_int(const std::vector<json>& rails, const char* key) {
  std::optional<int> common;
  for (const auto& rail : rails) {
    const json& rdma = rail.value("rdma", json::object());
    if (!rdma.contains(key) || !rdma[key].is_number_integer() ||
        (common && *common != rdma[key].get<int>())) {
      return std::nullopt;
    }
    common = rdma[key].get<int>();
  }
  return common;
}

bool shares_device(const json& rail) {
  return rail.value("rdma", json::object()).value("sharedDevice", false);
}

// The RoCE v2 GID index every rail has (IPv4, else IPv6), if they agree.
std::optional<int> common_gid_index(const std::vector<json>& roce) {
  std::optional<int> common;
  for (const auto& rail : roce) {
    auto index = gid_index(rail, "ipv4");
    index = index ? index : gid_index(rail, "ipv6");
    if (!index || (common && *common != *index)) {
      return std::nullopt;
    }
    common = index;
  }
  return common;
}

// How NCCL finds each RoCE rail's GID. Where every rail's RDMA device is the pod's own (a
// VF, a PF, a soft-RoCE device on the pod interface) its GID table holds only the pod's
// addresses: NCCL_IB_ADDR_FAMILY, and NCCL_IB_ADDR_RANGE when one subnet holds every rail,
// let NCCL pick the GID of the rail's address at each start, so an index that moved after
// a link flap or an address change never reaches a restarted process. A device shared with
// other pods (a macvlan child of the node's HCA) holds their GIDs too, and rails of both
// families have no family in common: NCCL then needs the index, NCCL_IB_GID_INDEX when
// every rail has the same one (the node agent keeps the files current). NCCL takes one
// setting for all rails; what no single setting covers is left to RDMANET_RAIL<i>_*.
void gid_settings(const std::vector<json>& roce, std::map<std::string, std::string>* env) {
  if (roce.empty()) {
    return;
  }
  const auto has = [](bool v4) {
    return [v4](const json& rail) { return address(rail, v4).has_value(); };
  };
  const bool v4 = std::all_of(roce.begin(), roce.end(), has(true));
  const bool v6 = std::all_of(roce.begin(), roce.end(), has(false));
  const bool by_index = std::any_of(roce.begin(), roce.end(), shares_device) || (!v4 && !v6);
  if (by_index) {
    if (auto index = common_gid_index(roce); index) {
      (*env)["NCCL_IB_GID_INDEX"] = std::to_string(*index);
      return;
    }
    if (!v4 && !v6) {
      return;
    }
  }
  (*env)["NCCL_IB_ADDR_FAMILY"] = v4 ? "AF_INET" : "AF_INET6";
  std::optional<netns::IpPrefix> subnet;
  for (const auto& rail : roce) {
    auto a = address(rail, v4);
    if (!a || (subnet && *subnet != a->network())) {
      return;  // several subnets: NCCL takes any address of the family
    }
    subnet = a->network();
  }
  if (subnet) {
    (*env)["NCCL_IB_ADDR_RANGE"] = subnet->str();
  }
}

// The traffic class NCCL and UCX send with, where every RoCE rail has the same one (rails
// that disagree are stated per rail only: NCCL and UCX take one class for all).
void traffic_class_settings(const std::vector<json>& roce,
                            std::map<std::string, std::string>* env) {
  if (roce.empty()) {
    return;
  }
  if (auto tc = common_int(roce, "trafficClass"); tc) {
    (*env)["NCCL_IB_TC"] = std::to_string(*tc);
    (*env)["UCX_IB_TRAFFIC_CLASS"] = std::to_string(*tc);
  }
  if (auto tc = common_int(roce, "controlTrafficClass"); tc) {
    (*env)["NCCL_IB_FIFO_TC"] = std::to_string(*tc);
  }
}

}  // namespace

bool ifname_less(const std::string& a, const std::string& b) {
  size_t i = 0;
  size_t j = 0;
  while (i < a.size() && j < b.size()) {
    if (std::isdigit(static_cast<unsigned char>(a[i])) &&
        std::isdigit(static_cast<unsigned char>(b[j]))) {
      size_t ie = i;
      size_t je = j;
      while (ie < a.size() && std::isdigit(static_cast<unsigned char>(a[ie]))) {
        ++ie;
      }
      while (je < b.size() && std::isdigit(static_cast<unsigned char>(b[je]))) {
        ++je;
      }
      // Numbers compare by value: by length once leading zeros are dropped, then digits.
      std::string_view na(a.data() + i, ie - i);
      std::string_view nb(b.data() + j, je - j);
      na.remove_prefix(std::min(na.find_first_not_of('0'), na.size()));
      nb.remove_prefix(std::min(nb.find_first_not_of('0'), nb.size()));
      if (na.size() != nb.size()) {
        return na.size() < nb.size();
      }
      if (na != nb) {
        return na < nb;
      }
      i = ie;
      j = je;
      continue;
    }
    if (a[i] != b[j]) {
      return a[i] < b[j];
    }
    ++i;
    ++j;
  }
  return a.size() - i < b.size() - j || (a.size() - i == b.size() - j && a < b);
}

std::map<std::string, std::string> rail_env(const std::vector<json>& rails) {
  std::map<std::string, std::string> env;
  std::vector<std::string> hcas;
  std::vector<std::string> ifnames;
  std::vector<json> roce;
  std::set<std::string> gpudirect;  // a node fact: every rail that has it says the same
  env["RDMANET_RAILS"] = std::to_string(rails.size());
  for (size_t i = 0; i < rails.size(); ++i) {
    const json& rail = rails[i];
    const std::string prefix = "RDMANET_RAIL" + std::to_string(i) + "_";
    const std::string ifname = rail.value("interface", "");
    ifnames.push_back(ifname);
    env[prefix + "IFNAME"] = ifname;
    for (bool v4 : {true, false}) {
      if (auto a = address(rail, v4); a) {
        env[prefix + (v4 ? "ADDRESS" : "ADDRESS_IPV6")] = a->addr.str();
      }
    }
    if (rail.contains("pciAddress")) {
      env[prefix + "PCI"] = rail.value("pciAddress", "");
    }
    if (rail.contains("numaNode")) {
      env[prefix + "NUMA_NODE"] = std::to_string(rail.value("numaNode", -1));
    }
    for (const auto& [field, name] :
         {std::pair{"pcieRoot", "PCIE_ROOT"}, std::pair{"dataDirectPci", "DATA_DIRECT_PCI"}}) {
      if (rail.contains(field) && rail[field].is_string()) {
        env[prefix + name] = rail[field].get<std::string>();
      }
    }
    if (rail.contains("gpuDirectRdma") && rail["gpuDirectRdma"].is_string()) {
      gpudirect.insert(rail["gpuDirectRdma"].get<std::string>());
    }
    if (!rail.contains("rdma")) {
      continue;
    }
    const json& rdma = rail["rdma"];
    const std::string hca = rdma.value("device", "") + ":" + std::to_string(rdma.value("port", 1));
    hcas.push_back(hca);
    env[prefix + "RDMA_DEVICE"] = rdma.value("device", "");
    env[prefix + "PORT"] = std::to_string(rdma.value("port", 1));
    env[prefix + "LINK_LAYER"] = rdma.value("linkLayer", "");
    if (auto index = gid_index(rail, "ipv4"); index) {
      env[prefix + "GID_INDEX"] = std::to_string(*index);
    }
    if (auto index = gid_index(rail, "ipv6"); index) {
      env[prefix + "GID_INDEX_IPV6"] = std::to_string(*index);
      env.try_emplace(prefix + "GID_INDEX", std::to_string(*index));
    }
    if (rdma.contains("trafficClass")) {
      env[prefix + "TC"] = std::to_string(rdma.value("trafficClass", 0));
    }
    if (is_roce(rail)) {
      roce.push_back(rail);
    }
  }
  if (!hcas.empty()) {
    env["NCCL_IB_HCA"] = "=" + join(hcas, ",");
    env["UCX_NET_DEVICES"] = join(hcas, ",");
  }
  if (!ifnames.empty()) {
    env["NCCL_SOCKET_IFNAME"] = "=" + join(ifnames, ",");
  }
  gid_settings(roce, &env);
  traffic_class_settings(roce, &env);
  if (gpudirect.size() == 1) {
    env["RDMANET_GPUDIRECT_RDMA"] = *gpudirect.begin();
  }
  return env;
}

json gid_fields(const json& gid_report, const std::string& ifname) {
  json gids = json::array();
  json indexes = json::object();
  if (gid_report.is_object()) {
    for (const auto& gid : gid_report.value("table", json::array())) {
      if (gid.is_object() && gid.value("netdev", "") == ifname) {
        gids.push_back({{"index", gid.value("index", -1)},
                        {"gid", gid.value("gid", "")},
                        {"type", gid.value("type", "")}});
      }
    }
    for (const auto& e : gid_report.value("addresses", json::array())) {
      if (!e.is_object()) {
        continue;
      }
      auto addr = netns::IpAddress::parse(e.value("address", ""));
      const int index = e.value("index", -1);
      if (addr && index >= 0) {
        indexes.emplace(addr->is_v4() ? "ipv4" : "ipv6", index);
      }
    }
  }
  return {{"gids", gids}, {"gidIndex", indexes}};
}

json pod_document(std::vector<json> rails, const std::string& uid) {
  std::sort(rails.begin(), rails.end(), [](const json& a, const json& b) {
    return ifname_less(a.value("interface", ""), b.value("interface", ""));
  });
  json env = json::object();
  for (const auto& [key, value] : rail_env(rails)) {
    env[key] = value;
  }
  return {{"version", 1}, {"podUID", uid}, {"rails", rails}, {"env", env}};
}

std::string env_file(const json& document, const std::string& prefix) {
  std::string out = "# rdmanet: this pod's RDMA rails (see rails.json)\n";
  const json env = document.value("env", json::object());
  for (const auto& [key, value] : env.items()) {
    if (key.starts_with(prefix)) {
      out += key + "=" + value.get<std::string>() + "\n";
    }
  }
  return out;
}

bool is_pod_uid(const std::string& uid) {
  return !uid.empty() && uid.size() <= 64 && std::all_of(uid.begin(), uid.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-';
  });
}

namespace {

constexpr mode_t kReadableDir = 0755;  // pods read it through a hostPath volume
constexpr mode_t kReadableFile = 0644;
constexpr size_t kMaxEntry = 64 << 10;  // one rail's entry is well under 4 kB
// The names rdmanet writes in <uid>/ (and the temporaries Dir::write makes of them).
constexpr const char* kPodFiles[] = {"rails.json", "rdma.env", "nccl.conf", "ucx.conf"};

std::string entry_name(const RailKey& key) {
  return bounded_name(key.container_id) + "." + hex(key.ifname) + ".json";
}

// Logs what the pod left that rdmanet does not use, or fails on a transient error (which
// says nothing about what is there: the caller fails and a later call looks again).
Status skip(const Error& why) {
  if (is_transient(why)) {
    return why;
  }
  spdlog::warn("pod files: skipped {}", why.msg());
  return ok_status();
}

// The rail entries rdmanet wrote in rails/, newest per interface. Whatever else is there (a
// stray file, a directory, a FIFO, a link, something huge or not a rail) is skipped and
// logged.
Expected<std::vector<json>> read_entries(const Dir& rails) {
  std::map<std::string, std::pair<int64_t, json>> newest;
  TRY_ASSIGN(auto names, rails.entries());
  for (const auto& name : names) {
    if (name[0] == '.' || name.size() <= 5 || name.substr(name.size() - 5) != ".json") {
      if (name.find(".rdmanet-tmp") == std::string::npos) {
        TRY(skip(Error(ErrorKind::kIo, rails.path() + "/" + name + ": not a rail entry's name")));
      }
      continue;
    }
    auto text = rails.read_own(name, kMaxEntry);
    if (!text) {
      TRY(skip(text.error()));
      continue;
    }
    json rail = *text ? parse_json(**text) : json();
    if (!rail.is_object() || !rail.contains("interface") || !rail["interface"].is_string()) {
      TRY(skip(Error(ErrorKind::kIo, rails.path() + "/" + name + ": not a rail entry")));
      continue;
    }
    const int64_t added = rail.value("addedAt", int64_t{0});
    auto& slot = newest[rail["interface"].get<std::string>()];
    if (slot.second.is_null() || added >= slot.first) {
      slot = {added, std::move(rail)};
    }
  }
  std::vector<json> out;
  out.reserve(newest.size());
  for (auto& [ifname, entry] : newest) {
    entry.second.erase("addedAt");
    out.push_back(std::move(entry.second));
  }
  return out;
}

// With no entry left: what rdmanet wrote in the pod's directory goes, then the directory
// itself when nothing else is in it.
Status remove_pod_files(const Dir& root, const Dir& pod, const std::string& uid) {
  for (const char* file : kPodFiles) {
    for (const std::string& name : {std::string(file), "." + std::string(file) + ".rdmanet-tmp"}) {
      if (auto s = pod.remove(name); !s) {
        TRY(skip(s.error()));  // a directory the pod made under the name, say
      }
    }
  }
  pod.remove_empty_dir("rails");
  root.remove_empty_dir(uid);
  return ok_status();
}

// rails.json and rdma.env from the entries in rails/ (none: the pod's files go).
Status regenerate(const Dir& root, const Dir& pod, const Dir& rails, const std::string& uid) {
  TRY_ASSIGN(std::vector<json> entries, read_entries(rails));
  if (entries.empty()) {
    return remove_pod_files(root, pod, uid);
  }
  json doc = pod_document(std::move(entries), uid);
  TRY(pod.write("rails.json", doc.dump(2) + "\n", kReadableFile));
  TRY(pod.write("rdma.env", env_file(doc), kReadableFile));
  TRY(pod.write("nccl.conf", env_file(doc, "NCCL_"), kReadableFile));
  return pod.write("ucx.conf", env_file(doc, "UCX_"), kReadableFile);
}

Expected<Dir> trusted_root(const std::string& path) {
  TRY_ASSIGN(auto root, Dir::open(path));
  if (!root) {
    return Error(ErrorKind::kIo, "podInfoDir " + path + " is not there");
  }
  TRY(check_private_directory(path));
  return std::move(*root);
}

}  // namespace

Status PodInfoStore::check(const std::string& uid) const {
  if (!is_pod_uid(uid)) {
    return Error(ErrorKind::kInvalidEnvironment,
                 "CNI_ARGS K8S_POD_UID " + in_quotes(uid) +
                     " is not a pod UID (1-64 letters, digits and '-')");
  }
  struct stat st {};
  if (::lstat(root_.c_str(), &st) != 0 && errno == ENOENT) {
    return ok_status();  // put creates it
  }
  return check_private_directory(root_).with_context("podInfoDir");
}

Expected<FileLock> PodInfoStore::lock(const std::string& uid) const {
  TRY(make_directories(lock_dir_, 0700));
  return FileLock::acquire_within(lock_dir_ + "/pod-" + uid + ".lock", lock_wait_);
}

Status PodInfoStore::put(const RailKey& key, const json& rail) {
  TRY(check(key.uid));
  TRY(make_directories(root_, kReadableDir));
  TRY_ASSIGN(Dir root, trusted_root(root_));
  TRY_ASSIGN(auto lock, this->lock(key.uid));
  TRY_ASSIGN(Dir pod, root.make_sub(key.uid, kReadableDir));
  TRY_ASSIGN(Dir rails, pod.make_sub("rails", kReadableDir));
  json entry = rail;
  entry["addedAt"] = std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  entry["sandbox"] = key.container_id;
  TRY(rails.write(entry_name(key), entry.dump(2) + "\n", kReadableFile));
  return regenerate(root, pod, rails, key.uid);
}

Status PodInfoStore::remove(const RailKey& key) {
  if (!is_pod_uid(key.uid)) {
    return Error(ErrorKind::kState, "pod-info uid " + in_quotes(key.uid) + " is not a pod UID");
  }
  TRY_ASSIGN(auto root, Dir::open(root_));
  if (!root) {
    return ok_status();  // nothing was ever written
  }
  if (auto trusted = check_private_directory(root_); !trusted) {
    Error why = std::move(trusted).error();
    return skip(why.context("podInfoDir: not touched"));
  }
  TRY_ASSIGN(auto lock, this->lock(key.uid));
  auto pod = root->sub(key.uid);
  if (!pod || !*pod) {
    return pod ? ok_status() : skip(pod.error());
  }
  auto rails = (*pod)->sub("rails");
  if (!rails) {
    return skip(rails.error());
  }
  if (!*rails) {  // an ADD that stopped before its first entry
    return remove_pod_files(*root, **pod, key.uid);
  }
  const std::string entry = entry_name(key);
  for (const std::string& name : {entry, "." + entry + ".rdmanet-tmp"}) {
    if (auto s = (*rails)->remove(name); !s) {
      TRY(skip(s.error()));
    }
  }
  return regenerate(*root, **pod, **rails, key.uid);
}

Expected<std::optional<json>> PodInfoStore::refresh_gids(const RailKey& key, const json& fields) {
  if (!is_pod_uid(key.uid)) {
    return Error(ErrorKind::kState, "pod-info uid " + in_quotes(key.uid) + " is not a pod UID");
  }
  TRY_ASSIGN(auto root, Dir::open(root_));
  if (!root) {
    return std::optional<json>();
  }
  TRY(check_private_directory(root_).with_context("podInfoDir"));
  TRY_ASSIGN(auto lock, this->lock(key.uid));
  TRY_ASSIGN(auto pod, root->sub(key.uid));
  if (!pod) {
    return std::optional<json>();
  }
  TRY_ASSIGN(auto rails, pod->sub("rails"));
  if (!rails) {
    return std::optional<json>();
  }
  const std::string name = entry_name(key);
  TRY_ASSIGN(auto text, rails->read_own(name, kMaxEntry));
  json entry = text ? parse_json(*text) : json();
  if (!entry.is_object() || !entry.contains("rdma") || !entry["rdma"].is_object()) {
    return std::optional<json>();  // gone, or a rail without RDMA: nothing to keep current
  }
  json& rdma = entry["rdma"];
  json before = rdma.value("gidIndex", json::object());
  if (before == fields.value("gidIndex", json::object())) {
    return std::optional<json>();
  }
  rdma.update(fields);
  TRY(rails->write(name, entry.dump(2) + "\n", kReadableFile));
  TRY(regenerate(*root, *pod, *rails, key.uid));
  return std::optional<json>(std::move(before));
}

}  // namespace rdmanet::plugin
