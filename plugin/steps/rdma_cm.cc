#include "plugin/steps/rdma_cm.h"

#include "plugin/attachment.h"
#include "rdma/cm_defaults.h"

namespace rdmanet::plugin {

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
  const RdmaReport& rdma = *a.rec().rdma;
  if (conf.mode == Mode::kMacvlan && !conf.soft_roce) {
    TRY(check_shared_cm_defaults(conf, rdma));
  }
  return rdma::set_cm_defaults(conf.configfs_root, rdma.device, rdma.port, conf.roce_cm)
      .with_context("roce");
}

}  // namespace rdmanet::plugin
