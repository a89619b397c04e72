// runtimeConfig.CNIDeviceInfoFile: merges pci-address, pf-pci-address and rdma-device into
// the device-info-spec file, so Multus's network-status shows the pod's RDMA device. Best
// effort, as Multus reads it: a failure is logged, never fails ADD. The inverse removes the
// file ADD wrote, while it still is the document ADD wrote.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "base/error.h"

namespace rdmanet::plugin {

class Attachment;

Status write_device_info(Attachment& a);
Status remove_device_info(Attachment& a, const nlohmann::json& recorded);

}  // namespace rdmanet::plugin
