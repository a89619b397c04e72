// RDMA-CM defaults of a device port through configfs:
//   <configfs>/rdma_cm/<dev>/ports/<port>/default_roce_tos    (0..255; DSCP << 2 | ECN)
//   <configfs>/rdma_cm/<dev>/ports/<port>/default_roce_mode   ("RoCE v2" or "IB/RoCE v1")
// They apply to rdma_cm connections that do not set their own ToS/GID type; verbs users
// such as NCCL take the traffic class from their own settings (NCCL_IB_TC). The values
// live with the kernel's per-device rdma_cm state, which is rebuilt (reset to defaults)
// when a device moves between network namespaces: set them after any move.
#pragma once

#include <optional>
#include <string>

#include "base/error.h"
#include "base/names.h"

namespace rdmanet::rdma {

enum class RoceMode { kV1, kV2 };
// The config's spellings; parse_roce_mode also takes the kernel's ("RoCE v2", "IB/RoCE v1").
inline constexpr Name<RoceMode> kRoceModeNames[] = {{RoceMode::kV2, "v2"}, {RoceMode::kV1, "v1"}};

struct CmDefaults {
  std::optional<int> tos;  // 0..255
  std::optional<RoceMode> mode;
};

// Parses the config's mode ("v1", "v2", or the kernel's own spellings); kInvalidConfig
// naming `field` otherwise.
Expected<RoceMode> parse_roce_mode(const std::string& text, const std::string& field);

// Creates the device's rdma_cm group when missing and writes the set fields.
// configfs_root is normally /sys/kernel/config. Errors say what is missing (configfs not
// mounted, rdma_cm not loaded, the device unknown to rdma_cm) and what to do.
Status set_cm_defaults(const std::string& configfs_root, const std::string& device, uint32_t port,
                       const CmDefaults& values);

// The current values (both set) of a device port.
Expected<CmDefaults> read_cm_defaults(const std::string& configfs_root, const std::string& device,
                                      uint32_t port);

// Removes the device's rdma_cm group (the values stay with the device); a missing group is
// fine. For devices rdmanet created and deletes.
Status remove_cm_group(const std::string& configfs_root, const std::string& device);

}  // namespace rdmanet::rdma
