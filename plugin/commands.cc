#include "plugin/commands.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "base/json_fields.h"
#include "cni/delegate.h"
#include "cni/error_code.h"
#include "plugin/attachment.h"
#include "plugin/conf.h"
#include "plugin/steps.h"

namespace rdmanet::plugin {

namespace {

const PluginConf& defaults() {
  static const PluginConf conf;
  return conf;
}

// The state dir and IPAM timeout of a config, read leniently: DEL and GC must work even
// when the rest of the config no longer loads.
std::string state_dir_of(const cni::NetConf& net) {
  std::string dir = defaults().state_dir;
  Fields(net.raw, "", ErrorKind::kInvalidConfig).string("stateDir", &dir);
  return dir.empty() || dir[0] != '/' ? defaults().state_dir : dir;
}

int ipam_timeout_of(const cni::NetConf& net) {
  int seconds = defaults().ipam_timeout_seconds;
  Fields(net.raw, "", ErrorKind::kInvalidConfig).integer("ipamTimeout", &seconds);
  return std::clamp(seconds, 1, 600);
}

AttachmentId id_of(const cni::Call& call) {
  return {call.conf.name, call.env.container_id, call.env.ifname};
}

// Undoes an attachment a record describes, under its device's lock. Read again under the
// lock: a new pod's ADD may have reclaimed the device (and removed the record) meanwhile.
Status undo_attachment(StateStore& store, const AttachmentId& id, const std::string& device_key,
                       const cni::Environment& env, int ipam_timeout) {
  TRY_ASSIGN(auto lock, store.lock(device_key));
  TRY_ASSIGN(auto record, store.load(id));
  if (!record) {
    return ok_status();
  }
  TRY_ASSIGN(auto a, Attachment::for_undo(store.root(), std::move(*record), env, ipam_timeout));
  return a.undo();
}

}  // namespace

Expected<cni::Result> cmd_add(const cni::Call& call) {
  TRY_ASSIGN(PluginConf conf, load_conf(call.conf, call.args));
  TRY_ASSIGN(Attachment a, Attachment::for_add(conf, call));
  TRY_ASSIGN(FileLock lock, a.store().lock(a.rec().device_key));
  TRY(undo_earlier_add(a));
  TRY(claim_device(a));
  TRY(find_host_device(a));
  TRY(plan_rdma(a));
  TRY(check_node_qos(a));
  auto result = a.roll_back_on_error([&]() -> Expected<cni::Result> {
    TRY(hold_device(a));
    TRY(set_vf_guids(a));
    TRY(move_rdma_device_in(a, RdmaOrder::kBeforeNetdev));
    TRY(conf.mode == Mode::kNetdev ? move_netdev_in(a) : create_macvlan(a));
    TRY(apply_vf_settings(a));
    TRY_ASSIGN(cni::Result ipam, ipam_add(a));
    TRY_ASSIGN(netns::LinkInfo pod_link, configure_pod_interface(a, ipam));
    TRY(add_source_routing(a, ipam, pod_link));
    TRY(create_soft_roce(a));
    TRY(move_rdma_device_in(a, RdmaOrder::kAfterNetdev));
    TRY(set_rdma_cm_defaults(a));
    TRY(wait_for_gids(a, ipam));
    TRY(write_pod_info(a, ipam));
    write_device_info(a);
    return a.finish(build_result(a, pod_link, ipam));
  });
  if (result) {
    spdlog::info("attached {} ({}) to {} as {} in {} mode{}", a.rec().device_name,
                 conf.device.str(), call.env.netns, call.env.ifname, name_of(kModeNames, conf.mode),
                 a.rec().rdma ? ", RDMA device " + a.rec().rdma->device : "");
  }
  return result;
}

Status cmd_del(const cni::Call& call) {
  StateStore store(state_dir_of(call.conf));
  const int timeout = ipam_timeout_of(call.conf);
  TRY_ASSIGN(auto record, store.load(id_of(call)));
  if (!record) {
    // Nothing attached (repeated DEL, or DEL after a failed ADD that rolled back). IPAM DEL
    // is idempotent and frees anything a crash left behind.
    TRY(store.forget(id_of(call)));
    if (call.conf.ipam_type.empty()) {
      return ok_status();
    }
    return ipam_del(call.conf.ipam_type, call.env, call.stdin_text, timeout);
  }
  return undo_attachment(store, id_of(call), record->device_key, call.env, timeout);
}

Status cmd_check(const cni::Call& call) {
  TRY_ASSIGN(PluginConf conf, load_conf(call.conf, call.args));
  StateStore store(conf.state_dir);
  TRY_ASSIGN(auto record, store.load(id_of(call)));
  if (!record || record->phase != Phase::kAdded) {
    return Error(ErrorKind::kUnknownContainer,
                 "no attachment of container " + call.env.container_id + " as " + call.env.ifname +
                     " in network " + call.conf.name);
  }
  TRY_ASSIGN(auto pod, netns::Netns::open(call.env.netns));
  TRY(check_pod_interface(call, conf, pod));
  TRY(check_rdma_device(*record, pod));
  if (call.conf.ipam_type.empty()) {
    return ok_status();
  }
  return cni::delegate_command(call.conf.ipam_type, cni::Command::kCheck, call.env, call.stdin_text,
                               ipam_options(conf.ipam_timeout_seconds));
}

Status cmd_status(const cni::Call& call) {
  StateStore store(state_dir_of(call.conf));
  if (auto s = store.check_writable(); !s) {
    return Error(ErrorKind::kNotAvailable, s.error().msg());
  }
  if (call.conf.ipam_type.empty()) {
    return ok_status();
  }
  auto s = cni::delegate_command(call.conf.ipam_type, cni::Command::kStatus, call.env,
                                 call.stdin_text, ipam_options(ipam_timeout_of(call.conf)));
  if (!s && cni::predates_status(s.error())) {
    // An IPAM plugin older than spec 1.1 cannot answer STATUS; that says nothing about
    // whether it can allocate.
    return ok_status();
  }
  return s;
}

namespace {

// The GC request for the IPAM plugin: the runtime's, with the attachments rdmanet could
// not undo added to the valid ones, since their devices (and addresses) may still be in
// use in a pod.
std::string ipam_gc_request(const cni::Call& call, const std::vector<cni::AttachmentRef>& kept) {
  if (kept.empty()) {
    return call.stdin_text;
  }
  nlohmann::json doc = call.conf.raw;
  nlohmann::json& valid = doc["cni.dev/valid-attachments"];
  if (!valid.is_array()) {
    valid = nlohmann::json::array();
  }
  for (const auto& ref : kept) {
    valid.push_back({{"containerID", ref.container_id}, {"ifname", ref.ifname}});
  }
  return doc.dump();
}

}  // namespace

Status cmd_gc(const cni::Call& call) {
  StateStore store(state_dir_of(call.conf));
  const int timeout = ipam_timeout_of(call.conf);
  // The spec: GC goes on past what it cannot clean up, and passes GC on to IPAM, which
  // releases every lease not in the valid list. So nothing rdmanet could not undo, or
  // could not read, may reach it as invalid: the address may still be in use.
  std::vector<Error> failed;
  std::vector<cni::AttachmentRef> kept;
  bool can_release = true;
  if (auto listing = store.list(call.conf.name); !listing) {
    failed.push_back(std::move(listing).error());
    can_release = false;
  } else {
    for (auto& file : listing->unreadable) {
      failed.push_back(std::move(file.error));
      can_release = false;
    }
    const auto& valid = call.conf.valid_attachments;
    for (const auto& record : listing->records) {
      cni::AttachmentRef ref{record.container_id, record.ifname};
      if (std::find(valid.begin(), valid.end(), ref) != valid.end()) {
        continue;
      }
      spdlog::info("GC: removing attachment {}/{}", record.container_id, record.ifname);
      if (auto s = undo_attachment(store, record.id(), record.device_key, call.env, timeout); !s) {
        failed.push_back(std::move(s).error().context(record.id().str()));
        kept.push_back(std::move(ref));
      }
    }
  }
  if (!call.conf.ipam_type.empty() && !can_release) {
    failed.push_back(Error(ErrorKind::kTryAgainLater,
                           "IPAM GC not run: an attachment record rdmanet cannot read may own "
                           "any of the leases (see `rdmanet state list`)"));
  } else if (!call.conf.ipam_type.empty()) {
    auto s = cni::delegate_command(call.conf.ipam_type, cni::Command::kGc, call.env,
                                   ipam_gc_request(call, kept), ipam_options(timeout));
    if (!s && cni::predates_gc(s.error())) {
      spdlog::warn("the IPAM plugin does not do GC: {}", s.error().msg());
    } else if (!s) {
      failed.push_back(std::move(s).error().context("IPAM GC"));
    }
  }
  if (failed.empty()) {
    return ok_status();
  }
  Error first = failed.front();
  for (size_t i = 1; i < failed.size(); ++i) {
    spdlog::error("GC: {}", failed[i].msg());
    first.append("; " + failed[i].msg());
  }
  return first.context("GC left " + std::to_string(failed.size()) + " thing(s) undone");
}

}  // namespace rdmanet::plugin
