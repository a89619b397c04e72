#include "plugin/pod_files.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <map>
#include <optional>

#include "base/dir.h"
#include "base/file_lock.h"
#include "base/files.h"
#include "base/hex.h"
#include "base/json_fields.h"
#include "plugin/workload_settings.h"

namespace rdmanet::plugin {

using nlohmann::json;

bool is_pod_uid(const std::string& uid) {
  return !uid.empty() && uid.size() <= 64 && std::all_of(uid.begin(), uid.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-';
  });
}

namespace {

constexpr mode_t kReadableDir = 0755;  // pods read it through a hostPath volume
constexpr mode_t kReadableFile = 0644;
constexpr size_t kMaxEntry = 64 << 10;  // one rail's entry is well under 4 kB
// The names rdmanet writes in <uid>/ (and the temporaries Dir::write makes of them).
constexpr const char* kPodFiles[] = {"rails.json", "rdma.env", "nccl.conf", "ucx.conf"};

std::string entry_name(const RailKey& key) {
  return bounded_name(key.container_id) + "." + hex(key.ifname) + ".json";
}

// Logs what the pod left that rdmanet does not use, or fails on a transient error (which
// says nothing about what is there: the caller fails and a later call looks again).
Status skip(const Error& why) {
  if (is_transient(why)) {
    return why;
  }
  spdlog::warn("pod files: skipped {}", why.msg());
  return ok_status();
}

// The rail entries rdmanet wrote in rails/, newest per interface. Whatever else is there (a
// stray file, a directory, a FIFO, a link, something huge or not a rail) is skipped and
// logged.
Expected<std::vector<json>> read_entries(const Dir& rails) {
  std::map<std::string, std::pair<int64_t, json>> newest;
  TRY_ASSIGN(auto names, rails.entries());
  for (const auto& name : names) {
    if (name[0] == '.' || name.size() <= 5 || name.substr(name.size() - 5) != ".json") {
      if (name.find(".rdmanet-tmp") == std::string::npos) {
        TRY(skip(Error(ErrorKind::kIo, rails.path() + "/" + name + ": not a rail entry's name")));
      }
      continue;
    }
    auto text = rails.read_own(name, kMaxEntry);
    if (!text) {
      TRY(skip(text.error()));
      continue;
    }
    json rail = *text ? parse_json(**text) : json();
    if (!rail.is_object() || !rail.contains("interface") || !rail["interface"].is_string()) {
      TRY(skip(Error(ErrorKind::kIo, rails.path() + "/" + name + ": not a rail entry")));
      continue;
    }
    const int64_t added = rail.value("addedAt", int64_t{0});
    auto& slot = newest[rail["interface"].get<std::string>()];
    if (slot.second.is_null() || added >= slot.first) {
      slot = {added, std::move(rail)};
    }
  }
  std::vector<json> out;
  out.reserve(newest.size());
  for (auto& [ifname, entry] : newest) {
    entry.second.erase("addedAt");
    out.push_back(std::move(entry.second));
  }
  return out;
}

// With no entry left: what rdmanet wrote in the pod's directory goes, then the directory
// itself when nothing else is in it.
Status remove_pod_files(const Dir& root, const Dir& pod, const std::string& uid) {
  for (const char* file : kPodFiles) {
    for (const std::string& name : {std::string(file), "." + std::string(file) + ".rdmanet-tmp"}) {
      if (auto s = pod.remove(name); !s) {
        TRY(skip(s.error()));  // a directory the pod made under the name, say
      }
    }
  }
  pod.remove_empty_dir("rails");
  root.remove_empty_dir(uid);
  return ok_status();
}

// rails.json and rdma.env from the entries in rails/ (none: the pod's files go).
Status regenerate(const Dir& root, const Dir& pod, const Dir& rails, const std::string& uid) {
  TRY_ASSIGN(std::vector<json> entries, read_entries(rails));
  if (entries.empty()) {
    return remove_pod_files(root, pod, uid);
  }
  json doc = pod_document(std::move(entries), uid);
  TRY(pod.write("rails.json", doc.dump(2) + "\n", kReadableFile));
  TRY(pod.write("rdma.env", env_file(doc), kReadableFile));
  TRY(pod.write("nccl.conf", env_file(doc, "NCCL_"), kReadableFile));
  return pod.write("ucx.conf", env_file(doc, "UCX_", ucx_notes(doc)), kReadableFile);
}

Expected<Dir> trusted_root(const std::string& path) {
  TRY_ASSIGN(auto root, Dir::open(path));
  if (!root) {
    return Error(ErrorKind::kIo, "podInfoDir " + path + " is not there");
  }
  TRY(check_private_directory(path));
  return std::move(*root);
}

}  // namespace

Status PodInfoStore::check(const std::string& uid) const {
  if (!is_pod_uid(uid)) {
    return Error(ErrorKind::kInvalidEnvironment,
                 "CNI_ARGS K8S_POD_UID " + in_quotes(uid) +
                     " is not a pod UID (1-64 letters, digits and '-')");
  }
  struct stat st {};
  if (::lstat(root_.c_str(), &st) != 0 && errno == ENOENT) {
    return ok_status();  // put creates it
  }
  return check_private_directory(root_).with_context("podInfoDir");
}

Expected<FileLock> PodInfoStore::lock(const std::string& uid) const {
  TRY(make_directories(lock_dir_, 0700));
  return FileLock::acquire_within(lock_dir_ + "/pod-" + uid + ".lock", lock_wait_);
}

Status PodInfoStore::put(const RailKey& key, const json& rail) {
  TRY(check(key.uid));
  TRY(make_directories(root_, kReadableDir));
  TRY_ASSIGN(Dir root, trusted_root(root_));
  TRY_ASSIGN(auto lock, this->lock(key.uid));
  TRY_ASSIGN(Dir pod, root.make_sub(key.uid, kReadableDir));
  TRY_ASSIGN(Dir rails, pod.make_sub("rails", kReadableDir));
  json entry = rail;
  entry["addedAt"] = std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  entry["sandbox"] = key.container_id;
  TRY(rails.write(entry_name(key), entry.dump(2) + "\n", kReadableFile));
  return regenerate(root, pod, rails, key.uid);
}

Status PodInfoStore::remove(const RailKey& key) {
  if (!is_pod_uid(key.uid)) {
    return Error(ErrorKind::kState, "pod-info uid " + in_quotes(key.uid) + " is not a pod UID");
  }
  TRY_ASSIGN(auto root, Dir::open(root_));
  if (!root) {
    return ok_status();  // nothing was ever written
  }
  if (auto trusted = check_private_directory(root_); !trusted) {
    Error why = std::move(trusted).error();
    return skip(why.context("podInfoDir: not touched"));
  }
  TRY_ASSIGN(auto lock, this->lock(key.uid));
  auto pod = root->sub(key.uid);
  if (!pod || !*pod) {
    return pod ? ok_status() : skip(pod.error());
  }
  auto rails = (*pod)->sub("rails");
  if (!rails) {
    return skip(rails.error());
  }
  if (!*rails) {  // an ADD that stopped before its first entry
    return remove_pod_files(*root, **pod, key.uid);
  }
  const std::string entry = entry_name(key);
  for (const std::string& name : {entry, "." + entry + ".rdmanet-tmp"}) {
    if (auto s = (*rails)->remove(name); !s) {
      TRY(skip(s.error()));
    }
  }
  return regenerate(*root, **pod, **rails, key.uid);
}

Expected<std::optional<json>> PodInfoStore::refresh_gids(const RailKey& key, const json& fields) {
  if (!is_pod_uid(key.uid)) {
    return Error(ErrorKind::kState, "pod-info uid " + in_quotes(key.uid) + " is not a pod UID");
  }
  TRY_ASSIGN(auto root, Dir::open(root_));
  if (!root) {
    return std::optional<json>();
  }
  TRY(check_private_directory(root_).with_context("podInfoDir"));
  TRY_ASSIGN(auto lock, this->lock(key.uid));
  TRY_ASSIGN(auto pod, root->sub(key.uid));
  if (!pod) {
    return std::optional<json>();
  }
  TRY_ASSIGN(auto rails, pod->sub("rails"));
  if (!rails) {
    return std::optional<json>();
  }
  const std::string name = entry_name(key);
  TRY_ASSIGN(auto text, rails->read_own(name, kMaxEntry));
  json entry = text ? parse_json(*text) : json();
  if (!entry.is_object() || !entry.contains("rdma") || !entry["rdma"].is_object()) {
    return std::optional<json>();  // gone, or a rail without RDMA: nothing to keep current
  }
  json& rdma = entry["rdma"];
  json before = rdma.value("gidIndex", json::object());
  if (before == fields.value("gidIndex", json::object())) {
    return std::optional<json>();
  }
  rdma.update(fields);
  TRY(rails->write(name, entry.dump(2) + "\n", kReadableFile));
  TRY(regenerate(*root, *pod, *rails, key.uid));
  return std::optional<json>(std::move(before));
}

}  // namespace rdmanet::plugin
