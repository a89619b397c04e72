#include "plugin/commands.h"

#include <linux/rtnetlink.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "base/json_fields.h"
#include "cni/delegate.h"
#include "cni/error_code.h"
#include "netns/address.h"
#include "netns/netns.h"
#include "netns/route.h"
#include "plugin/attach.h"
#include "plugin/conf.h"
#include "plugin/device.h"
#include "plugin/rdma_attach.h"
#include "plugin/state.h"
#include "plugin/teardown.h"
#include "rdma/nldev.h"

namespace rdmanet::plugin {

namespace {

using netns::in_netns;
using netns::Netns;
using netns::Rtnl;

const char* mode_name(Mode mode) { return mode == Mode::kNetdev ? "netdev" : "macvlan"; }

const PluginConf& defaults() {
  static const PluginConf conf;
  return conf;
}

// The state dir of a config, read leniently: DEL and GC must work even when
// the rest of the config no longer loads.
std::string state_dir_of(const cni::NetConf& net) {
  const std::string fallback = defaults().state_dir;
  std::string dir = fallback;
  Fields(net.raw, "", ErrorKind::kInvalidConfig).string("stateDir", &dir);
  return dir.empty() || dir[0] != '/' ? fallback : dir;
}

int ipam_timeout_of(const cni::NetConf& net) {
  int seconds = defaults().ipam_timeout_seconds;
  Fields(net.raw, "", ErrorKind::kInvalidConfig).integer("ipamTimeout", &seconds);
  return std::clamp(seconds, 1, 600);
}

// The addresses ADD put on the pod interface (the last interface of the result).
std::vector<netns::IpAddress> pod_addresses(const cni::Result& result, const std::string& ifname) {
  std::vector<netns::IpAddress> out;
  int mine = static_cast<int>(result.interfaces.size()) - 1;
  if (mine < 0 || result.interfaces[mine].name != ifname) {
    return out;
  }
  for (const auto& ip : result.ips) {
    if (ip.interface != mine) {
      continue;
    }
    if (auto prefix = netns::IpPrefix::parse(ip.address); prefix) {
      out.push_back(prefix->addr);
    }
  }
  return out;
}

// CHECK of the RDMA device ADD moved or created: the pod still sees it.
Status check_rdma(const AttachmentState& state, const Netns& pod) {
  if (!state.rdma || state.rdma->index < 0 || (!state.rdma->moved && !state.rdma->created)) {
    return ok_status();
  }
  auto nl = in_netns(pod, [] { return rdma::Nldev::open(); });
  if (!nl) {
    return std::move(nl).error();
  }
  auto dev = nl->device(static_cast<uint32_t>(state.rdma->index));
  if (!dev) {
    return Error(ErrorKind::kDeviceNotFound, "CHECK: RDMA device " + state.rdma->device +
                                                 " is not in the pod: " + dev.error().msg());
  }
  return ok_status();
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
  if (auto cookie = pod->cookie(); cookie) {
    state.netns_cookie = *cookie;
  } else {
    spdlog::info("no netns cookie ({}): DEL cannot tell a reused netns path", cookie.error().msg());
  }
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
  bool reclaimed = false;
  if (conf->mode == Mode::kNetdev) {
    if (auto s = claim_device(store, key, state, call.env, conf->ipam_timeout_seconds, &reclaimed);
        !s) {
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
  state.device.up = dev->link.up();
  auto plan = plan_rdma(*conf, *dev, reclaimed);
  if (!plan) {
    return std::move(plan).error();
  }
  if (auto s = node_qos(store, *conf, *dev, *host_rtnl); !s) {
    return std::move(s).error();
  }

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

  // Every failure from here on is rolled back by the one inverse DEL also uses.
  auto rolled_back = [&](Error error) {
    spdlog::error("ADD failed, rolling back: {}", error.msg());
    if (auto s = teardown(store, state, call.env, conf->ipam_timeout_seconds); !s) {
      spdlog::error("rollback incomplete: {}", s.error().msg());
      error.context("rollback incomplete (" + s.error().msg() + ")");
    }
    return error;
  };
  if (auto s = configure_vf(store, *conf, *dev, *host_rtnl, &state); !s) {
    return rolled_back(std::move(s).error());
  }
  if (auto s = rdma_before_netdev(store, *conf, *plan, *pod, &state); !s) {
    return rolled_back(std::move(s).error());
  }
  if (state.rdma && state.rdma->moved && plan->infiniband) {
    // Moving an InfiniBand device recreates its IPoIB netdev (new ifindex): find it again.
    auto again = resolve_device(conf->device, sysfs, *host_rtnl);
    if (!again) {
      return rolled_back(std::move(again).error());
    }
    dev = std::move(again);
    state.device.name = dev->link.name;
    state.device.index = dev->link.index;
    state.device.mac = dev->link.hwaddr.str();
    if (auto s = store.save(state); !s) {
      return rolled_back(std::move(s).error());
    }
  }
  auto result = attach(*conf, call, *pod, *dev, *host_rtnl);
  if (!result) {
    return rolled_back(std::move(result).error());
  }
  auto gids = rdma_after_netdev(store, *conf, *plan, call.env.ifname, *pod,
                                pod_addresses(*result, call.env.ifname), &state);
  if (!gids) {
    return rolled_back(std::move(gids).error());
  }
  report_device_info(store, *conf, *dev, &state);
  state.phase = "added";
  state.result = cni::encode_result(*result, "1.1.0");
  if (auto s = store.save(state); !s) {
    (void)teardown(store, state, call.env, conf->ipam_timeout_seconds);
    return std::move(s).error();
  }
  spdlog::info("attached {} ({}) to {} as {} in {} mode{}", state.device.name, conf->device.str(),
               call.env.netns, call.env.ifname, state.mode,
               state.rdma ? ", RDMA device " + state.rdma->device +
                                (state.rdma->moved ? " moved into the pod" : " shared")
                          : "");
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
    if (auto s = store.forget(call.conf.name, call.env.container_id, call.env.ifname); !s) {
      return s;
    }
    if (call.conf.ipam_type.empty()) {
      return ok_status();
    }
    return ipam_del(call.conf.ipam_type, call.env, call.stdin_text, timeout);
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
  if (auto s = check_rdma(**state, *pod); !s) {
    return s;
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
  if (!s && (cni::error_code(s.error()) == 1 || cni::error_code(s.error()) == 4)) {
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
  if (!s && cni::error_code(s.error()) == 1) {
    return ok_status();  // the IPAM plugin predates GC
  }
  return s;
}

}  // namespace rdmanet::plugin
