#include "plugin/steps/rdma_plan.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "netns/sysfs.h"
#include "plugin/attachment.h"
#include "rdma/nldev.h"

namespace rdmanet::plugin {

using rdma::Nldev;

namespace {

const char kHowToExclusive[] =
    "set `options ib_core netns_mode=0` in /etc/modprobe.d (deploy/installer/node-prep.sh "
    "writes it) and reboot, or run `rdma system set netns exclusive` while no pod netns exists";

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

// No RDMA subsystem: fine unless RDMA was asked for.
Status without_rdma_subsystem(const Attachment& a, const Error& why) {
  const PluginConf& conf = a.conf();
  if (conf.rdma_isolation == RdmaIsolation::kRequired) {
    return Error(ErrorKind::kRdmaIsolation, "rdmaIsolation \"required\": " + why.msg());
  }
  if (conf.soft_roce) {
    return Error(ErrorKind::kKernel,
                 "softRoce: " + why.msg() + " (soft-RoCE needs ib_core and rdma_rxe)");
  }
  spdlog::debug("{}; attaching {} without RDMA", why.msg(), a.device().link.name);
  return ok_status();
}

// The netdev's own RDMA device (not with softRoce, where the pod's device is the one ADD
// creates), its port on the netdev, and whether it is InfiniBand. A software device cannot
// move with its netdev: refused under "required", else not the pod's.
Status find_the_device(Attachment& a, Nldev& host, bool exclusive) {
  const PluginConf& conf = a.conf();
  const HostDevice& dev = a.device();
  RdmaPlan& plan = a.rdma();
  if (conf.soft_roce) {
    return ok_status();
  }
  TRY_ASSIGN(plan.device, wait_for_rdma_device(a, host, exclusive));
  if (!plan.device) {
    return ok_status();
  }
  TRY_ASSIGN(auto ports, host.ports(*plan.device));
  for (const auto& port : ports) {
    if (port.netdev_index == dev.link.index) {
      plan.port = port.index;
    }
  }
  plan.infiniband = plan.device->protocol == "ib";
  if (conf.mode != Mode::kNetdev) {
    return ok_status();
  }
  if (auto why = software_device(conf, *plan.device, dev.link.name)) {
    if (conf.rdma_isolation == RdmaIsolation::kRequired) {
      return Error(ErrorKind::kRdmaIsolation, "rdmaIsolation \"required\": " + *why);
    }
    spdlog::warn("{}", *why);
    plan.device.reset();
  }
  return ok_status();
}

// The device's driver, for the workloads' settings (UCX's UD transport before 1.18 needs
// one setting off on drivers other than mlx5): unknown when sysfs cannot say.
std::string driver_of(const PluginConf& conf, const std::string& device) {
  auto driver = netns::Sysfs(conf.sysfs_root).rdma_driver(device);
  if (!driver) {
    spdlog::debug("driver of RDMA device {} unknown: {}", device, driver.error().msg());
    return "";
  }
  return driver->value_or("");
}

// The report ADD keeps in the record (for CHECK, DEL and people reading the state).
void report_plan(Attachment& a) {
  const RdmaPlan& plan = a.rdma();
  RdmaReport report;
  report.port = plan.port;
  report.node_mode = rdma::netns_mode_name(plan.node_mode);
  if (plan.device) {
    report.device = plan.device->name;
    report.index = static_cast<int>(plan.device->index);
    report.driver = driver_of(a.conf(), report.device);
  }
  a.rec().rdma = report;
}

}  // namespace

Status plan_rdma(Attachment& a) {
  const PluginConf& conf = a.conf();
  RdmaPlan& plan = a.rdma();
  const bool required = conf.rdma_isolation == RdmaIsolation::kRequired;
  auto host = Nldev::open();
  if (!host) {
    return rdma::no_rdma_subsystem(host.error()) ? without_rdma_subsystem(a, host.error())
                                                 : Status(std::move(host).error());
  }
  TRY_ASSIGN(plan.node_mode, host->netns_mode());
  const bool exclusive = plan.node_mode == rdma::NetnsMode::kExclusive;
  if (required && !exclusive) {
    return Error(ErrorKind::kRdmaIsolation,
                 "rdmaIsolation \"required\": this node's RDMA subsystem is in shared netns mode, "
                 "so every pod would see every RDMA device; " +
                     std::string(kHowToExclusive));
  }
  TRY(find_the_device(a, *host, exclusive));
  plan.active = plan.device.has_value() || conf.soft_roce;
  if (required && !plan.active) {
    return Error(ErrorKind::kRdmaIsolation,
                 "rdmaIsolation \"required\": " + a.device().link.name +
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
    report_plan(a);
  }
  return ok_status();
}

}  // namespace rdmanet::plugin
