#include "cni/plugin/commands.h"

#include <linux/rtnetlink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "cni/delegate.h"
#include "cni/json_fields.h"
#include "cni/plugin/conf.h"
#include "cni/plugin/device.h"
#include "cni/plugin/state.h"
#include "netns/address.h"
#include "netns/announce.h"
#include "netns/netns.h"
#include "netns/route.h"
#include "netns/sysctl.h"

namespace rdmanet::plugin {

namespace {

using netns::in_netns;
using netns::Netns;
using netns::Rtnl;

const char* mode_name(Mode mode) { return mode == Mode::kNetdev ? "netdev" : "macvlan"; }

cni::DelegateOptions ipam_options(int seconds) {
  return cni::DelegateOptions{std::chrono::milliseconds(seconds * 1000LL)};
}

// The state dir of a config, read leniently: DEL and GC must work even when
// the rest of the config no longer loads.
std::string state_dir_of(const cni::NetConf& net) {
  std::string dir = "/var/lib/cni/rdmanet";
  (void)cni::Fields(net.raw, "", ErrorKind::kInvalidConfig).string("stateDir", &dir);
  return dir.empty() || dir[0] != '/' ? "/var/lib/cni/rdmanet" : dir;
}

int ipam_timeout_of(const cni::NetConf& net) {
  int seconds = 60;
  (void)cni::Fields(net.raw, "", ErrorKind::kInvalidConfig).integer("ipamTimeout", &seconds);
  return std::clamp(seconds, 1, 600);
}

// --- pod-side configuration --------------------------------------------------

Status apply_sysctls(const std::string& ifname) {
  // Several rails of one pod share a subnet: answer ARP only for the
  // interface's own addresses, source ARP from the right interface, and accept
  // replies arriving on another rail (loose reverse-path filter).
  static const std::pair<const char*, const char*> settings[] = {
      {"arp_ignore", "1"}, {"arp_announce", "2"}, {"rp_filter", "2"}};
  for (const auto& [setting, value] : settings) {
    auto key = netns::ipv4_conf_key(ifname, setting);
    if (!key) {
      return std::move(key).error();
    }
    if (auto old = netns::write_sysctl(*key, value); !old) {
      return std::move(old).error();
    }
  }
  return ok_status();
}

// Inside the pod netns: MTU, MAC, sysctls, up, addresses, routes, announce.
Expected<netns::LinkInfo> configure_pod_interface(const PluginConf& conf, const std::string& ifname,
                                                  const cni::Result& ipam) {
  auto rtnl = Rtnl::open();
  if (!rtnl) {
    return std::move(rtnl).error();
  }
  auto link = netns::find_link_by_name(*rtnl, ifname);
  if (!link) {
    return std::move(link).error();
  }
  if (conf.mtu && link->mtu != *conf.mtu) {
    if (auto s = netns::set_link_mtu(*rtnl, *link, *conf.mtu); !s) {
      return std::move(s).error();
    }
  }
  if (conf.mode == Mode::kNetdev && conf.mac && link->hwaddr != *conf.mac) {
    if (auto s = netns::set_link_hwaddr(*rtnl, *link, *conf.mac); !s) {
      return std::move(s).error();
    }
  }
  if (conf.multi_rail_sysctls) {
    if (auto s = apply_sysctls(ifname); !s) {
      return std::move(s).error();
    }
  }
  if (auto s = netns::set_link_up(*rtnl, *link); !s) {
    return std::move(s).error();
  }
  std::vector<netns::IpAddress> announce;
  for (const auto& ip : ipam.ips) {
    auto prefix = netns::IpPrefix::parse(ip.address);
    if (!prefix) {
      return Error(ErrorKind::kDelegate, "IPAM address: " + prefix.error().msg());
    }
    if (auto s = netns::add_address(*rtnl, *link, *prefix, {.no_dad = true}); !s) {
      return std::move(s).error();
    }
    announce.push_back(prefix->addr);
  }
  for (const auto& r : ipam.routes) {
    netns::Route route;
    auto dst = netns::IpPrefix::parse(r.dst);
    if (!dst) {
      return Error(ErrorKind::kDelegate, "IPAM route: " + dst.error().msg());
    }
    route.dst = *dst;
    route.ifindex = link->index;
    if (!r.gw.empty()) {
      auto gw = netns::IpAddress::parse(r.gw);
      if (!gw) {
        return Error(ErrorKind::kDelegate, "IPAM route gateway: " + gw.error().msg());
      }
      route.gateway = *gw;
    }
    if (r.priority > 0) {
      route.metric = static_cast<uint32_t>(r.priority);
    }
    if (r.mtu > 0) {
      route.mtu = static_cast<uint32_t>(r.mtu);
    }
    if (r.table) {
      route.table = static_cast<uint32_t>(*r.table);
    }
    if (auto s = netns::add_route(*rtnl, route); !s) {
      return std::move(s).error();
    }
  }
  auto fresh = netns::find_link_by_index(*rtnl, link->index);
  if (!fresh) {
    return std::move(fresh).error();
  }
  for (const auto& addr : announce) {
    // Best effort: a lost announcement only delays neighbours' cache updates.
    if (auto s = netns::announce_address(*fresh, addr); !s) {
      spdlog::warn("announce {} on {}: {}", addr.str(), ifname, s.error().msg());
    }
  }
  return fresh;
}

// --- teardown: the inverse of every ADD step -----------------------------------

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
  int code = cni_code(error);
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
  auto s = cni::delegate_command(conf->ipam_type, cni::Command::kDel, ipam_env, state.config,
                                 ipam_options(timeout));
  if (!s && permanent_config_error(s.error())) {
    // The IPAM plugin rejects this config outright, so it cannot hold an
    // address for it either; failing here would only loop DEL forever.
    spdlog::warn("IPAM DEL cannot hold anything for this config: {}", s.error().msg());
    return ok_status();
  }
  return s;
}

// Undoes whatever of an attachment exists; safe to repeat. Keeps the state
// when something could not be undone, so the next DEL tries again.
Status teardown(StateStore& store, const AttachmentState& state, const cni::Environment& env,
                int ipam_timeout) {
  auto host = Netns::current();
  if (!host) {
    return std::move(host).error();
  }
  std::optional<Netns> pod;
  if (!state.netns.empty()) {
    auto opened = Netns::open_if_exists(state.netns);
    if (opened) {
      pod = std::move(*opened);
    } else {
      spdlog::info("pod netns {} unusable ({}); treating it as gone", state.netns,
                   opened.error().msg());
    }
  }
  Status device =
      state.mode == "macvlan" ? remove_macvlan(state, pod) : return_device(state, pod, *host);
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

// A device held by another attachment: busy while its pod netns lives;
// reclaimed when it is gone (missed DEL, node reboot).
Status claim_device(StateStore& store, const std::string& key, const AttachmentState& me,
                    const cni::Environment& env, int ipam_timeout) {
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
  auto ns = Netns::open_if_exists(other.netns);
  if (ns && ns->has_value()) {
    return Error(ErrorKind::kDeviceBusy, "device " + me.device.key + " is held by container " +
                                             other.container_id + " (ifname " + other.ifname +
                                             ", network " + other.network + ", netns " +
                                             other.netns + ")");
  }
  spdlog::warn("reclaiming device {} from container {}: its netns {} is gone", key,
               other.container_id, other.netns);
  return teardown(store, other, env, ipam_timeout);
}

cni::Result build_result(const PluginConf& conf, const cni::Environment& env,
                         const netns::LinkInfo& link, const cni::Result& ipam) {
  cni::Result result;
  if (conf.net.prev_result) {
    result = *conf.net.prev_result;
  }
  cni::Interface iface;
  iface.name = link.name;
  iface.mac = link.hwaddr.str();
  iface.mtu = static_cast<int>(link.mtu);
  iface.sandbox = env.netns;
  result.interfaces.push_back(iface);
  int index = static_cast<int>(result.interfaces.size()) - 1;
  for (auto ip : ipam.ips) {
    ip.interface = index;
    result.ips.push_back(ip);
  }
  for (const auto& r : ipam.routes) {
    result.routes.push_back(r);
  }
  if (!conf.net.dns.empty()) {
    result.dns = conf.net.dns;
  } else if (!ipam.dns.empty()) {
    result.dns = ipam.dns;
  }
  return result;
}

// SR-IOV: records the VF's settings in the state, then applies the config's
// through the PF, under the PF's lock (one PF, many VFs, many pods).
Status configure_vf(StateStore& store, const PluginConf& conf, const HostDevice& dev,
                    Rtnl& host_rtnl, AttachmentState* state) {
  netns::VfConfig cfg = conf.vf;
  if (conf.mac && dev.vf) {
    cfg.mac = conf.mac;  // the PF's admin MAC, so the VF keeps it after driver resets
  }
  if (cfg.empty()) {
    return ok_status();
  }
  if (!dev.vf) {
    return Error(ErrorKind::kInvalidConfig,
                 conf.vf_field + ": device " + dev.link.name +
                     " is not an SR-IOV VF (select a VF by its PCI address)");
  }
  auto lock = store.lock_device("pf-" + dev.vf->pf_pci);
  if (!lock) {
    return std::move(lock).error();
  }
  auto pf = netns::find_link_by_name(host_rtnl, dev.pf_name);
  if (!pf) {
    return std::move(pf).error();
  }
  auto original = netns::read_vf(host_rtnl, pf->index, pf->name, dev.vf->index);
  if (!original) {
    return std::move(original).error();
  }
  state->vf = VfRecord{dev.vf->pf_pci, pf->name, conf.sysfs_root, dev.vf->index, *original};
  if (auto s = store.save(*state); !s) {
    return s;
  }
  return netns::set_vf(host_rtnl, *pf, dev.vf->index, cfg);
}

Expected<cni::Result> attach(const PluginConf& conf, const cni::Call& call, const Netns& pod,
                             const HostDevice& dev, Rtnl& host_rtnl) {
  const std::string& ifname = call.env.ifname;
  if (conf.mode == Mode::kNetdev) {
    if (auto s = netns::set_link_down(host_rtnl, dev.link); !s) {
      return std::move(s).error();
    }
    // Altnames travel with a link and block the move when the target has a
    // link of that name; they are the host's names anyway. DEL restores them.
    for (const auto& altname : dev.link.altnames) {
      if (auto s = netns::delete_link_altname(host_rtnl, dev.link, altname); !s) {
        return std::move(s).error();
      }
    }
    // One request moves and renames, so the pod's names never clash with the
    // device's host name or altnames.
    if (auto s = netns::move_link(host_rtnl, dev.link, pod, ifname); !s) {
      return std::move(s).error();
    }
  } else {
    netns::MacvlanSpec spec;
    spec.name = ifname;
    spec.parent_index = dev.link.index;
    spec.mode = conf.macvlan_mode;
    spec.target = &pod;
    spec.hwaddr = conf.mac;
    spec.mtu = conf.mtu;
    if (auto s = netns::create_macvlan(host_rtnl, spec); !s) {
      Error e = std::move(s).error();
      return e.context("macvlan child of " + dev.link.name);
    }
  }
  cni::Result ipam;
  if (!conf.net.ipam_type.empty()) {
    auto r = cni::delegate_add(conf.net.ipam_type, call.env, call.stdin_text, conf.net.cni_version,
                               ipam_options(conf.ipam_timeout_seconds));
    if (!r) {
      return std::move(r).error();
    }
    ipam = std::move(*r);
  }
  auto link = in_netns(pod, [&] { return configure_pod_interface(conf, ifname, ipam); });
  if (!link) {
    return std::move(link).error();
  }
  return build_result(conf, call.env, *link, ipam);
}

}  // namespace

Expected<cni::Result> cmd_add(const cni::Call& call) {
  auto conf = load_conf(call.conf, call.args);
  if (!conf) {
    return std::move(conf).error();
  }
  auto pod = Netns::open(call.env.netns);
  if (!pod) {
    return std::move(pod).error();
  }
  auto host = Netns::current();
  if (!host) {
    return std::move(host).error();
  }
  if (pod->same_as(*host)) {
    return Error(ErrorKind::kInvalidEnvironment,
                 "CNI_NETNS " + call.env.netns + " is the plugin's own (host) netns");
  }
  StateStore store(conf->state_dir);
  const std::string key = device_key(conf->device);

  AttachmentState state;
  state.network = conf->net.name;
  state.container_id = call.env.container_id;
  state.ifname = call.env.ifname;
  state.netns = call.env.netns;
  state.mode = mode_name(conf->mode);
  state.phase = "adding";
  state.config = call.stdin_text;
  state.device.key = key;

  auto lock = store.lock_device(key);
  if (!lock) {
    return std::move(lock).error();
  }
  // A previous ADD of this very attachment (crashed, or repeated without
  // DEL) is undone first, so its device and addresses are not leaked.
  auto previous = store.load(state.network, state.container_id, state.ifname);
  if (!previous) {
    return std::move(previous).error();
  }
  if (previous->has_value()) {
    spdlog::warn("attachment exists (phase {}); undoing it before the new ADD", (*previous)->phase);
    if (auto s = teardown(store, **previous, call.env, conf->ipam_timeout_seconds); !s) {
      return std::move(s).error();
    }
  }
  if (conf->mode == Mode::kNetdev) {
    if (auto s = claim_device(store, key, state, call.env, conf->ipam_timeout_seconds); !s) {
      return std::move(s).error();
    }
  }

  auto host_rtnl = Rtnl::open();
  if (!host_rtnl) {
    return std::move(host_rtnl).error();
  }
  netns::Sysfs sysfs(conf->sysfs_root);
  auto dev = resolve_device(conf->device, sysfs, *host_rtnl);
  if (!dev) {
    return std::move(dev).error();
  }
  state.device.name = dev->link.name;
  state.device.index = dev->link.index;
  state.device.mac = dev->link.hwaddr.str();
  state.device.mtu = dev->link.mtu;
  state.device.alias = dev->link.alias;
  state.device.altnames = dev->link.altnames;
  state.device.pci = dev->pci;

  // The state is on disk before the node changes, so a crash at any later
  // point leaves DEL everything it needs.
  if (auto s = store.save(state); !s) {
    return std::move(s).error();
  }
  if (conf->mode == Mode::kNetdev) {
    if (auto s = store.set_holder(key, state); !s) {
      (void)store.remove(state);
      return std::move(s).error();
    }
  }

  if (auto s = configure_vf(store, *conf, *dev, *host_rtnl, &state); !s) {
    Error error = std::move(s).error();
    if (auto undo = teardown(store, state, call.env, conf->ipam_timeout_seconds); !undo) {
      error.context("rollback incomplete (" + undo.error().msg() + ")");
    }
    return error;
  }
  auto result = attach(*conf, call, *pod, *dev, *host_rtnl);
  if (!result) {
    Error error = std::move(result).error();
    spdlog::error("ADD failed, rolling back: {}", error.msg());
    if (auto s = teardown(store, state, call.env, conf->ipam_timeout_seconds); !s) {
      spdlog::error("rollback incomplete: {}", s.error().msg());
      error.context("rollback incomplete (" + s.error().msg() + ")");
    }
    return error;
  }
  state.phase = "added";
  state.result = cni::encode_result(*result, "1.1.0");
  if (auto s = store.save(state); !s) {
    (void)teardown(store, state, call.env, conf->ipam_timeout_seconds);
    return std::move(s).error();
  }
  spdlog::info("attached {} ({}) to {} as {} in {} mode", state.device.name, conf->device.str(),
               call.env.netns, call.env.ifname, state.mode);
  return result;
}

Status cmd_del(const cni::Call& call) {
  StateStore store(state_dir_of(call.conf));
  int timeout = ipam_timeout_of(call.conf);
  auto state = store.load(call.conf.name, call.env.container_id, call.env.ifname);
  if (!state) {
    return std::move(state).error();
  }
  if (!state->has_value()) {
    // Nothing attached (repeated DEL, or DEL after a failed ADD that rolled
    // back). IPAM DEL is idempotent and frees anything a crash left behind.
    if (call.conf.ipam_type.empty()) {
      return ok_status();
    }
    return cni::delegate_command(call.conf.ipam_type, cni::Command::kDel, call.env, call.stdin_text,
                                 ipam_options(timeout));
  }
  auto lock = store.lock_device((*state)->device.key);
  if (!lock) {
    return std::move(lock).error();
  }
  // Read again under the lock: a new pod's ADD may have reclaimed this
  // attachment's device (and removed its state) while we waited.
  auto current = store.load(call.conf.name, call.env.container_id, call.env.ifname);
  if (!current) {
    return std::move(current).error();
  }
  if (!current->has_value()) {
    return ok_status();
  }
  return teardown(store, **current, call.env, timeout);
}

Status cmd_check(const cni::Call& call) {
  auto conf = load_conf(call.conf, call.args);
  if (!conf) {
    return std::move(conf).error();
  }
  StateStore store(conf->state_dir);
  auto state = store.load(call.conf.name, call.env.container_id, call.env.ifname);
  if (!state) {
    return std::move(state).error();
  }
  if (!state->has_value() || (*state)->phase != "added") {
    return Error(ErrorKind::kUnknownContainer,
                 "no attachment of container " + call.env.container_id + " as " + call.env.ifname +
                     " in network " + call.conf.name);
  }
  auto pod = Netns::open(call.env.netns);
  if (!pod) {
    return std::move(pod).error();
  }
  const cni::Result* expected = call.conf.prev_result ? &*call.conf.prev_result : nullptr;
  auto checked = in_netns(*pod, [&]() -> Status {
    auto rtnl = Rtnl::open();
    if (!rtnl) {
      return std::move(rtnl).error();
    }
    auto link = netns::find_link_by_name(*rtnl, call.env.ifname);
    if (!link) {
      return Error(ErrorKind::kDeviceNotFound, "CHECK: " + link.error().msg());
    }
    if (!link->up()) {
      return Error(ErrorKind::kKernel, "CHECK: " + call.env.ifname + " is down");
    }
    if (expected == nullptr) {
      return ok_status();
    }
    int my_index = -1;
    for (size_t i = 0; i < expected->interfaces.size(); ++i) {
      const auto& iface = expected->interfaces[i];
      if (iface.name == call.env.ifname && iface.sandbox == call.env.netns) {
        my_index = static_cast<int>(i);
        if (!iface.mac.empty() && iface.mac != link->hwaddr.str()) {
          return Error(ErrorKind::kKernel, "CHECK: " + call.env.ifname + " has MAC " +
                                               link->hwaddr.str() + ", prevResult says " +
                                               iface.mac);
        }
      }
    }
    if (my_index < 0) {
      return Error(ErrorKind::kInvalidConfig, "CHECK: prevResult has no interface " +
                                                  call.env.ifname + " in " + call.env.netns);
    }
    auto addrs = netns::list_addresses(*rtnl, *link);
    if (!addrs) {
      return std::move(addrs).error();
    }
    for (const auto& ip : expected->ips) {
      if (ip.interface != my_index) {
        continue;
      }
      auto want = netns::IpPrefix::parse(ip.address);
      if (!want || std::find(addrs->begin(), addrs->end(), *want) == addrs->end()) {
        return Error(ErrorKind::kKernel,
                     "CHECK: address " + ip.address + " is missing on " + call.env.ifname);
      }
    }
    for (const auto& r : expected->routes) {
      auto dst = netns::IpPrefix::parse(r.dst);
      if (!dst) {
        continue;
      }
      auto routes = netns::list_routes(*rtnl, dst->addr.is_v4() ? AF_INET : AF_INET6,
                                       r.table ? static_cast<uint32_t>(*r.table) : RT_TABLE_MAIN);
      if (!routes) {
        return std::move(routes).error();
      }
      bool found = std::any_of(routes->begin(), routes->end(), [&](const netns::Route& have) {
        return have.dst == *dst && have.ifindex == link->index;
      });
      if (!found) {
        return Error(ErrorKind::kKernel,
                     "CHECK: route to " + r.dst + " via " + call.env.ifname + " is missing");
      }
    }
    return ok_status();
  });
  if (!checked) {
    return checked;
  }
  if (!call.conf.ipam_type.empty()) {
    return cni::delegate_command(call.conf.ipam_type, cni::Command::kCheck, call.env,
                                 call.stdin_text, ipam_options(conf->ipam_timeout_seconds));
  }
  return ok_status();
}

Status cmd_status(const cni::Call& call) {
  StateStore store(state_dir_of(call.conf));
  if (auto s = store.check_writable(); !s) {
    return Error(ErrorKind::kNotAvailable, s.error().msg());
  }
  if (call.conf.ipam_type.empty()) {
    return ok_status();
  }
  auto s = cni::delegate_command(call.conf.ipam_type, cni::Command::kStatus, call.env,
                                 call.stdin_text, ipam_options(ipam_timeout_of(call.conf)));
  if (!s && (cni_code(s.error()) == 1 || cni_code(s.error()) == 4)) {
    // An IPAM plugin older than spec 1.1 cannot answer STATUS; that says
    // nothing about whether it can allocate.
    return ok_status();
  }
  return s;
}

Status cmd_gc(const cni::Call& call) {
  StateStore store(state_dir_of(call.conf));
  int timeout = ipam_timeout_of(call.conf);
  auto states = store.list(call.conf.name);
  if (!states) {
    return std::move(states).error();
  }
  Status first_error;
  for (const auto& state : *states) {
    cni::AttachmentRef ref{state.container_id, state.ifname};
    const auto& valid = call.conf.valid_attachments;
    if (std::find(valid.begin(), valid.end(), ref) != valid.end()) {
      continue;
    }
    auto lock = store.lock_device(state.device.key);
    if (!lock) {
      return std::move(lock).error();
    }
    spdlog::info("GC: removing attachment {}/{}", state.container_id, state.ifname);
    if (auto s = teardown(store, state, call.env, timeout); !s && first_error) {
      first_error = std::move(s).error();
    }
  }
  if (!first_error) {
    return first_error;
  }
  if (call.conf.ipam_type.empty()) {
    return ok_status();
  }
  auto s = cni::delegate_command(call.conf.ipam_type, cni::Command::kGc, call.env, call.stdin_text,
                                 ipam_options(timeout));
  if (!s && cni_code(s.error()) == 1) {
    return ok_status();  // the IPAM plugin predates GC
  }
  return s;
}

}  // namespace rdmanet::plugin
