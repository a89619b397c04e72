// The RDMA steps: which RDMA device belongs to the attached netdev, moving it into the pod
// netns and home again, the soft-RoCE device rdmanet creates on request, RDMA-CM defaults,
// the wait for the pod addresses' RoCE v2 GIDs, and the PF's DCB.
#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "base/files.h"
#include "base/hex.h"
#include "base/json_fields.h"
#include "netns/dcb.h"
#include "netns/sysfs.h"
#include "plugin/steps.h"
#include "rdma/cm_defaults.h"
#include "rdma/gid.h"

namespace rdmanet::plugin {

using netns::in_netns;
using netns::Netns;
using nlohmann::json;
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
Expected<std::optional<rdma::Device>> find_rdma_device(const PluginConf& conf,
                                                       const HostDevice& dev, Nldev& host) {
  std::vector<std::string> names;
  netns::Sysfs sysfs(conf.sysfs_root);
  if (!dev.pci.empty()) {
    TRY_ASSIGN(names, sysfs.pci_rdma_devices(dev.pci));
  } else if (conf.device.kind == DeviceSelector::Kind::kAuxiliary) {
    TRY_ASSIGN(names, sysfs.aux_rdma_devices(conf.device.value));
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
  TRY_ASSIGN(auto by_netdev, host.devices_of_netdev(dev.link.index));
  if (by_netdev.empty()) {
    return std::optional<rdma::Device>();
  }
  if (by_netdev.size() > 1) {
    spdlog::warn("netdev {} has {} RDMA devices; using {}", dev.link.name, by_netdev.size(),
                 by_netdev.front().name);
  }
  return std::optional<rdma::Device>(by_netdev.front());
}

// The netdev's own RDMA device. A device that a pod deleted without DEL comes back to the
// host by itself, about half a second after its netns is gone (seen on 7.3): after a
// reclaim, give it that time.
Expected<std::optional<rdma::Device>> wait_for_rdma_device(Attachment& a, Nldev& host,
                                                           bool exclusive) {
  TRY_ASSIGN(auto device, find_rdma_device(a.conf(), a.device(), host));
  for (int i = 0; i < 20 && !device && exclusive && a.reclaimed(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    TRY_ASSIGN(device, find_rdma_device(a.conf(), a.device(), host));
  }
  return device;
}

// A software RDMA device (rxe, siw) has no bus parent and is bound to its netdev's netns:
// moving the netdev into the pod destroys it.
std::optional<std::string> software_device(const PluginConf& conf, const rdma::Device& device,
                                           const std::string& netdev) {
  std::error_code ec;
  std::string parent = conf.sysfs_root + "/class/infiniband/" + device.name + "/device";
  if (std::filesystem::exists(parent, ec)) {
    return std::nullopt;
  }
  return "RDMA device " + device.name + " of " + netdev + " is a software device (no " + parent +
         "): it is bound to its netdev and is destroyed when " + netdev +
         " moves into the pod; set softRoce to have rdmanet create one there";
}

template <class F>
Status under_rdma_lock(Attachment& a, F&& fn) {
  TRY_ASSIGN(auto lock, a.store().lock(kRdmaLockKey));
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
  TRY(from.move(*dev, to));
  spdlog::info("moved RDMA device {} (index {}) to netns {}", dev->name, index, to.path());
  return ok_status();
}

}  // namespace

std::string soft_roce_name(const AttachmentId& id) {
  std::string safe;
  for (char c : id.ifname) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-';
    safe += ok ? c : '_';
  }
  char hash[9];
  snprintf(hash, sizeof hash, "%08x",
           static_cast<unsigned>(fnv1a64(id.network + "/" + id.container_id + "/" + id.ifname)));
  return "rxe_" + safe + "_" + hash;
}

Status plan_rdma(Attachment& a) {
  const PluginConf& conf = a.conf();
  const HostDevice& dev = a.device();
  RdmaPlan& plan = a.rdma();
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
    return ok_status();
  }
  TRY_ASSIGN(plan.node_mode, host->netns_mode());
  const bool exclusive = plan.node_mode == rdma::NetnsMode::kExclusive;
  if (required && !exclusive) {
    return Error(ErrorKind::kRdmaIsolation,
                 "rdmaIsolation \"required\": this node's RDMA subsystem is in shared netns mode, "
                 "so every pod would see every RDMA device; " +
                     std::string(kHowToExclusive));
  }
  // With softRoce the pod's device is the soft-RoCE one ADD creates: the netdev's own RDMA
  // device (if any) plays no part.
  if (!conf.soft_roce) {
    TRY_ASSIGN(plan.device, wait_for_rdma_device(a, *host, exclusive));
  }
  if (plan.device) {
    TRY_ASSIGN(auto ports, host->ports(*plan.device));
    for (const auto& port : ports) {
      if (port.netdev_index == dev.link.index) {
        plan.port = port.index;
      }
    }
    plan.infiniband = plan.device->protocol == "ib";
  }
  if (plan.device && conf.mode == Mode::kNetdev) {
    if (auto why = software_device(conf, *plan.device, dev.link.name)) {
      if (required) {
        return Error(ErrorKind::kRdmaIsolation, "rdmaIsolation \"required\": " + *why);
      }
      spdlog::warn("{}", *why);
      plan.device.reset();
    }
  }
  plan.active = plan.device.has_value() || conf.soft_roce;
  if (required && !plan.active) {
    return Error(ErrorKind::kRdmaIsolation,
                 "rdmaIsolation \"required\": " + dev.link.name +
                     " has no RDMA device (select a VF with an RDMA driver, or set softRoce)");
  }
  const bool movable = conf.soft_roce || (plan.device && conf.mode == Mode::kNetdev);
  plan.move = exclusive && conf.rdma_isolation != RdmaIsolation::kOff && movable;
  if (exclusive && plan.active && !plan.move) {
    spdlog::warn(
        "the node is in exclusive RDMA netns mode but {} stays in the host netns "
        "(rdmaIsolation {}, mode {}): the pod will not see it",
        plan.device ? plan.device->name : "the RDMA device",
        name_of(kRdmaIsolationNames, conf.rdma_isolation), name_of(kModeNames, conf.mode));
  }
  if (plan.active) {
    RdmaReport report;
    report.port = plan.port;
    report.node_mode = rdma::netns_mode_name(plan.node_mode);
    if (plan.device) {
      report.device = plan.device->name;
      report.index = static_cast<int>(plan.device->index);
    }
    a.rec().rdma = report;
  }
  return ok_status();
}

Status check_node_qos(Attachment& a) {
  const PluginConf& conf = a.conf();
  const HostDevice& dev = a.device();
  if (conf.dcb.empty()) {
    return ok_status();
  }
  const std::string& pf = dev.vf ? dev.pf_name : dev.link.name;
  // One PF's DCB is read and written by every pod on it: one at a time.
  TRY_ASSIGN(auto lock, a.store().lock(dev.vf ? "pf-" + dev.vf->pf_pci : "pf-name-" + hex(pf)));
  TRY_ASSIGN(auto rtnl, netns::Rtnl::open());
  if (conf.dcb_apply) {
    return netns::apply_dcb(rtnl, pf, conf.dcb).with_context("roce.dcb (policy apply)");
  }
  TRY_ASSIGN(auto have, netns::read_dcb(rtnl, pf).with_context("roce.dcb (policy verify)"));
  auto s = netns::verify_dcb(have, conf.dcb, pf);
  if (!s) {
    Error e = std::move(s).error();
    return e.append(" (set the PF's DCB, or use roce.dcb.policy \"apply\")");
  }
  return s;
}

Status move_rdma_device_in(Attachment& a, RdmaOrder order) {
  const RdmaPlan& plan = a.rdma();
  const bool mine = order == RdmaOrder::kBeforeNetdev ? plan.infiniband : !plan.infiniband;
  if (!plan.active || !plan.move || !mine || !a.rec().rdma || a.rec().rdma->index < 0) {
    return ok_status();
  }
  const RdmaReport& rdma = *a.rec().rdma;
  TRY(a.record(StepKind::kRdmaMove, {{"device", rdma.device},
                                     {"index", rdma.index},
                                     {"beforeNetdev", order == RdmaOrder::kBeforeNetdev}}));
  TRY(under_rdma_lock(a, [&]() -> Status {
    TRY_ASSIGN(auto host, Nldev::open());
    if (auto dev = host.device(static_cast<uint32_t>(rdma.index));
        !dev && dev.error().kind() == ErrorKind::kDeviceNotFound) {
      return Error(ErrorKind::kRdmaIsolation,
                   "RDMA device " + rdma.device + " (index " + std::to_string(rdma.index) +
                       ") is gone from the host netns before it could move into the pod");
    }
    return move_by_index(host, rdma.index, rdma.device, *a.pod());
  }));
  if (order == RdmaOrder::kBeforeNetdev) {
    // Moving an InfiniBand device recreates its IPoIB netdev (new ifindex): find it again.
    TRY(find_host_device(a));
  }
  return ok_status();
}

Status move_rdma_device_home(Attachment& a, const json& step) {
  std::string device;
  int index = -1;
  Fields f(step, "rdma-move", ErrorKind::kState);
  f.string("device", &device).integer("index", &index);
  TRY(f.status());
  if (!a.pod() || index < 0) {
    return ok_status();  // a destroyed netns hands its RDMA devices back by itself
  }
  // The kernel moves a device only for a caller whose own netns is the device's
  // (rdma_dev_change_netns checks current's netns), so the request is sent from inside the
  // pod netns. A device already home is fine.
  auto s = under_rdma_lock(a, [&]() -> Status {
    return in_netns(*a.pod(), [&]() -> Status {
      auto in_pod = Nldev::open();
      if (!in_pod) {
        return rdma::no_rdma_subsystem(in_pod.error()) ? ok_status()
                                                       : Status(std::move(in_pod).error());
      }
      return move_by_index(*in_pod, index, device, a.host());
    });
  });
  if (!s) {
    // Not an isolation question on the way back: a plain kernel failure.
    return Error(ErrorKind::kKernel, s.error().msg());
  }
  return s;
}

Status create_soft_roce(Attachment& a) {
  if (!a.conf().soft_roce) {
    return ok_status();
  }
  RdmaReport& rdma = *a.rec().rdma;
  rdma.device = soft_roce_name(a.rec().id());
  TRY(a.record(StepKind::kSoftRoce,
               {{"device", rdma.device}, {"configfsRoot", a.conf().configfs_root}}));
  // Created from inside the pod netns, where the netdev name resolves; the kernel
  // registers it in the initial netns.
  TRY_ASSIGN(auto in_pod, open_in(*a.pod()));
  TRY(in_pod.add_rxe(rdma.device, a.rec().ifname));
  TRY_ASSIGN(auto host, Nldev::open());
  TRY_ASSIGN(auto created, host.device(rdma.device));
  rdma.index = static_cast<int>(created.index);
  spdlog::info("created soft-RoCE device {} (index {}) on {}", rdma.device, rdma.index,
               a.rec().ifname);
  return ok_status();
}

Status delete_soft_roce(Attachment& a, const json& step) {
  std::string device;
  std::string configfs_root = "/sys/kernel/config";
  Fields f(step, "soft-roce", ErrorKind::kState);
  f.required_string("device", &device).string("configfsRoot", &configfs_root);
  TRY(f.status());
  // Only the device ADD names for this attachment is ever deleted.
  if (device != soft_roce_name(a.rec().id())) {
    return Error(ErrorKind::kState, "soft-roce.device \"" + device +
                                        "\" is not this attachment's (\"" +
                                        soft_roce_name(a.rec().id()) + "\")");
  }
  TRY(check_absolute_path(configfs_root, "soft-roce.configfsRoot", ErrorKind::kState));
  // Wherever it is (DEL has moved it home first); gone with its netdev is fine.
  std::vector<const Netns*> places{&a.host()};
  if (a.pod()) {
    places.push_back(&*a.pod());
  }
  for (const Netns* ns : places) {
    auto nl = open_in(*ns);
    if (!nl) {
      return rdma::no_rdma_subsystem(nl.error()) ? ok_status() : Status(std::move(nl).error());
    }
    auto dev = nl->device(device);
    if (!dev) {
      if (dev.error().kind() == ErrorKind::kDeviceNotFound) {
        continue;
      }
      return std::move(dev).error();
    }
    TRY(nl->delete_link(*dev));
    spdlog::info("deleted soft-RoCE device {}", device);
    break;
  }
  (void)rdma::remove_cm_group(configfs_root, device);
  return ok_status();
}

namespace {

// The RDMA-CM defaults of a device the pods share (a macvlan parent's) are device-wide: a
// value the device already has other than the kernel's (ToS 0, RoCE v2) was set for another
// pod, and a different one is refused rather than taken from it.
Status check_shared_cm_defaults(const PluginConf& conf, const RdmaReport& rdma) {
  auto current = rdma::read_cm_defaults(conf.configfs_root, rdma.device, rdma.port);
  if (!current) {
    return ok_status();  // no rdma_cm group yet: the kernel's defaults
  }
  const std::string where = rdma.device + " port " + std::to_string(rdma.port);
  const char* why =
      " (device-wide: the pods sharing an RDMA device share its RDMA-CM defaults; give every "
      "network on it the same value, or none)";
  if (conf.roce_cm.tos && current->tos && *current->tos != 0 &&
      *current->tos != *conf.roce_cm.tos) {
    return Error(ErrorKind::kKernel, "roce.tos " + std::to_string(*conf.roce_cm.tos) +
                                         ": the RDMA-CM ToS of the shared device " + where +
                                         " is " + std::to_string(*current->tos) + why);
  }
  if (conf.roce_cm.mode && current->mode && *current->mode != rdma::RoceMode::kV2 &&
      *current->mode != *conf.roce_cm.mode) {
    return Error(ErrorKind::kKernel,
                 "roce.mode " + std::string(name_of(rdma::kRoceModeNames, *conf.roce_cm.mode)) +
                     ": the RDMA-CM RoCE mode of the shared device " + where + " is " +
                     std::string(name_of(rdma::kRoceModeNames, *current->mode)) + why);
  }
  return ok_status();
}

}  // namespace

Status set_rdma_cm_defaults(Attachment& a) {
  const PluginConf& conf = a.conf();
  if (!a.rdma().active || (!conf.roce_cm.tos && !conf.roce_cm.mode)) {
    return ok_status();
  }
  // After any move: a move rebuilds the device's rdma_cm state.
  const RdmaReport& rdma = *a.rec().rdma;
  if (conf.mode == Mode::kMacvlan && !conf.soft_roce) {
    TRY(check_shared_cm_defaults(conf, rdma));
  }
  return rdma::set_cm_defaults(conf.configfs_root, rdma.device, rdma.port, conf.roce_cm)
      .with_context("roce");
}

Status wait_for_gids(Attachment& a, const cni::Result& ipam) {
  const RdmaPlan& plan = a.rdma();
  const PluginConf& conf = a.conf();
  if (!plan.active || plan.infiniband) {
    return ok_status();
  }
  RdmaReport& rdma = *a.rec().rdma;
  if (plan.node_mode == rdma::NetnsMode::kExclusive && !plan.move) {
    return ok_status();  // the pod cannot see the device (plan_rdma warned)
  }
  std::vector<netns::IpAddress> addresses;
  for (const auto& ip : ipam.ips) {
    if (auto prefix = netns::IpPrefix::parse(ip.address); prefix) {
      addresses.push_back(prefix->addr);
    }
  }
  if (addresses.empty()) {
    return ok_status();
  }
  auto timeout = std::chrono::milliseconds(conf.gid_timeout_ms);
  auto report = rdma::wait_for_roce_gids(*a.pod(), rdma.device, rdma.port, addresses, timeout);
  if (!report) {
    Error e = std::move(report).error();
    if (e.kind() != ErrorKind::kGidTimeout) {
      return e;
    }
    if (conf.gid_timeout_ms == 0) {
      spdlog::warn("{}", e.msg());  // 0: report what is there, never fail
      return ok_status();
    }
    return e.context("gidTimeout " + std::to_string(conf.gid_timeout_ms / 1000) + " s");
  }
  rdma.gids = report->to_json();
  spdlog::info("RDMA {} in {}: RoCE v2 GID index {} ({})", rdma.device, a.rec().netns,
               report->v2_index(), report->summary());
  return ok_status();
}

Status check_rdma_device(const AttachmentRecord& record, const Netns& pod) {
  bool ours = record.step(StepKind::kRdmaMove) || record.step(StepKind::kSoftRoce);
  if (!record.rdma || record.rdma->index < 0 || !ours) {
    return ok_status();
  }
  TRY_ASSIGN(auto nl, open_in(pod));
  auto dev = nl.device(static_cast<uint32_t>(record.rdma->index));
  if (!dev) {
    return Error(ErrorKind::kDeviceNotFound, "CHECK: RDMA device " + record.rdma->device +
                                                 " is not in the pod: " + dev.error().msg());
  }
  return ok_status();
}

}  // namespace rdmanet::plugin
