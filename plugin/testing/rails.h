// Rail entries as plugin/steps/pod_info.cc writes them, for the tests of the pod's files
// and of the NCCL/UCX settings derived from them.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace rdmanet::testutil {

using nlohmann::json;

// A RoCE rail as write_pod_info makes it: its own RDMA device (a VF, say), no traffic class.
inline json roce_rail(const std::string& ifname, const std::string& device,
                      const std::string& address, int v4_index,
                      std::optional<int> v6_index = std::nullopt) {
  json rail = {{"interface", ifname},
               {"network", "rail"},
               {"addresses", {address}},
               {"pciAddress", "0000:3b:00.2"},
               {"numaNode", 1},
               {"rdma",
                {{"device", device},
                 {"driver", "mlx5_ib"},
                 {"port", 1},
                 {"linkLayer", "Ethernet"},
                 {"gids", json::array()},
                 {"gidIndex", {{"ipv4", v4_index}}},
                 {"sharedDevice", false}}}};
  if (v6_index) {
    rail["addresses"].push_back("fd00:56::2/64");
    rail["rdma"]["gidIndex"]["ipv6"] = *v6_index;
  }
  return rail;
}

// A macvlan child of the node's HCA: other pods' GIDs share the table.
inline json shared_rail(const std::string& ifname, const std::string& device,
                        const std::string& address, int v4_index) {
  json rail = roce_rail(ifname, device, address, v4_index);
  rail["rdma"]["sharedDevice"] = true;
  return rail;
}

inline json with_driver(json rail, const std::string& driver) {
  rail["rdma"]["driver"] = driver;
  return rail;
}

inline json with_class(json rail, int tc) {
  rail["rdma"]["trafficClass"] = tc;
  rail["rdma"]["trafficClassFrom"] = "roce.tos";
  return rail;
}

}  // namespace rdmanet::testutil
