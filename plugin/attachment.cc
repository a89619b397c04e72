#include "plugin/attachment.h"

#include <spdlog/spdlog.h>

#include "netns/link_identity.h"
#include "plugin/steps/table.h"

namespace rdmanet::plugin {

std::string RailLink::summary(const std::string& ifname) const {
  std::string out = (carrier ? "carrier on " : "no carrier on ") + ifname;
  if (!rdma_port.empty()) {
    out += ", RDMA port " + rdma_port + " " + rdma_state;
  }
  return out;
}

Expected<std::optional<netns::Netns>> open_pod_netns(const AttachmentRecord& record) {
  if (record.netns.empty()) {
    return std::optional<netns::Netns>();
  }
  TRY_ASSIGN(auto opened, netns::Netns::open_if_still_there(record.netns));
  if (!opened || record.netns_cookie == 0) {
    return opened;
  }
  TRY_ASSIGN(uint64_t cookie, opened->cookie());
  if (cookie != record.netns_cookie) {
    spdlog::warn("netns {} is no longer the pod's (cookie {}, ADD saw {}): treating it as gone",
                 record.netns, cookie, record.netns_cookie);
    return std::optional<netns::Netns>();
  }
  return opened;
}

Expected<Attachment> Attachment::for_add(const PluginConf& conf, const cni::Call& call,
                                         std::span<const cni::Plugin* const> linked_ipam) {
  TRY_ASSIGN(auto pod, netns::Netns::open(call.env.netns));
  TRY_ASSIGN(auto host, netns::Netns::current());
  if (pod.same_as(host)) {
    return Error(ErrorKind::kInvalidEnvironment,
                 "CNI_NETNS " + call.env.netns + " is the plugin's own (host) netns");
  }
  AttachmentRecord record;
  record.network = conf.net.name;
  record.container_id = call.env.container_id;
  record.ifname = call.env.ifname;
  record.netns = call.env.netns;
  if (!call.args.k8s_pod_namespace.empty() || !call.args.k8s_pod_name.empty()) {
    record.pod = call.args.k8s_pod_namespace + "/" + call.args.k8s_pod_name;
  }
  if (auto cookie = pod.cookie(); cookie) {
    record.netns_cookie = *cookie;
  } else {
    spdlog::info("no netns cookie ({}): DEL cannot tell a reused netns path", cookie.error().msg());
  }
  TRY_ASSIGN(auto rtnl, netns::Rtnl::open());
  TRY_ASSIGN(record.netns_id, netns::assign_netns_id(rtnl, pod));
  record.mode = conf.mode;
  record.device_key = device_key(conf.device);
  record.config = call.stdin_text;
  Attachment a(StateStore(conf.state_dir), std::move(record), std::move(host), std::move(pod),
               call.env, IpamPlugins{linked_ipam, conf.ipam_timeout_seconds});
  a.conf_ = &conf;
  a.call_ = &call;
  return a;
}

Expected<Attachment> Attachment::for_undo(const UndoContext& context, AttachmentRecord record) {
  TRY_ASSIGN(auto host, netns::Netns::current());
  // Could not look is not gone: the error keeps the record for the next DEL.
  TRY_ASSIGN(auto pod, open_pod_netns(record).with_context("pod netns of " + record.id().str()));
  cni::Environment own = context.env;
  own.container_id = record.container_id;
  own.ifname = record.ifname;
  own.netns = record.netns;
  return Attachment(StateStore(context.state_dir), std::move(record), std::move(host),
                    std::move(pod), std::move(own), context.ipam);
}

Status Attachment::record(StepKind kind, nlohmann::json data) {
  record_.steps.push_back({kind, std::move(data)});
  auto saved = store_.save(record_);
  if (!saved) {
    record_.steps.pop_back();  // the step will not run: nothing of it to undo
  }
  return saved;
}

void Attachment::amend(StepKind kind, nlohmann::json data) {
  if (!record_.steps.empty() && record_.steps.back().kind == kind) {
    record_.steps.back().data = std::move(data);
  }
}

Status Attachment::undo() {
  order_for_undo(record_.steps);
  const bool taken = device_held_by_another();
  const size_t recorded = record_.steps.size();
  while (!record_.steps.empty()) {
    const StepRecord& step = record_.steps.back();
    const Step& row = step_of(step.kind);
    if (taken && row.device == DeviceRole::kTouches) {
      spdlog::warn("{}: not undoing {}: device {} is held by another attachment since",
                   record_.id().str(), row.name, record_.device_key);
      record_.steps.pop_back();
      continue;
    }
    if (auto s = row.undo(*this, step.data); !s) {
      Error error = std::move(s).error();
      error.context("undo " + std::string(row.name));
      if (record_.steps.size() < recorded) {
        if (auto saved = store_.save(record_); !saved) {
          spdlog::warn("saving what is left to undo: {}", saved.error().msg());
        }
      }
      return error;
    }
    record_.steps.pop_back();
  }
  return store_.forget(record_.id());
}

bool Attachment::device_held_by_another() const {
  if (record_.mode != Mode::kNetdev) {
    return false;  // a macvlan parent is shared: no hold
  }
  // Within one boot a device's hold names the attachment whose record describes it until
  // that record is undone (claim_device undoes a dead holder's record before it takes the
  // hold). Neither file is synced, so a machine crash can keep a record and lose its hold;
  // after the reboot another pod may have taken the device.
  auto holder = store_.holder(record_.device_key);
  if (!holder) {
    // Not knowably another's: undo goes on, and the hold's own step reports the file.
    return false;
  }
  return holder->has_value() && **holder != record_.id();
}

Expected<cni::Result> Attachment::roll_back_on_error(
    const std::function<Expected<cni::Result>()>& steps) {
  auto result = steps();
  if (result) {
    return result;
  }
  Error error = std::move(result).error();
  spdlog::error("ADD failed, rolling back: {}", error.msg());
  if (auto s = undo(); !s) {
    spdlog::error("rollback incomplete: {}", s.error().msg());
    error.context("rollback incomplete (" + s.error().msg() + ")");
  }
  return error;
}

Expected<cni::Result> Attachment::finish(cni::Result result) {
  record_.phase = Phase::kAdded;
  record_.result = cni::encode_result(result, "1.1.0");
  TRY(store_.save(record_));
  return result;
}

Status undo_attachment(const UndoContext& context, const AttachmentRecord& seen, DeviceLock lock,
                       const std::function<Status(const AttachmentRecord&)>& still_wanted) {
  StateStore store(context.state_dir);
  std::optional<FileLock> held;
  if (lock == DeviceLock::kTake) {
    TRY_ASSIGN(held, store.lock(seen.device_key));
  }
  TRY_ASSIGN(auto record, store.load(seen.id()));
  if (!record) {
    return ok_status();
  }
  if (still_wanted) {
    TRY(still_wanted(*record));
  }
  TRY_ASSIGN(auto a, Attachment::for_undo(context, std::move(*record)));
  return a.undo();
}

}  // namespace rdmanet::plugin
