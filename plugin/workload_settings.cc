#include "plugin/workload_settings.h"

#include <algorithm>
#include <cctype>
#include <set>

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

std::string rdma_device(const json& rail) {
  return rail.value("rdma", json::object()).value("device", "");
}

// Whether UCX's ud_verbs transport, before 1.18, takes this rail's UD packets over RoCE v2
// and IPv4: it reads their GID length from the completion's sl, where only mlx5's provider
// puts the RoCE packet type (openucx/ucx PR #10209 reads the GRH instead). Other drivers
// (rxe, irdma, older bnxt_re and hns providers) leave sl 0, which UCX takes for an IPv6 GID:
// every UD packet, and so UCX's wire-up, is dropped. A rail of unknown driver counts as
// such.
bool ud_completion_has_packet_type(const json& rail) {
  return rail.value("rdma", json::object()).value("driver", "").starts_with("mlx5");
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

// UCX_UD_VERBS_ETH_DGID_CHECK=n where a RoCE rail's driver does not report the packet type
// (above): UCX takes one setting for all devices, and on mlx5 it costs only a filter.
void ud_settings(const std::vector<json>& roce, std::map<std::string, std::string>* env) {
  if (!std::all_of(roce.begin(), roce.end(), ud_completion_has_packet_type)) {
    (*env)["UCX_UD_VERBS_ETH_DGID_CHECK"] = "n";
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
    if (rail.contains("state") && rail["state"].is_string()) {
      env[prefix + "STATE"] = rail["state"].get<std::string>();  // "up", or "down" at ADD
    }
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
  ud_settings(roce, &env);
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

std::vector<std::string> ucx_notes(const json& document) {
  std::vector<std::string> notes;
  std::vector<std::string> without_type;
  for (const auto& rail : document.value("rails", json::array())) {
    const std::string device = rdma_device(rail);
    if (device.empty()) {
      continue;
    }
    if (device.size() > kUcxDeviceNameMax) {
      notes.push_back("UCX cannot open RDMA device " + device + " (rail " +
                      rail.value("interface", "") + "): its name has " +
                      std::to_string(device.size()) + " characters, UCX takes at most " +
                      std::to_string(kUcxDeviceNameMax) + " (UCT_MD_NAME_MAX)");
    }
    if (is_roce(rail) && !ud_completion_has_packet_type(rail)) {
      const std::string driver = rail["rdma"].value("driver", "");
      without_type.push_back(device + " (" + (driver.empty() ? "driver unknown" : driver) + ")");
    }
  }
  if (!without_type.empty()) {
    notes.push_back("UCX_UD_VERBS_ETH_DGID_CHECK=n: " + join(without_type, ", ") +
                    " report no RoCE packet type in UD completions; UCX before 1.18 drops "
                    "their UD packets over IPv4, and its wire-up with them (openucx/ucx PR "
                    "#10209)");
  }
  return notes;
}

std::string env_file(const json& document, const std::string& prefix,
                     const std::vector<std::string>& notes) {
  std::string out = "# rdmanet: this pod's RDMA rails (see rails.json)\n";
  for (const auto& note : notes) {
    out += "# " + note + "\n";
  }
  const json env = document.value("env", json::object());
  for (const auto& [key, value] : env.items()) {
    if (key.starts_with(prefix)) {
      out += key + "=" + value.get<std::string>() + "\n";
    }
  }
  return out;
}

}  // namespace rdmanet::plugin
