#include "agent/orphan_book.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/files.h"
#include "base/json_fields.h"

namespace rdmanet::agent {

using nlohmann::json;

OrphanBook::OrphanBook(const std::string& state_dir) : path_(state_dir + "/.agent/orphans.json") {
  auto text = read_file(path_);
  if (!text) {
    spdlog::warn("node-agent: {} (starting afresh)", text.error().msg());
    return;
  }
  if (!*text) {
    return;
  }
  json doc = parse_json(**text);
  if (!doc.is_object()) {
    spdlog::warn("node-agent: {} is not a JSON object (starting afresh)", path_);
    return;
  }
  for (const auto& [key, value] : doc.items()) {
    if (value.is_number_integer()) {
      since_[key] = value.get<long long>();
    }
  }
}

long long OrphanBook::first_seen(const std::string& key, long long now) {
  seen_.insert(key);
  auto [it, added] = since_.try_emplace(key, now);
  changed_ |= added;
  return it->second;
}

void OrphanBook::forget(const std::string& key) {
  seen_.erase(key);
  changed_ |= since_.erase(key) > 0;
}

Status OrphanBook::save() {
  changed_ |=
      std::erase_if(since_, [&](const auto& entry) { return !seen_.count(entry.first); }) > 0;
  if (!changed_) {
    return ok_status();
  }
  if (since_.empty()) {
    if (::unlink(path_.c_str()) != 0 && errno != ENOENT) {
      return Error(ErrorKind::kIo, "cannot remove " + path_ + ": " + std::strerror(errno));
    }
    return ok_status();
  }
  TRY(make_directories(parent_of(path_), 0700));
  return write_file_atomically(path_, json(since_).dump() + "\n", 0600, Survives::kProcessCrash);
}

}  // namespace rdmanet::agent
