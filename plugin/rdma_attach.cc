#include "plugin/rdma_attach.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "base/hex.h"
#include "cni/device_info.h"
#include "netns/dcb.h"
#include "netns/sysfs.h"
#include "rdma/cm_defaults.h"

namespace rdmanet::plugin {

using netns::in_netns;
using netns::Netns;
using rdma::Nldev;

namespace {

// RDMA device names can be reshuffled by parallel moves; every move runs under this
// node-wide lock. Lock order: device -> pf -> rdma-netns, and none is taken twice in one
// process (flock belongs to the open file: a second open of the same lock would wait on
// the first forever).
const char kRdmaLockKey[] = "rdma-netns";

const char kHowToExclusive[] =
    "set `options ib_core netns_mode=0` in /etc/modprobe.d (deploy/installer/node-prep.sh "
    "writes it) and reboot, or run `rdma system set netns exclusive` while no pod netns exists";

Expected<Nldev> open_in(const Netns& ns) {
  return in_netns(ns, [] { return Nldev::open(); });
}

// The RDMA device of the host device, looked up the way its selector allows: by PCI
// address or auxiliary id through sysfs, else through the ports' netdev index.
Expected<std::optional<rdma::Device>> find_device(const PluginConf& conf, const HostDevice& dev,
                                                  Nldev& host) {
  std::vector<std::string> names;
  netns::Sysfs sysfs(conf.sysfs_root);
  if (!dev.pci.empty() || conf.device.kind == DeviceSelector::Kind::kAuxiliary) {
    auto found = !dev.pci.empty() ? sysfs.pci_rdma_devices(dev.pci)
                                  : sysfs.aux_rdma_devices(conf.device.value);
    if (!found) {
      return std::move(found).error();
    }
    names = std::move(*found);
  }
  for (const auto& name : names) {
    auto device = host.device(name);
    if (device) {
      return std::optional<rdma::Device>(*device);
    }
    if (device.error().kind() != ErrorKind::kDeviceNotFound) {
      return std::move(device).error();
    }
  }
  auto by_netdev = host.devices_of_netdev(dev.link.index);
  if (!by_netdev) {
    return std::move(by_netdev).error();
  }
  if (by_netdev->empty()) {
    return std::optional<rdma::Device>();
  }
  if (by_netdev->size() > 1) {
    spdlog::warn("netdev {} has {} RDMA devices; using {}", dev.link.name, by_netdev->size(),
                 by_netdev->front().name);
  }
  return std::optional<rdma::Device>(by_netdev->front());
}

Status lock_and(StateStore& store, const std::function<Status()>& fn) {
  auto lock = store.lock_device(kRdmaLockKey);
  if (!lock) {
    return std::move(lock).error();
  }
  return fn();
}

// Moves the device with `index` (named `name` at ADD) from the netns `from` (a socket
// there) to `to`. Missing there: nothing to do.
Status move_by_index(Nldev& from, int index, const std::string& name, const Netns& to) {
  auto dev = from.device(static_cast<uint32_t>(index));
  if (!dev) {
    if (dev.error().kind() == ErrorKind::kDeviceNotFound) {
      return ok_status();
    }
    return std::move(dev).error();
  }
  if (dev->name != name) {
    spdlog::info("RDMA device {} (index {}) is now called {}", name, index, dev->name);
  }
  auto s = from.move(*dev, to);
  if (s) {
    spdlog::info("moved RDMA device {} (index {}) to netns {}", dev->name, index, to.path());
  }
  return s;
}

}  // namespace

std::string soft_roce_name(const std::string& network, const std::string& container_id,
                           const std::string& ifname) {
  std::string safe;
  for (char c : ifname) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-';
    safe += ok ? c : '_';
  }
  char hash[9];
  snprintf(hash, sizeof hash, "%08x",
           static_cast<unsigned>(fnv1a64(network + "/" + container_id + "/" + ifname)));
  return "rxe_" + safe + "_" + hash;
}

Expected<RdmaPlan> plan_rdma(const PluginConf& conf, const HostDevice& dev, bool after_reclaim) {
  RdmaPlan plan;
  const bool required = conf.rdma_isolation == RdmaIsolation::kRequired;
  auto host = Nldev::open();
  if (!host) {
    if (!rdma::no_rdma_subsystem(host.error())) {
      return std::move(host).error();
    }
    if (required) {
      return Error(ErrorKind::kRdmaIsolation, "rdmaIsolation \"required\": " + host.error().msg());
    }
    if (conf.soft_roce) {
      return Error(ErrorKind::kKernel,
                   "softRoce: " + host.error().msg() + " (soft-RoCE needs ib_core and rdma_rxe)");
    }
    spdlog::debug("{}; attaching {} without RDMA", host.error().msg(), dev.link.name);
    return plan;
  }
  auto mode = host->netns_mode();
  if (!mode) {
    return std::move(mode).error();
  }
  plan.node_mode = *mode;
  const bool exclusive = *mode == rdma::NetnsMode::kExclusive;
  if (required && !exclusive) {
    return Error(ErrorKind::kRdmaIsolation,
                 "rdmaIsolation \"required\": this node's RDMA subsystem is in shared netns mode, "
                 "so every pod would see every RDMA device; " +
                     std::string(kHowToExclusive));
  }

  // With softRoce the pod's device is the soft-RoCE one ADD creates: the netdev's own
  // RDMA device (if any) plays no part.
  if (!conf.soft_roce) {
    auto device = find_device(conf, dev, *host);
    if (!device) {
      return std::move(device).error();
    }
    // A device that a pod deleted without DEL comes back to the host by itself, about
    // half a second after its netns is gone (seen on 7.3): give it that time.
    for (int i = 0; i < 20 && !device->has_value() && exclusive && after_reclaim; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      device = find_device(conf, dev, *host);
      if (!device) {
        return std::move(device).error();
      }
    }
    plan.device = std::move(*device);
  }
  if (plan.device) {
    auto ports = host->ports(*plan.device);
    if (!ports) {
      return std::move(ports).error();
    }
    for (const auto& port : *ports) {
      if (port.netdev_index == dev.link.index) {
        plan.port = port.index;
      }
    }
    plan.infiniband = plan.device->protocol == "ib";
  }
  // A software RDMA device (rxe, siw) has no bus parent and is bound to its netdev's
  // netns: moving the netdev into the pod destroys it.
  if (plan.device && conf.mode == Mode::kNetdev) {
    std::error_code ec;
    std::string parent = conf.sysfs_root + "/class/infiniband/" + plan.device->name + "/device";
    if (!std::filesystem::exists(parent, ec)) {
      std::string why = "RDMA device " + plan.device->name + " of " + dev.link.name +
                        " is a software device (no " + parent +
                        "): it is bound to its netdev and is destroyed when " + dev.link.name +
                        " moves into the pod; set softRoce to have rdmanet create one there";
      if (required) {
        return Error(ErrorKind::kRdmaIsolation, "rdmaIsolation \"required\": " + why);
      }
      spdlog::warn("{}", why);
      plan.device.reset();
    }
  }
  plan.active = plan.device.has_value() || conf.soft_roce;

  const bool movable = conf.soft_roce || (plan.device && conf.mode == Mode::kNetdev);
  if (required && !plan.active) {
    return Error(ErrorKind::kRdmaIsolation,
                 "rdmaIsolation \"required\": " + dev.link.name +
                     " has no RDMA device (select a VF with an RDMA driver, or set softRoce)");
  }
  plan.move = exclusive && conf.rdma_isolation != RdmaIsolation::kOff && movable;
  if (exclusive && plan.active && !plan.move) {
    spdlog::warn(
        "the node is in exclusive RDMA netns mode but {} stays in the host netns "
        "(rdmaIsolation {}, mode {}): the pod will not see it",
        plan.device ? plan.device->name : "the RDMA device",
        name_of(kRdmaIsolationNames, conf.rdma_isolation), name_of(kModeNames, conf.mode));
  }
  return plan;
}

Status node_qos(StateStore& store, const PluginConf& conf, const HostDevice& dev,
                netns::Rtnl& host_rtnl) {
  if (conf.dcb.empty()) {
    return ok_status();
  }
  const std::string& pf = dev.vf ? dev.pf_name : dev.link.name;
  // One PF's DCB is read and written by every pod on it: one at a time.
  auto lock = store.lock_device(dev.vf ? "pf-" + dev.vf->pf_pci : "pf-name-" + hex(pf));
  if (!lock) {
    return std::move(lock).error();
  }
  if (conf.dcb_apply) {
    auto s = netns::apply_dcb(host_rtnl, pf, conf.dcb);
    if (!s) {
      Error e = std::move(s).error();
      return e.context("roce.dcb (policy apply)");
    }
    return s;
  }
  auto have = netns::read_dcb(host_rtnl, pf);
  if (!have) {
    Error e = std::move(have).error();
    return e.context("roce.dcb (policy verify)");
  }
  auto s = netns::verify_dcb(*have, conf.dcb, pf);
  if (!s) {
    Error e = std::move(s).error();
    return e.append(" (set the PF's DCB, or use roce.dcb.policy \"apply\")");
  }
  return s;
}

namespace {

RdmaRecord record_of(const PluginConf& conf, const RdmaPlan& plan) {
  RdmaRecord rec;
  rec.port = plan.port;
  rec.node_mode = rdma::netns_mode_name(plan.node_mode);
  rec.configfs_root = conf.configfs_root;
  if (plan.device) {
    rec.device = plan.device->name;
    rec.index = static_cast<int>(plan.device->index);
  }
  return rec;
}

// Moves the recorded device into the pod; `moved` is on disk before the kernel is asked.
Status move_into_pod(StateStore& store, const Netns& pod, AttachmentState* state) {
  RdmaRecord& rec = *state->rdma;
  rec.moved = true;
  if (auto s = store.save(*state); !s) {
    return s;
  }
  auto s = lock_and(store, [&]() -> Status {
    auto host = Nldev::open();
    if (!host) {
      return std::move(host).error();
    }
    if (auto dev = host->device(static_cast<uint32_t>(rec.index));
        !dev && dev.error().kind() == ErrorKind::kDeviceNotFound) {
      return Error(ErrorKind::kRdmaIsolation,
                   "RDMA device " + rec.device + " (index " + std::to_string(rec.index) +
                       ") is gone from the host netns before it could move into the pod");
    }
    return move_by_index(*host, rec.index, rec.device, pod);
  });
  return s;
}

// The inverse. The kernel moves a device only for a caller whose own netns is the
// device's (rdma_dev_change_netns checks current's netns), so the request is sent from
// inside the pod netns. A device already home (or handed back by the kernel with a dead
// netns) is fine.
Status move_home(StateStore& store, const RdmaRecord& rec, const Netns& pod, const Netns& host) {
  return lock_and(store, [&]() -> Status {
    auto s = in_netns(pod, [&]() -> Status {
      auto in_pod = Nldev::open();
      if (!in_pod) {
        return rdma::no_rdma_subsystem(in_pod.error()) ? ok_status()
                                                       : Status(std::move(in_pod).error());
      }
      return move_by_index(*in_pod, rec.index, rec.device, host);
    });
    if (!s) {
      // Not an isolation question on the way back: a plain kernel failure.
      return Error(ErrorKind::kKernel, s.error().msg());
    }
    return s;
  });
}

// soft-RoCE on the pod interface, created from inside the pod netns (where the netdev name
// resolves); the kernel registers it in the initial netns.
Status create_soft_roce(StateStore& store, const std::string& ifname, const Netns& pod,
                        AttachmentState* state) {
  RdmaRecord& rec = *state->rdma;
  rec.device = soft_roce_name(state->network, state->container_id, ifname);
  rec.created = true;
  if (auto s = store.save(*state); !s) {
    return s;
  }
  auto in_pod = open_in(pod);
  if (!in_pod) {
    return std::move(in_pod).error();
  }
  if (auto s = in_pod->add_rxe(rec.device, ifname); !s) {
    return s;
  }
  auto host = Nldev::open();
  if (!host) {
    return std::move(host).error();
  }
  auto created = host->device(rec.device);
  if (!created) {
    return std::move(created).error();
  }
  rec.index = static_cast<int>(created->index);
  spdlog::info("created soft-RoCE device {} (index {}) on {}", rec.device, rec.index, ifname);
  return store.save(*state);
}

// The inverse: deletes it wherever it is (DEL has moved it home first). Gone with its
// netdev is fine.
Status delete_soft_roce(const RdmaRecord& rec, const std::optional<Netns>& pod, const Netns& host) {
  std::vector<const Netns*> places{&host};
  if (pod) {
    places.push_back(&*pod);
  }
  for (const Netns* ns : places) {
    auto nl = open_in(*ns);
    if (!nl) {
      return rdma::no_rdma_subsystem(nl.error()) ? ok_status() : Status(std::move(nl).error());
    }
    auto dev = nl->device(rec.device);
    if (!dev) {
      if (dev.error().kind() == ErrorKind::kDeviceNotFound) {
        continue;
      }
      return std::move(dev).error();
    }
    if (auto s = nl->delete_link(*dev); !s) {
      return s;
    }
    spdlog::info("deleted soft-RoCE device {}", rec.device);
    break;
  }
  (void)rdma::remove_cm_group(rec.configfs_root, rec.device);
  return ok_status();
}

// Waits for the RoCE v2 GIDs of the pod's addresses, as the pod sees the table.
Expected<std::optional<rdma::GidReport>> report_gids(const PluginConf& conf, const Netns& pod,
                                                     const std::vector<netns::IpAddress>& addresses,
                                                     RdmaRecord* rec) {
  using Report = std::optional<rdma::GidReport>;
  auto timeout = std::chrono::milliseconds(conf.gid_timeout_ms);
  auto report = rdma::wait_for_roce_gids(pod, rec->device, rec->port, addresses, timeout);
  if (!report && conf.gid_timeout_ms == 0 && report.error().kind() == ErrorKind::kGidTimeout) {
    spdlog::warn("{}", report.error().msg());  // 0: report what is there, never fail
    return Report();
  }
  if (!report) {
    Error e = std::move(report).error();
    if (e.kind() == ErrorKind::kGidTimeout) {
      return e.context("gidTimeout " + std::to_string(conf.gid_timeout_ms / 1000) + " s");
    }
    return e;
  }
  rec->gids = report->to_json();
  spdlog::info("RDMA {} in {}: RoCE v2 GID index {} ({})", rec->device, pod.path(),
               report->v2_index(), report->summary());
  return Report(std::move(*report));
}

}  // namespace

Status rdma_before_netdev(StateStore& store, const PluginConf& conf, const RdmaPlan& plan,
                          const Netns& pod, AttachmentState* state) {
  if (!plan.active || !plan.device || !plan.infiniband) {
    return ok_status();
  }
  state->rdma = record_of(conf, plan);
  if (!plan.move) {
    return store.save(*state);
  }
  return move_into_pod(store, pod, state);
}

Expected<std::optional<rdma::GidReport>> rdma_after_netdev(
    StateStore& store, const PluginConf& conf, const RdmaPlan& plan, const std::string& ifname,
    const Netns& pod, const std::vector<netns::IpAddress>& addresses, AttachmentState* state) {
  using Report = std::optional<rdma::GidReport>;
  if (!plan.active) {
    return Report();
  }
  if (!state->rdma) {
    state->rdma = record_of(conf, plan);
  }
  if (conf.soft_roce) {
    if (auto s = create_soft_roce(store, ifname, pod, state); !s) {
      return std::move(s).error();
    }
  }
  if (plan.move && !plan.infiniband) {
    if (auto s = move_into_pod(store, pod, state); !s) {
      return std::move(s).error();
    }
  }
  RdmaRecord& rec = *state->rdma;
  // After any move: a move rebuilds the device's rdma_cm state. For a device the pod
  // shares (not moved, not created) these are node-level settings of that device, like
  // roce.dcb: every NAD on it should agree, and DEL leaves them.
  if (conf.roce_cm.tos || conf.roce_cm.mode) {
    if (auto s = rdma::set_cm_defaults(conf.configfs_root, rec.device, rec.port, conf.roce_cm);
        !s) {
      Error e = std::move(s).error();
      return e.context("roce");
    }
  }
  if (plan.infiniband || addresses.empty()) {
    return Report();
  }
  if (plan.node_mode == rdma::NetnsMode::kExclusive && !rec.moved) {
    return Report();  // the pod cannot see the device (plan_rdma warned)
  }
  return report_gids(conf, pod, addresses, &rec);
}

void report_device_info(StateStore& store, const PluginConf& conf, const HostDevice& dev,
                        AttachmentState* state) {
  const std::string& path = conf.net.runtime.device_info_file;
  if (path.empty()) {
    return;
  }
  if (dev.pci.empty()) {
    spdlog::info("CNIDeviceInfoFile {}: {} has no PCI address; not written", path, dev.link.name);
    return;
  }
  cni::DeviceInfo info;
  info.pci_address = dev.pci;
  if (dev.vf) {
    info.pf_pci_address = dev.vf->pf_pci;
  }
  if (state->rdma) {
    info.rdma_device = state->rdma->device;
  }
  // Recorded first: DEL removes it even when ADD dies right after writing it.
  state->device_info_file = path;
  if (auto s = store.save(*state); !s) {
    spdlog::warn("CNIDeviceInfoFile {} not written: {}", path, s.error().msg());
    state->device_info_file.clear();
    return;
  }
  if (auto s = cni::write_device_info(path, info); !s) {
    spdlog::warn("CNIDeviceInfoFile: {}", s.error().msg());
  }
}

Status rdma_teardown(StateStore& store, const AttachmentState& state,
                     const std::optional<Netns>& pod, const Netns& host) {
  if (!state.rdma) {
    return ok_status();
  }
  const RdmaRecord& rec = *state.rdma;
  // Home first (a dead pod netns has handed it back already), then delete what we made.
  if (rec.moved && pod && rec.index >= 0) {
    if (auto s = move_home(store, rec, *pod, host); !s) {
      return s;
    }
  }
  if (rec.created) {
    return delete_soft_roce(rec, pod, host);
  }
  return ok_status();
}

}  // namespace rdmanet::plugin
