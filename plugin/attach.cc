#include "plugin/attach.h"

#include <linux/rtnetlink.h>
#include <spdlog/spdlog.h>

#include "netns/address.h"
#include "netns/announce.h"
#include "netns/route.h"
#include "netns/sysctl.h"
#include "netns/vf.h"

namespace rdmanet::plugin {

using netns::in_netns;
using netns::Netns;
using netns::Rtnl;

namespace {

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
  // IPv4 announcements come from the kernel: with arp_notify set, bringing the
  // link up sends a gratuitous ARP for every address it has. Sending one
  // ourselves needs an AF_PACKET socket, and closing one waits for an RCU grace
  // period (synchronize_net in packet_release): ~11 ms of a ~30 ms ADD here.
  // So addresses go on while the link is down (a moved or new link always is),
  // then up, then routes (a gateway needs the link up).
  bool kernel_announces = !link->up();
  if (kernel_announces) {
    auto key = netns::ipv4_conf_key(ifname, "arp_notify");
    if (!key) {
      return std::move(key).error();
    }
    if (auto old = netns::write_sysctl(*key, "1"); !old) {
      return std::move(old).error();
    }
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
    if (!prefix->addr.is_v4() || !kernel_announces) {
      announce.push_back(prefix->addr);
    }
  }
  if (auto s = netns::set_link_up(*rtnl, *link); !s) {
    return std::move(s).error();
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

}  // namespace

cni::DelegateOptions ipam_options(int seconds) {
  return cni::DelegateOptions{std::chrono::milliseconds(seconds * 1000LL)};
}

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

}  // namespace rdmanet::plugin
