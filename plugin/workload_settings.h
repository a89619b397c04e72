// What NCCL and UCX need to use a pod's rails, derived from the rails' entries (one source:
// plugin/steps/pod_info.h writes them, the node agent keeps their GIDs current), and how
// the pod's files render it: rails.json, rdma.env, nccl.conf, ucx.conf (plugin/pod_files.h
// keeps them). The policy (README "Multi-rail pods"): NCCL's GID is chosen by address where
// every rail's device is the pod's own, by index where a device is shared; one traffic class
// where every RoCE rail agrees; what no NCCL-wide setting covers is per rail.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace rdmanet::plugin {

// UCX keeps an RDMA device's name in 16 bytes (UCT_MD_NAME_MAX in uct_def.h) and finds no
// device by a truncated name: a longer name leaves UCX without that rail. (NCCL takes 63.)
constexpr size_t kUcxDeviceNameMax = 15;

// Interface names in the order users number rails: net2 before net10.
bool ifname_less(const std::string& a, const std::string& b);

// The settings NCCL and UCX need for these rails (each a rails/<ifname>.json entry), in
// rail order: NCCL_IB_HCA ("=dev:port,..."); NCCL_IB_ADDR_FAMILY (and NCCL_IB_ADDR_RANGE
// when one subnet holds every rail) so NCCL picks each rail's GID itself, or, where a
// rail's device is shared with other pods, NCCL_IB_GID_INDEX when every rail has the same
// RoCE v2 GID index; NCCL_IB_TC and UCX_IB_TRAFFIC_CLASS (NCCL_IB_FIFO_TC for the control
// class) when every RoCE rail has the same traffic class; NCCL_SOCKET_IFNAME,
// UCX_NET_DEVICES; UCX_UD_VERBS_ETH_DGID_CHECK=n when a RoCE rail's driver is not mlx5 (its
// UD completions carry no packet type: see ucx_notes); and RDMANET_RAILS with
// RDMANET_RAIL<i>_* per rail (_TC its class, _STATE "up" or "down": usable when ADD answered).
std::map<std::string, std::string> rail_env(const std::vector<nlohmann::json>& rails);

// A rail entry's GID fields from a GID report (rdma::GidReport::to_json()): "gids", the
// table's entries of the pod interface `ifname` ({index, gid, type}), and "gidIndex", the
// RoCE v2 GID index of the rail's first address of each family ({"ipv4": 3}).
nlohmann::json gid_fields(const nlohmann::json& gid_report, const std::string& ifname);

// rails.json's content: {"version", "podUID", "rails": [...], "env": {...}}.
nlohmann::json pod_document(std::vector<nlohmann::json> rails, const std::string& uid);

// rdma.env's content: "KEY=value" lines, sorted; values are names and numbers, never
// quoted text. With a prefix, only the keys that start with it: nccl.conf ("NCCL_", the
// file NCCL_CONF_FILE names; NCCL reads KEY=VALUE lines and lets the environment win) and
// ucx.conf ("UCX_", read from $UCX_CONFIG_DIR/ucx.conf; the environment wins there too).
// Each note is a comment line after the header.
std::string env_file(const nlohmann::json& document, const std::string& prefix = "",
                     const std::vector<std::string>& notes = {});

// What ucx.conf says about its settings for these rails: a device UCX cannot open (a name
// over 15 characters: UCT_MD_NAME_MAX), and why UCX_UD_VERBS_ETH_DGID_CHECK is off (rails
// whose driver reports no RoCE packet type in UD completions). Also logged by ADD.
std::vector<std::string> ucx_notes(const nlohmann::json& document);

}  // namespace rdmanet::plugin
