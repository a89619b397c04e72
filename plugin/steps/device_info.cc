#include "plugin/steps/device_info.h"

#include <spdlog/spdlog.h>

#include "base/json_fields.h"
#include "cni/device_info.h"
#include "plugin/attachment.h"

namespace rdmanet::plugin {

namespace {

// What the device-info step records: the path ADD wrote (never one from DEL's config) and
// the PCI address it wrote there (records before 0.3 have none: any device-info document).
struct DeviceInfoRecord {
  static constexpr StepKind kKind = StepKind::kDeviceInfo;
  std::string path;
  std::string pci;

  nlohmann::json to_json() const { return {{"path", path}, {"pciAddress", pci}}; }
  static Expected<DeviceInfoRecord> from_json(const nlohmann::json& step) {
    DeviceInfoRecord r;
    Fields f(step, "device-info", ErrorKind::kState);
    TRY(f.required_string("path", &r.path).string("pciAddress", &r.pci).status());
    return r;
  }
};

}  // namespace

Status write_device_info(Attachment& a) {
  const std::string& path = a.conf().net.runtime.device_info_file;
  const HostDevice& dev = a.device();
  if (path.empty()) {
    return ok_status();
  }
  if (dev.pci.empty()) {
    spdlog::info("CNIDeviceInfoFile {}: {} has no PCI address; not written", path, dev.link.name);
    return ok_status();
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
  if (auto s = a.record(DeviceInfoRecord{path, dev.pci}); !s) {
    spdlog::warn("CNIDeviceInfoFile {} not written: {}", path, s.error().msg());
    return ok_status();
  }
  if (auto s = cni::write_device_info(path, info); !s) {
    spdlog::warn("CNIDeviceInfoFile: {}", s.error().msg());
  }
  return ok_status();
}

Status remove_device_info(Attachment& /*a*/, const nlohmann::json& recorded) {
  TRY_ASSIGN(DeviceInfoRecord r, DeviceInfoRecord::from_json(recorded));
  if (auto s = cni::remove_device_info(r.path, r.pci); !s) {
    spdlog::warn("CNIDeviceInfoFile: {}", s.error().msg());  // Multus removes it too
  }
  return ok_status();
}

}  // namespace rdmanet::plugin
