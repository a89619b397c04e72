#include "plugin/pod_info.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <optional>
#include <sstream>

#include "base/file_lock.h"
#include "base/files.h"
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

// NCCL_IB_GID_INDEX when every RoCE rail has the same index; otherwise the address family
// (and range) NCCL then picks each rail's GID by.
void gid_settings(const std::vector<json>& roce, std::map<std::string, std::string>* env) {
  if (roce.empty()) {
    return;
  }
  std::optional<int> common;
  bool same = true;
  for (const auto& rail : roce) {
    auto index = gid_index(rail, "ipv4");
    index = index ? index : gid_index(rail, "ipv6");
    if (!index || (common && *common != *index)) {
      same = false;
      break;
    }
    common = index;
  }
  if (same && common) {
    (*env)["NCCL_IB_GID_INDEX"] = std::to_string(*common);
    return;
  }
  const bool v4 = std::all_of(roce.begin(), roce.end(),
                              [](const json& r) { return gid_index(r, "ipv4").has_value(); });
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
  return env;
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

std::string env_file(const json& document) {
  std::string out = "# rdmanet: this pod's RDMA rails (see rails.json)\n";
  const json env = document.value("env", json::object());
  for (const auto& [key, value] : env.items()) {
    out += key + "=" + value.get<std::string>() + "\n";
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

Status check_pod_uid(const std::string& uid) {
  if (!is_pod_uid(uid)) {
    return Error(ErrorKind::kInvalidEnvironment,
                 "CNI_ARGS K8S_POD_UID " + in_quotes(uid) +
                     " is not a pod UID (1-64 letters, digits and '-')");
  }
  return ok_status();
}

}  // namespace

Status PodInfoStore::put(const std::string& uid, const std::string& ifname, const json& rail) {
  TRY(check_pod_uid(uid));
  TRY(make_directories(root_, kReadableDir));
  TRY(check_private_directory(root_));
  TRY_ASSIGN(auto lock, FileLock::acquire(root_ + "/.lock"));
  const std::string rails = root_ + "/" + uid + "/rails";
  TRY(make_directories(rails, kReadableDir));
  TRY(write_file_atomically(rails + "/" + ifname + ".json", rail.dump(2) + "\n", kReadableFile));
  return regenerate(uid);
}

Status PodInfoStore::remove(const std::string& uid, const std::string& ifname) {
  TRY(check_pod_uid(uid));
  struct stat st {};
  if (::lstat(root_.c_str(), &st) != 0 && errno == ENOENT) {
    return ok_status();  // nothing was ever written
  }
  TRY(check_private_directory(root_));
  TRY_ASSIGN(auto lock, FileLock::acquire(root_ + "/.lock"));
  const std::string file = root_ + "/" + uid + "/rails/" + ifname + ".json";
  if (::unlink(file.c_str()) != 0 && errno != ENOENT) {
    return Error(ErrorKind::kIo, "remove " + file + ": " + std::strerror(errno));
  }
  return regenerate(uid);
}

Status PodInfoStore::regenerate(const std::string& uid) {
  const std::string dir = root_ + "/" + uid;
  TRY_ASSIGN(auto names, directory_entries(dir + "/rails"));
  std::vector<json> rails;
  for (const auto& name : names) {
    if (name.size() <= 5 || name.substr(name.size() - 5) != ".json") {
      continue;  // a temporary of a write that failed
    }
    TRY_ASSIGN(auto text, read_file(dir + "/rails/" + name));
    if (!text) {
      continue;
    }
    json rail = parse_json(*text);
    if (!rail.is_object()) {
      return Error(ErrorKind::kState, dir + "/rails/" + name + " is not a rail entry");
    }
    rails.push_back(std::move(rail));
  }
  if (rails.empty()) {
    // The pod's last rail: its directory goes.
    for (const char* file : {"/rails.json", "/rdma.env", "/rails.json.tmp", "/rdma.env.tmp"}) {
      ::unlink((dir + file).c_str());
    }
    for (const auto& name : names) {
      ::unlink((dir + "/rails/" + name).c_str());
    }
    ::rmdir((dir + "/rails").c_str());
    if (::rmdir(dir.c_str()) != 0 && errno != ENOENT) {
      return Error(ErrorKind::kIo, "remove " + dir + ": " + std::strerror(errno));
    }
    return ok_status();
  }
  json doc = pod_document(std::move(rails), uid);
  TRY(write_file_atomically(dir + "/rails.json", doc.dump(2) + "\n", kReadableFile));
  return write_file_atomically(dir + "/rdma.env", env_file(doc), kReadableFile);
}

}  // namespace rdmanet::plugin
