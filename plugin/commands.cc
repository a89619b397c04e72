#include "plugin/commands.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "base/json_fields.h"
#include "cni/delegate.h"
#include "cni/error_code.h"
#include "plugin/attachment.h"
#include "plugin/conf.h"
#include "plugin/steps/ipam.h"
#include "plugin/steps/pod_interface.h"
#include "plugin/steps/rdma_move.h"
#include "plugin/steps/table.h"

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

// What DEL and GC undo with: the config's state dir and IPAM timeout, read leniently.
UndoContext undo_context(const cni::Call& call, LinkedIpam ipam) {
  return {state_dir_of(call.conf), call.env, IpamPlugins{ipam, ipam_timeout_of(call.conf)}};
}

AttachmentId id_of(const cni::Call& call) {
  return {call.conf.name, call.env.container_id, call.env.ifname};
}

// ADD's steps in the table's order: those that only look, then, once the first one records,
// the rest under roll_back_on_error, so a failure undoes what was recorded.
Expected<cni::Result> run_add(Attachment& a) {
  auto steps = add_steps();
  auto changing = std::find_if(steps.begin(), steps.end(), [](const Step& s) { return s.kind; });
  for (auto it = steps.begin(); it != changing; ++it) {
    TRY(it->run(a));
  }
  return a.roll_back_on_error([&]() -> Expected<cni::Result> {
    for (auto it = changing; it != steps.end(); ++it) {
      if (it->run != nullptr) {
        TRY(it->run(a));
      }
    }
    return a.finish(build_result(a));
  });
}

}  // namespace

Expected<cni::Result> cmd_add(const cni::Call& call, LinkedIpam ipam) {
  TRY_ASSIGN(PluginConf conf, load_conf(call.conf, call.args));
  TRY_ASSIGN(Attachment a, Attachment::for_add(conf, call, ipam));
  TRY_ASSIGN(FileLock lock, a.store().lock(a.rec().device_key));
  auto result = run_add(a);
  if (result) {
    spdlog::info("attached {} ({}) to {} as {} in {} mode{}", a.rec().device_name,
                 conf.device.str(), call.env.netns, call.env.ifname, name_of(kModeNames, conf.mode),
                 a.rec().rdma ? ", RDMA device " + a.rec().rdma->device : "");
  }
  return result;
}

Status cmd_del(const cni::Call& call, LinkedIpam ipam) {
  const UndoContext context = undo_context(call, ipam);
  StateStore store(context.state_dir);
  TRY_ASSIGN(auto record, store.load(id_of(call)));
  if (!record) {
    // Nothing attached (repeated DEL, or DEL after a failed ADD that rolled back). IPAM DEL
    // is idempotent and frees anything a crash left behind.
    TRY(store.forget(id_of(call)));
    if (call.conf.ipam_type.empty()) {
      return ok_status();
    }
    return ipam_del(context.ipam, call.conf.ipam_type, call.env, call.stdin_text);
  }
  return undo_attachment(context, *record, DeviceLock::kTake);
}

Status cmd_check(const cni::Call& call, LinkedIpam ipam) {
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
  const IpamPlugins plugins{ipam, conf.ipam_timeout_seconds};
  return cni::delegate_command(call.conf.ipam_type, cni::Command::kCheck, call.env, call.stdin_text,
                               plugins.options(call.conf.ipam_type));
}

Status cmd_status(const cni::Call& call, LinkedIpam ipam) {
  StateStore store(state_dir_of(call.conf));
  if (auto s = store.check_writable(); !s) {
    return Error(ErrorKind::kNotAvailable, s.error().msg());
  }
  if (call.conf.ipam_type.empty()) {
    return ok_status();
  }
  const IpamPlugins plugins{ipam, ipam_timeout_of(call.conf)};
  auto s = cni::delegate_command(call.conf.ipam_type, cni::Command::kStatus, call.env,
                                 call.stdin_text, plugins.options(call.conf.ipam_type));
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

Status cmd_gc(const cni::Call& call, LinkedIpam ipam) {
  const UndoContext context = undo_context(call, ipam);
  StateStore store(context.state_dir);
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
      if (auto s = undo_attachment(context, record, DeviceLock::kTake); !s) {
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
                                   ipam_gc_request(call, kept),
                                   context.ipam.options(call.conf.ipam_type));
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

cni::Plugin cni_plugin(LinkedIpam ipam) {
  cni::Plugin plugin;
  plugin.name = "rdmanet";
  plugin.known_args = {"MAC", "IP"};
  plugin.add = [ipam](const cni::Call& call) { return cmd_add(call, ipam); };
  plugin.del = [ipam](const cni::Call& call) { return cmd_del(call, ipam); };
  plugin.check = [ipam](const cni::Call& call) { return cmd_check(call, ipam); };
  plugin.status = [ipam](const cni::Call& call) { return cmd_status(call, ipam); };
  plugin.gc = [ipam](const cni::Call& call) { return cmd_gc(call, ipam); };
  return plugin;
}

}  // namespace rdmanet::plugin
