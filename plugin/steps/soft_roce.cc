#include "plugin/steps/soft_roce.h"

#include <spdlog/spdlog.h>

#include <cstdio>

#include "base/files.h"
#include "base/hex.h"
#include "base/json_fields.h"
#include "plugin/attachment.h"
#include "rdma/cm_defaults.h"
#include "rdma/nldev.h"

namespace rdmanet::plugin {

using netns::Netns;
using nlohmann::json;
using rdma::Nldev;

namespace {

// What the soft-roce step records: the device (always this attachment's name) and where
// configfs was, for its rdma_cm group.
struct SoftRoceRecord {
  static constexpr StepKind kKind = StepKind::kSoftRoce;
  std::string device;
  std::string configfs_root = "/sys/kernel/config";

  json to_json() const { return {{"device", device}, {"configfsRoot", configfs_root}}; }
  static Expected<SoftRoceRecord> from_json(const json& step, const AttachmentId& id) {
    SoftRoceRecord r;
    Fields f(step, "soft-roce", ErrorKind::kState);
    TRY(f.required_string("device", &r.device).string("configfsRoot", &r.configfs_root).status());
    // Only a device ADD names for this attachment is ever deleted.
    if (!is_soft_roce_name_of(r.device, id)) {
      return Error(ErrorKind::kState, "soft-roce.device \"" + r.device +
                                          "\" is not this attachment's (\"" + soft_roce_name(id) +
                                          "\")");
    }
    TRY(check_absolute_path(r.configfs_root, "soft-roce.configfsRoot", ErrorKind::kState));
    return r;
  }
};

// What names a soft-RoCE device after an attachment: its network, container and ifname.
uint64_t attachment_hash(const AttachmentId& id) {
  return fnv1a64(id.network + "/" + id.container_id + "/" + id.ifname);
}

}  // namespace

std::string soft_roce_name(const AttachmentId& id) {
  char hash[13];
  snprintf(hash, sizeof hash, "%012llx",
           static_cast<unsigned long long>(attachment_hash(id) & 0xffffffffffffULL));
  return std::string("rxe") + hash;
}

std::string legacy_soft_roce_name(const AttachmentId& id) {
  std::string safe;
  for (char c : id.ifname) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-';
    safe += ok ? c : '_';
  }
  char hash[9];
  snprintf(hash, sizeof hash, "%08x", static_cast<unsigned>(attachment_hash(id)));
  return "rxe_" + safe + "_" + hash;
}

bool is_soft_roce_name_of(const std::string& device, const AttachmentId& id) {
  return device == soft_roce_name(id) || device == legacy_soft_roce_name(id);
}

Status create_soft_roce(Attachment& a) {
  if (!a.conf().soft_roce) {
    return ok_status();
  }
  RdmaReport& rdma = *a.rec().rdma;
  rdma.device = soft_roce_name(a.rec().id());
  rdma.driver = "rxe";
  TRY(a.record(SoftRoceRecord{rdma.device, a.conf().configfs_root}));
  // Created from inside the pod netns, where the netdev name resolves; the kernel
  // registers it in the initial netns.
  TRY_ASSIGN(auto in_pod, Nldev::open_in(*a.pod()));
  TRY(in_pod.add_rxe(rdma.device, a.rec().ifname));
  TRY_ASSIGN(auto host, Nldev::open());
  TRY_ASSIGN(auto created, host.device(rdma.device));
  rdma.index = static_cast<int>(created.index);
  spdlog::info("created soft-RoCE device {} (index {}) on {}", rdma.device, rdma.index,
               a.rec().ifname);
  return ok_status();
}

Status delete_soft_roce(Attachment& a, const json& recorded) {
  TRY_ASSIGN(SoftRoceRecord r, SoftRoceRecord::from_json(recorded, a.rec().id()));
  // Wherever it is (DEL has moved it home first); gone with its netdev is fine.
  std::vector<const Netns*> places{&a.host()};
  if (a.pod()) {
    places.push_back(&*a.pod());
  }
  for (const Netns* ns : places) {
    auto nl = Nldev::open_in(*ns);
    if (!nl) {
      return rdma::no_rdma_subsystem(nl.error()) ? ok_status() : Status(std::move(nl).error());
    }
    auto dev = nl->device(r.device);
    if (!dev) {
      if (dev.error().kind() == ErrorKind::kDeviceNotFound) {
        continue;
      }
      return std::move(dev).error();
    }
    TRY(nl->delete_link(*dev));
    spdlog::info("deleted soft-RoCE device {}", r.device);
    break;
  }
  (void)rdma::remove_cm_group(r.configfs_root, r.device);
  return ok_status();
}

}  // namespace rdmanet::plugin
