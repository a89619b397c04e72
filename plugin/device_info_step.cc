// runtimeConfig.CNIDeviceInfoFile: what the pod got, for Multus's network-status.
#include <spdlog/spdlog.h>

#include "base/json_fields.h"
#include "cni/device_info.h"
#include "plugin/steps.h"

namespace rdmanet::plugin {

void write_device_info(Attachment& a) {
  const std::string& path = a.conf().net.runtime.device_info_file;
  const HostDevice& dev = a.device();
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
  if (a.rec().rdma) {
    info.rdma_device = a.rec().rdma->device;
  }
  // Recorded first: DEL removes it even when ADD dies right after writing it.
  if (auto s = a.record(StepKind::kDeviceInfo, {{"path", path}, {"pciAddress", dev.pci}}); !s) {
    spdlog::warn("CNIDeviceInfoFile {} not written: {}", path, s.error().msg());
    return;
  }
  if (auto s = cni::write_device_info(path, info); !s) {
    spdlog::warn("CNIDeviceInfoFile: {}", s.error().msg());
  }
}

Status remove_device_info(Attachment& /*a*/, const nlohmann::json& step) {
  std::string path;
  std::string pci;
  Fields f(step, "device-info", ErrorKind::kState);
  TRY(f.required_string("path", &path).string("pciAddress", &pci).status());
  // The path ADD wrote, never one from the DEL config; removed only while it still is the
  // document ADD wrote (records before 0.3 have no pciAddress: any device-info document).
  if (auto s = cni::remove_device_info(path, pci); !s) {
    spdlog::warn("CNIDeviceInfoFile: {}", s.error().msg());  // Multus removes it too
  }
  return ok_status();
}

}  // namespace rdmanet::plugin
