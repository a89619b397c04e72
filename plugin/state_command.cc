#include "plugin/state_command.h"

#include "base/files.h"
#include "base/hex.h"
#include "base/json_fields.h"
#include "plugin/attachment.h"
#include "plugin/conf.h"
#include "plugin/store.h"

namespace rdmanet::plugin {

namespace {

constexpr const char* kUsage =
    "usage: rdmanet state list [--state-dir DIR]\n"
    "       rdmanet state forget [--state-dir DIR] [--force] FILE...\n"
    "forget drops record files that DEL cannot finish and the holds naming them; it undoes\n"
    "nothing (the record is printed first). A record whose pod netns still exists is kept\n"
    "unless --force: its DEL can still finish it. The default DIR is /var/lib/cni/rdmanet.\n";

// A record's steps by name, in the order ADD took them.
std::string steps_of(const AttachmentRecord& r) {
  std::string out;
  for (const auto& step : r.steps) {
    out += (out.empty() ? "" : " ") + std::string(name_of(step.kind));
  }
  return out.empty() ? "(none)" : out;
}

// Names as they came from the pod or the runtime, shown so no byte can steer a terminal.
std::string shown(const std::string& text) {
  for (unsigned char c : text) {
    if (c < 0x20 || c >= 0x7f) {
      return "hex:" + hex(text);
    }
  }
  return text;
}

int list(StateStore& store, std::ostream& out, std::ostream& err) {
  auto listing = store.list_all();
  if (!listing) {
    err << "rdmanet: " << listing.error().msg() << "\n";
    return 1;
  }
  for (const auto& r : listing->records) {
    out << "network " << r.network << " container " << r.container_id << " ifname "
        << shown(r.ifname) << ": " << name_of(kPhaseNames, r.phase) << ", device "
        << shown(r.device_key) << " (" << shown(r.device_name) << ")\n"
        << "  file  " << store.path_of(r.id()) << "\n"
        << "  steps " << steps_of(r) << "\n";
  }
  for (const auto& file : listing->unreadable) {
    out << "unreadable " << file.path << "\n  " << shown(file.error.msg()) << "\n";
  }
  if (!listing->unreadable.empty()) {
    out << "(DEL cannot finish what it cannot read: check the file, then "
           "`rdmanet state forget FILE`)\n";
  }
  return 0;
}

// The pod netns of the record in `file`, when the record reads and its netns is still the
// one ADD saw; nullopt otherwise (what forget is for).
std::optional<std::string> live_netns(const std::string& file) {
  auto text = read_file(file);
  if (!text || !*text) {
    return std::nullopt;
  }
  auto record = AttachmentRecord::from_json(parse_json(**text), file);
  if (!record) {
    return std::nullopt;
  }
  auto pod = open_pod_netns(*record);
  if (!pod || !*pod) {
    return std::nullopt;
  }
  return record->netns + " (" + record->holder() + ")";
}

int forget(StateStore& store, const std::vector<std::string>& files, bool force, std::ostream& out,
           std::ostream& err) {
  int rc = 0;
  for (const auto& file : files) {
    if (auto netns = live_netns(file); netns && !force) {
      err << "rdmanet: " << file << " is the record of an attachment whose netns " << *netns
          << " still exists: its DEL can still finish it (--force drops it anyway)\n";
      rc = 1;
      continue;
    }
    // What the record said, before it goes: the operator undoes the rest by hand.
    if (auto text = read_file(file); text && *text) {
      out << "forgetting " << file << ":\n" << **text << "\n";
    }
    auto cleared = store.forget_file(file);
    if (!cleared) {
      err << "rdmanet: " << cleared.error().msg() << "\n";
      rc = 1;
      continue;
    }
    for (const auto& key : *cleared) {
      out << "released the hold on " << shown(key) << "\n";
    }
    out << "forgot " << file << " (nothing it describes was undone)\n";
  }
  return rc;
}

}  // namespace

int state_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::string dir = PluginConf().state_dir;
  std::vector<std::string> rest;
  bool force = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--state-dir" && i + 1 < args.size()) {
      dir = args[++i];
    } else if (args[i] == "--force") {
      force = true;
    } else {
      rest.push_back(args[i]);
    }
  }
  if (auto s = check_absolute_path(dir, "--state-dir", ErrorKind::kInvalidConfig); !s) {
    err << "rdmanet: " << s.error().msg() << "\n" << kUsage;
    return 2;
  }
  StateStore store(dir);
  if (rest.size() == 1 && rest[0] == "list") {
    return list(store, out, err);
  }
  if (rest.size() >= 2 && rest[0] == "forget") {
    return forget(store, {rest.begin() + 1, rest.end()}, force, out, err);
  }
  err << kUsage;
  return 2;
}

}  // namespace rdmanet::plugin
