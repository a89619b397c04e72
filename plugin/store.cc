#include "plugin/store.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/files.h"
#include "base/hex.h"
#include "base/json_fields.h"

namespace rdmanet::plugin {

using nlohmann::json;

namespace {

Status ensure_dirs(const std::string& root, const std::string& sub) {
  // The root and its parents (e.g. /var/lib/cni) are created as needed.
  std::string dir = sub.empty() ? root : root + "/" + sub;
  TRY(make_directories(dir, 0700).with_context("state directory"));
  // DEL trusts what it reads here: nobody else may be able to write it.
  TRY(check_private_directory(root).with_context("state directory"));
  return check_private_directory(dir).with_context("state directory");
}

// Before reading: a directory that is not there holds nothing; one that is must be private
// (owner, no group or other write, no symlink), or nothing in it is believed.
Status trusted_if_present(const std::string& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 && errno == ENOENT) {
    return ok_status();
  }
  auto s = check_private_directory(dir);
  if (!s) {
    return Error(ErrorKind::kState, "state directory: " + s.error().msg());
  }
  return s;
}

// Removes a file and the temporary a killed write of it can leave (write_file_atomically
// writes <path>.tmp, then renames). Files that are not there are not unlinked, so a DEL of
// nothing works on a read-only state directory (unlink says EROFS before it looks).
Status remove_file(const std::string& path) {
  for (const std::string& p : {path + ".tmp", path}) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0 && errno == ENOENT) {
      continue;
    }
    if (::unlink(p.c_str()) != 0 && errno != ENOENT) {
      return Error(ErrorKind::kIo, "remove " + p + ": " + std::strerror(errno));
    }
  }
  return ok_status();
}

Expected<std::optional<json>> read_json_object(const std::string& path, const char* what) {
  TRY_ASSIGN(auto text, read_file(path));
  if (!text) {
    return std::optional<json>();
  }
  json doc = parse_json(*text);
  if (!doc.is_object() && changed_before_this_boot(path)) {
    // Records and holds are not synced (store.h): after a machine crash a file can have its
    // name without its content. What it described went with that boot's namespaces.
    spdlog::warn("{} {} was cut short by a machine crash before this boot; taken as absent", what,
                 path);
    return std::optional<json>();
  }
  if (!doc.is_object()) {
    return Error(ErrorKind::kState, std::string(what) + " " + path + " is not a JSON object");
  }
  return std::optional<json>(std::move(doc));
}

Expected<AttachmentRecord> parse_record(const json& doc, const std::string& path) {
  return AttachmentRecord::from_json(doc, path);
}

}  // namespace

Expected<FileLock> StateStore::lock(const std::string& key) {
  TRY(ensure_dirs(root_, "locks"));
  return FileLock::acquire(root_ + "/locks/" + key + ".lock");
}

std::string StateStore::attachment_path(const AttachmentId& id) const {
  return root_ + "/" + bounded_name(id.network) + "/" + bounded_name(id.container_id) + "." +
         hex(id.ifname) + ".json";
}

Expected<std::optional<AttachmentRecord>> StateStore::load(const AttachmentId& id) const {
  TRY(trusted_if_present(root_));
  TRY(trusted_if_present(root_ + "/" + bounded_name(id.network)));
  std::string path = attachment_path(id);
  TRY_ASSIGN(auto doc, read_json_object(path, "state file"));
  if (!doc) {
    return std::optional<AttachmentRecord>();
  }
  TRY_ASSIGN(auto record, parse_record(*doc, path));
  if (record.id() != id) {
    return Error(ErrorKind::kState, "state file " + path + " is the record of " +
                                        record.id().str() + ", not of " + id.str());
  }
  return std::optional<AttachmentRecord>(std::move(record));
}

Status StateStore::save(const AttachmentRecord& record) {
  TRY(ensure_dirs(root_, bounded_name(record.network)));
  return write_file_atomically(attachment_path(record.id()), record.to_json().dump(2), 0600,
                               Survives::kProcessCrash);
}

Status StateStore::forget(const AttachmentId& id) { return remove_file(attachment_path(id)); }

Expected<std::optional<AttachmentId>> StateStore::holder(const std::string& key) const {
  TRY(trusted_if_present(root_));
  TRY(trusted_if_present(root_ + "/holds"));
  std::string path = root_ + "/holds/" + key;
  TRY_ASSIGN(auto doc, read_json_object(path, "hold file"));
  if (!doc) {
    return std::optional<AttachmentId>();
  }
  AttachmentId id;
  Fields f(*doc, path, ErrorKind::kState);
  f.required_string("network", &id.network).required_string("containerID", &id.container_id);
  f.required_string("ifname", &id.ifname);
  TRY(f.status());
  return std::optional<AttachmentId>(std::move(id));
}

Status StateStore::set_holder(const std::string& key, const AttachmentId& id) {
  TRY(ensure_dirs(root_, "holds"));
  json doc = {{"network", id.network}, {"containerID", id.container_id}, {"ifname", id.ifname}};
  return write_file_atomically(root_ + "/holds/" + key, doc.dump(), 0600, Survives::kProcessCrash);
}

Status StateStore::clear_holder(const std::string& key, const AttachmentId& id) {
  auto current = holder(key);
  if (current && current->has_value() && **current != id) {
    return ok_status();  // someone else holds it now; not ours to clear
  }
  return remove_file(root_ + "/holds/" + key);
}

Expected<StateStore::Listing> StateStore::list(const std::string& network) const {
  TRY(trusted_if_present(root_));
  Listing out;
  TRY(list_into(root_ + "/" + bounded_name(network), &out));
  return out;
}

Expected<StateStore::Listing> StateStore::list_all() const {
  TRY(trusted_if_present(root_));
  Listing out;
  TRY_ASSIGN(auto networks, directory_entries(root_));
  for (const auto& name : networks) {
    struct stat st {};
    std::string dir = root_ + "/" + name;
    // No network name starts with a dot: ".agent" is the node agent's (agent/node_agent.h).
    if (name != "holds" && name != "locks" && name[0] != '.' && ::lstat(dir.c_str(), &st) == 0 &&
        S_ISDIR(st.st_mode)) {
      if (auto s = list_into(dir, &out); !s) {
        out.unreadable.push_back({dir, std::move(s).error()});
      }
    }
  }
  return out;
}

Status StateStore::list_into(const std::string& dir, Listing* out) const {
  TRY(trusted_if_present(dir));
  TRY_ASSIGN(auto names, directory_entries(dir));
  std::sort(names.begin(), names.end());
  for (const auto& name : names) {
    if (name.size() <= 5 || name.compare(name.size() - 5, 5, ".json") != 0) {
      continue;
    }
    std::string path = dir + "/" + name;
    auto doc = read_json_object(path, "state file");
    if (doc && !doc->has_value()) {
      continue;  // removed meanwhile
    }
    auto record = doc ? parse_record(**doc, path) : Expected<AttachmentRecord>(doc.error());
    if (record && attachment_path(record->id()) != path) {
      record = Error(ErrorKind::kState, "state file " + path + " holds the record of " +
                                            record->id().str() + ", whose file is another");
    }
    if (record) {
      out->records.push_back(std::move(*record));
    } else {
      out->unreadable.push_back({path, std::move(record).error()});
    }
  }
  return ok_status();
}

Expected<std::vector<std::string>> StateStore::forget_file(const std::string& path) {
  TRY(trusted_if_present(root_));
  // Only a record file of this store: <root>/<network dir>/<container>.<hex ifname>.json.
  const std::string prefix = root_ + "/";
  std::string rest = path.rfind(prefix, 0) == 0 ? path.substr(prefix.size()) : "";
  size_t slash = rest.find('/');
  std::string dir = rest.substr(0, slash);
  std::string file = slash == std::string::npos ? "" : rest.substr(slash + 1);
  const bool is_json = file.size() > 5 && file.compare(file.size() - 5, 5, ".json") == 0;
  std::string stem = is_json ? file.substr(0, file.size() - 5) : "";
  size_t dot = stem.rfind('.');
  if (dir.empty() || dir == "holds" || dir == "locks" || dir == "." || dir == ".." ||
      file.find('/') != std::string::npos || !is_json || dot == std::string::npos || dot == 0) {
    return Error(ErrorKind::kInvalidConfig,
                 path + " is not an attachment record of state directory " + root_);
  }
  TRY(trusted_if_present(root_ + "/" + dir));
  // The attachment as the file's name gives it (its content may be what cannot be read).
  std::string container = stem.substr(0, dot);
  std::string ifname = unhex(stem.substr(dot + 1));
  std::vector<std::string> cleared;
  TRY(trusted_if_present(root_ + "/holds"));
  TRY_ASSIGN(auto keys, directory_entries(root_ + "/holds"));
  for (const auto& key : keys) {
    auto held = holder(key);
    if (held && held->has_value() && bounded_name((*held)->network) == dir &&
        bounded_name((*held)->container_id) == container && (*held)->ifname == ifname) {
      TRY(remove_file(root_ + "/holds/" + key));
      cleared.push_back(key);
    }
  }
  TRY(remove_file(path));
  return cleared;
}

Status StateStore::check_writable() {
  TRY(ensure_dirs(root_, ""));
  if (::access(root_.c_str(), W_OK | X_OK) != 0) {
    return Error(ErrorKind::kNotAvailable,
                 "state directory " + root_ + " is not writable: " + std::strerror(errno));
  }
  return ok_status();
}

}  // namespace rdmanet::plugin
