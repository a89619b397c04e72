#include "plugin/teardown.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "cni/device_info.h"
#include "cni/error_code.h"
#include "netns/link.h"
#include "netns/netns.h"
#include "netns/sysfs.h"
#include "netns/vf.h"
#include "plugin/attach.h"
#include "plugin/rdma_attach.h"

namespace rdmanet::plugin {

using netns::in_netns;
using netns::Netns;
using netns::Rtnl;

namespace {

// The name a device comes home under when its own name is taken in the host.
std::string fallback_name(const AttachmentState& state) {
  return "rdmanet" + std::to_string(state.device.index);
}

// MACs the device may have: its own, or the one ADD gave it.
bool has_our_mac(const netns::LinkInfo& link, const AttachmentState& state) {
  std::string mac = link.hwaddr.str();
  if (mac == state.device.mac) {
    return true;
  }
  const auto& ifaces = state.result.is_object() ? state.result.value("interfaces", nlohmann::json())
                                                : nlohmann::json();
  for (const auto& iface : ifaces) {
    if (iface.value("name", "") == state.ifname && iface.value("mac", "") == mac) {
      return true;
    }
  }
  return false;
}

// Our device in the pod netns. By index first (kept across moves unless taken
// in the target), accepting only the names it can have there; a failed ADD
// may have left it under its host name. Never just "whatever is called
// net1": that could be another device of the pod.
std::optional<netns::LinkInfo> find_in_pod(Rtnl& rtnl, const AttachmentState& state) {
  if (auto link = netns::find_link_by_index(rtnl, state.device.index);
      link && (link->name == state.ifname || link->name == state.device.name)) {
    return *link;
  }
  for (const std::string& name : {state.device.name, state.ifname}) {
    if (auto link = netns::find_link_by_name(rtnl, name); link && has_our_mac(*link, state)) {
      return *link;
    }
  }
  return std::nullopt;
}

// Our device in the host netns, under any name it can have come back with.
std::optional<netns::LinkInfo> find_in_host(Rtnl& rtnl, const AttachmentState& state) {
  const std::string names[] = {state.device.name, state.ifname, fallback_name(state)};
  if (auto link = netns::find_link_by_index(rtnl, state.device.index); link) {
    bool named = std::find(std::begin(names), std::end(names), link->name) != std::end(names);
    if (named && (link->name == state.device.name || has_our_mac(*link, state))) {
      return *link;
    }
  }
  for (const auto& name : names) {
    if (auto link = netns::find_link_by_name(rtnl, name); link && has_our_mac(*link, state)) {
      return *link;
    }
  }
  return std::nullopt;
}

// Moves our device from the pod to the host, preferring its original name.
// The kernel moves a link under its current name when that is free in the
// target and renames it afterwards, so a failed rename can leave it in the
// host under its pod name: the caller finds it there either way.
Status move_home(const AttachmentState& state, const Netns& pod, const Netns& host) {
  return in_netns(pod, [&]() -> Status {
    auto rtnl = Rtnl::open();
    if (!rtnl) {
      return std::move(rtnl).error();
    }
    auto link = find_in_pod(*rtnl, state);
    if (!link) {
      return ok_status();  // not in the pod (any more)
    }
    if (auto s = netns::set_link_down(*rtnl, *link); !s) {
      return s;
    }
    auto s = netns::move_link(*rtnl, *link, host, state.device.name);
    if (s) {
      return s;
    }
    spdlog::warn("return {} as {}: {}", link->name, state.device.name, s.error().msg());
    auto still = find_in_pod(*rtnl, state);
    if (!still) {
      return ok_status();  // it moved; only the rename failed
    }
    // Both its names are taken in the host: come home under the fallback.
    return netns::move_link(*rtnl, *still, host, fallback_name(state));
  });
}

// Puts a netdev-mode device back: out of the pod netns if it still exists
// (a dead pod netns hands physical devices back to the host by itself), then
// restores name, MTU, MAC, alias and altnames in the host.
Status return_device(const AttachmentState& state, const std::optional<Netns>& pod,
                     const Netns& host) {
  if (pod) {
    if (auto s = move_home(state, *pod, host); !s) {
      return s;
    }
  }
  auto rtnl = Rtnl::open();
  if (!rtnl) {
    return std::move(rtnl).error();
  }
  auto link = find_in_host(*rtnl, state);
  if (!link) {
    spdlog::info("device {} (index {}) is not in the host; nothing to restore", state.device.name,
                 state.device.index);
    return ok_status();
  }
  if (link->up()) {
    if (auto s = netns::set_link_down(*rtnl, *link); !s) {
      return s;
    }
  }
  if (link->name != state.device.name) {
    if (auto s = netns::rename_link(*rtnl, *link, state.device.name); s) {
      link->name = state.device.name;
    } else if (link->name != fallback_name(state)) {
      spdlog::warn("rename {} back to {}: {}; using {}", link->name, state.device.name,
                   s.error().msg(), fallback_name(state));
      if (auto f = netns::rename_link(*rtnl, *link, fallback_name(state)); f) {
        link->name = fallback_name(state);
      }
    }
  }
  if (state.device.mtu != 0 && link->mtu != state.device.mtu) {
    if (auto s = netns::set_link_mtu(*rtnl, *link, state.device.mtu); !s) {
      return s;
    }
  }
  if (auto mac = netns::HwAddress::parse(state.device.mac); mac && link->hwaddr != *mac) {
    if (auto s = netns::set_link_hwaddr(*rtnl, *link, *mac); !s) {
      return s;
    }
  }
  if (link->alias != state.device.alias) {
    if (auto s = netns::set_link_alias(*rtnl, *link, state.device.alias); !s) {
      return s;
    }
  }
  for (const auto& altname : state.device.altnames) {
    if (std::find(link->altnames.begin(), link->altnames.end(), altname) != link->altnames.end()) {
      continue;
    }
    if (auto s = netns::add_link_altname(*rtnl, *link, altname); !s) {
      // Someone took the name meanwhile; the device works without it.
      spdlog::warn("restore altname {} on {}: {}", altname, link->name, s.error().msg());
    }
  }
  if (state.device.up) {
    return netns::set_link_up(*rtnl, *link);
  }
  return ok_status();
}

// Puts back the VF settings ADD changed through the PF. The PF's name is
// resolved again from its PCI address: names can change across reboots.
Status restore_vf(StateStore& store, const VfRecord& vf) {
  auto lock = store.lock_device("pf-" + vf.pf_pci);
  if (!lock) {
    return std::move(lock).error();
  }
  std::string pf_name = vf.pf_name;
  if (auto current = netns::Sysfs(vf.sysfs_root).pci_netdev(vf.pf_pci); current) {
    pf_name = *current;
  }
  auto rtnl = Rtnl::open();
  if (!rtnl) {
    return std::move(rtnl).error();
  }
  auto pf = netns::find_link_by_name(*rtnl, pf_name);
  if (!pf) {
    spdlog::warn("PF {} ({}) is gone; VF {} settings not restored", pf_name, vf.pf_pci, vf.index);
    return ok_status();
  }
  return netns::set_vf(*rtnl, *pf, vf.index, vf.original.as_config());
}

Status remove_macvlan(const AttachmentState& state, const std::optional<Netns>& pod) {
  if (!pod) {
    return ok_status();  // the child died with the netns
  }
  return in_netns(*pod, [&]() -> Status {
    auto rtnl = Rtnl::open();
    if (!rtnl) {
      return std::move(rtnl).error();
    }
    auto link = netns::find_link_by_name(*rtnl, state.ifname);
    if (!link || link->kind != "macvlan") {
      return ok_status();
    }
    return netns::delete_link(*rtnl, *link);
  });
}

// Errors that say the IPAM plugin cannot hold anything for this config: it
// is not installed, or it rejects the config itself.
bool permanent_config_error(const Error& error) {
  if (error.kind() == ErrorKind::kPluginNotFound) {
    return true;
  }
  int code = cni::error_code(error);
  return code == 1 || code == 2 || code == 4 || code == 6 || code == 7;
}

Status release_ipam(const AttachmentState& state, const cni::Environment& env, int timeout) {
  auto conf = cni::parse_netconf(state.config);
  if (!conf || conf->ipam_type.empty()) {
    return ok_status();
  }
  cni::Environment ipam_env = env;
  ipam_env.container_id = state.container_id;
  ipam_env.ifname = state.ifname;
  ipam_env.netns = state.netns;
  return ipam_del(conf->ipam_type, ipam_env, state.config, timeout);
}

}  // namespace

Status ipam_del(const std::string& type, const cni::Environment& env, const std::string& config,
                int timeout) {
  auto s = cni::delegate_command(type, cni::Command::kDel, env, config, ipam_options(timeout));
  if (!s && permanent_config_error(s.error())) {
    // The IPAM plugin is not installed or rejects this config outright, so it
    // cannot hold an address for it either; failing would only loop DEL forever.
    spdlog::warn("IPAM DEL cannot hold anything for this config: {}", s.error().msg());
    return ok_status();
  }
  return s;
}

Status teardown(StateStore& store, const AttachmentState& state, const cni::Environment& env,
                int ipam_timeout) {
  auto host = Netns::current();
  if (!host) {
    return std::move(host).error();
  }
  std::optional<Netns> pod;
  if (auto opened = open_pod_netns(state); opened) {
    pod = std::move(*opened);
  } else {
    spdlog::info("pod netns {} unusable ({}); treating it as gone", state.netns,
                 opened.error().msg());
  }
  if (!state.device_info_file.empty()) {
    if (auto s = cni::remove_device_info(state.device_info_file); !s) {
      spdlog::warn("CNIDeviceInfoFile: {}", s.error().msg());  // Multus removes it too
    }
  }
  // The RDMA device first: it leaves the pod before the netdev it belongs to.
  Status device = rdma_teardown(store, state, pod, *host);
  if (device) {
    device =
        state.mode == "macvlan" ? remove_macvlan(state, pod) : return_device(state, pod, *host);
  }
  if (device && state.vf) {
    device = restore_vf(store, *state.vf);
  }
  Status ipam = release_ipam(state, env, ipam_timeout);
  if (!device) {
    return std::move(device).error();
  }
  if (!ipam) {
    return std::move(ipam).error();
  }
  if (state.mode == "netdev") {
    if (auto s = store.clear_holder(state.device.key, state); !s) {
      return s;
    }
  }
  return store.remove(state);
}

Status claim_device(StateStore& store, const std::string& key, const AttachmentState& me,
                    const cni::Environment& env, int ipam_timeout, bool* reclaimed) {
  auto holder = store.holder(key);
  if (!holder) {
    return std::move(holder).error();
  }
  if (!holder->has_value()) {
    return ok_status();
  }
  const AttachmentState& other = **holder;
  if (other.phase == "gone") {
    return store.clear_holder(key, other);
  }
  if (other.network == me.network && other.container_id == me.container_id &&
      other.ifname == me.ifname) {
    return ok_status();
  }
  auto ns = open_pod_netns(other);
  if (ns && ns->has_value()) {
    return Error(ErrorKind::kDeviceBusy, "device " + me.device.key + " is held by container " +
                                             other.container_id + " (ifname " + other.ifname +
                                             ", network " + other.network + ", netns " +
                                             other.netns + ")");
  }
  spdlog::warn("reclaiming device {} from container {}: its netns {} is gone", key,
               other.container_id, other.netns);
  if (reclaimed != nullptr) {
    *reclaimed = true;
  }
  return teardown(store, other, env, ipam_timeout);
}

}  // namespace rdmanet::plugin
