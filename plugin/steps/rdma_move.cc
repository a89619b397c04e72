#include "plugin/steps/rdma_move.h"

#include <spdlog/spdlog.h>

#include "base/json_fields.h"
#include "plugin/attachment.h"
#include "plugin/steps/claim.h"
#include "rdma/nldev.h"

namespace rdmanet::plugin {

using netns::Netns;
using nlohmann::json;
using rdma::Nldev;

namespace {

// What an rdma-move step records: the device's name and its index (which survives renames),
// and where ADD took it. Records written before the flag existed lack it (table.h).
struct RdmaMoveRecord {
  StepKind kind = StepKind::kRdmaMove;
  std::string device;
  int index = -1;

  json to_json() const {
    return {{"device", device},
            {"index", index},
            {"beforeNetdev", kind == StepKind::kRdmaMoveBeforeNetdev}};
  }
  static Expected<RdmaMoveRecord> from_json(const json& step) {
    RdmaMoveRecord r;
    Fields f(step, "rdma-move", ErrorKind::kState);
    TRY(f.string("device", &r.device).integer("index", &r.index).status());
    return r;
  }
};

// RDMA device names can be reshuffled by parallel moves; every move runs under this
// node-wide lock. Lock order: device -> pf -> rdma-netns, and none is taken twice in one
// process (flock belongs to the open file: a second open of the same lock would wait on
// the first forever).
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

// The planned device into the pod, at the place `kind` says (InfiniBand before the netdev,
// RoCE after). False when it does not move there.
Expected<bool> move_in(Attachment& a, StepKind kind) {
  const RdmaPlan& plan = a.rdma();
  const bool before = kind == StepKind::kRdmaMoveBeforeNetdev;
  if (!plan.active || !plan.move || plan.infiniband != before || !a.rec().rdma ||
      a.rec().rdma->index < 0) {
    return false;
  }
  const RdmaReport& rdma = *a.rec().rdma;
  TRY(a.record(RdmaMoveRecord{kind, rdma.device, rdma.index}));
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
  return true;
}

}  // namespace

Status move_ib_device_in(Attachment& a) {
  TRY_ASSIGN(bool moved, move_in(a, StepKind::kRdmaMoveBeforeNetdev));
  if (!moved) {
    return ok_status();
  }
  // Moving an InfiniBand device recreates its IPoIB netdev (new ifindex): find it again.
  return find_host_device(a);
}

Status move_roce_device_in(Attachment& a) {
  TRY(move_in(a, StepKind::kRdmaMove));
  return ok_status();
}

Status move_rdma_device_home(Attachment& a, const json& recorded) {
  TRY_ASSIGN(RdmaMoveRecord r, RdmaMoveRecord::from_json(recorded));
  if (!a.pod() || r.index < 0) {
    return ok_status();  // a destroyed netns hands its RDMA devices back by itself
  }
  // The kernel moves a device only for a caller whose own netns is the device's
  // (rdma_dev_change_netns checks current's netns), so the request is sent from inside the
  // pod netns. A device already home is fine.
  auto s = under_rdma_lock(a, [&]() -> Status {
    return netns::in_netns(*a.pod(), [&]() -> Status {
      auto in_pod = Nldev::open();
      if (!in_pod) {
        return rdma::no_rdma_subsystem(in_pod.error()) ? ok_status()
                                                       : Status(std::move(in_pod).error());
      }
      return move_by_index(*in_pod, r.index, r.device, a.host());
    });
  });
  if (!s) {
    // Not an isolation question on the way back: a plain kernel failure.
    return Error(ErrorKind::kKernel, s.error().msg());
  }
  return s;
}

Status check_rdma_device(const AttachmentRecord& record, const Netns& pod) {
  const bool ours = record.step(StepKind::kRdmaMove) ||
                    record.step(StepKind::kRdmaMoveBeforeNetdev) ||
                    record.step(StepKind::kRdmaMoveAsWritten) || record.step(StepKind::kSoftRoce);
  if (!record.rdma || record.rdma->index < 0 || !ours) {
    return ok_status();
  }
  TRY_ASSIGN(auto nl, Nldev::open_in(pod));
  auto dev = nl.device(static_cast<uint32_t>(record.rdma->index));
  if (!dev) {
    return Error(ErrorKind::kDeviceNotFound, "CHECK: RDMA device " + record.rdma->device +
                                                 " is not in the pod: " + dev.error().msg());
  }
  return ok_status();
}

}  // namespace rdmanet::plugin
