#include "plugin/store.h"

#include <dirent.h>
#include <unistd.h>

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
  return check_private_directory(dir).with_context("state directory");
}

// Removes a file and the temporary a killed write of it can leave (write_file_atomically
// writes <path>.tmp, then renames).
Status remove_file(const std::string& path) {
  for (const std::string& p : {path + ".tmp", path}) {
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
  std::string path = attachment_path(id);
  TRY_ASSIGN(auto doc, read_json_object(path, "state file"));
  if (!doc) {
    return std::optional<AttachmentRecord>();
  }
  TRY_ASSIGN(auto record, parse_record(*doc, path));
  return std::optional<AttachmentRecord>(std::move(record));
}

Status StateStore::save(const AttachmentRecord& record) {
  TRY(ensure_dirs(root_, bounded_name(record.network)));
  return write_file_atomically(attachment_path(record.id()), record.to_json().dump(2), 0600);
}

Status StateStore::forget(const AttachmentId& id) { return remove_file(attachment_path(id)); }

Expected<std::optional<AttachmentId>> StateStore::holder(const std::string& key) const {
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
  return write_file_atomically(root_ + "/holds/" + key, doc.dump(), 0600);
}

Status StateStore::clear_holder(const std::string& key, const AttachmentId& id) {
  auto current = holder(key);
  if (current && current->has_value() && **current != id) {
    return ok_status();  // someone else holds it now; not ours to clear
  }
  return remove_file(root_ + "/holds/" + key);
}

Expected<std::vector<AttachmentRecord>> StateStore::list(const std::string& network) const {
  std::vector<AttachmentRecord> out;
  std::string dir = root_ + "/" + bounded_name(network);
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) {
      return out;
    }
    return Error(ErrorKind::kIo, "list " + dir + ": " + std::strerror(errno));
  }
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.size() < 6 || name.compare(name.size() - 5, 5, ".json") != 0) {
      continue;
    }
    auto doc = read_json_object(dir + "/" + name, "state file");
    if (!doc || !doc->has_value()) {
      continue;
    }
    if (auto record = parse_record(**doc, dir + "/" + name); record) {
      out.push_back(std::move(*record));
    }
  }
  ::closedir(d);
  return out;
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
