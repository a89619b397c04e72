#include "agent/networks_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "base/files.h"
#include "base/json_fields.h"

namespace rdmanet::agent {

namespace {

constexpr size_t kMaxConfig = 1 << 20;

Expected<std::string> read_link(const std::string& path) {
  char target[PATH_MAX];
  ssize_t n = ::readlink(path.c_str(), target, sizeof(target) - 1);
  if (n < 0) {
    return Error(ErrorKind::kIo, "readlink " + path + ": " + std::strerror(errno));
  }
  return std::string(target, static_cast<size_t>(n));
}

// Where a ConfigMap key's content is: "<dir>/..<timestamp>/<name>", when `name` is the
// link "..data/<name>" and "..data" the link "..<timestamp>" to a private directory.
Expected<std::string> config_map_key(const std::string& dir, const std::string& name) {
  TRY_ASSIGN(std::string target, read_link(dir + "/" + name));
  if (target != "..data/" + name) {
    return Error(ErrorKind::kIo, dir + "/" + name + " is a link to \"" + target +
                                     "\", not a ConfigMap key (..data/" + name + ")");
  }
  TRY_ASSIGN(std::string data, read_link(dir + "/..data"));
  if (data.rfind("..", 0) != 0 || data.find('/') != std::string::npos || data == "..") {
    return Error(ErrorKind::kIo,
                 dir + "/..data points at \"" + data + "\", not a directory of the volume");
  }
  TRY(check_private_directory(dir + "/" + data));
  return dir + "/" + data + "/" + name;
}

Expected<nlohmann::json> read_config(const std::string& dir, const std::string& name) {
  const std::string path = dir + "/" + name;
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    return Error(ErrorKind::kIo, "stat " + path + ": " + std::strerror(errno));
  }
  std::string file = path;
  if (S_ISLNK(st.st_mode)) {
    TRY_ASSIGN(file, config_map_key(dir, name));
  } else if (!S_ISREG(st.st_mode)) {
    return Error(ErrorKind::kIo, path + " is neither a file nor a ConfigMap key");
  }
  TRY_ASSIGN(auto text, read_file(file, kMaxConfig));
  if (!text) {
    return Error(ErrorKind::kIo, file + " is gone");
  }
  nlohmann::json doc = parse_json(*text);
  if (!doc.is_object() || !doc.value("name", nlohmann::json()).is_string()) {
    return Error(ErrorKind::kInvalidConfig, path + " is not a network config with a \"name\"");
  }
  return doc;
}

}  // namespace

NetworksDir read_networks_dir(const std::string& dir) {
  NetworksDir out;
  struct stat st {};
  if (dir.empty() || (::stat(dir.c_str(), &st) != 0 && errno == ENOENT)) {
    return out;
  }
  if (auto trusted = check_private_directory(dir); !trusted) {
    out.problems.push_back(std::move(trusted).error());
    return out;
  }
  auto names = directory_entries(dir);
  if (!names) {
    out.problems.push_back(std::move(names).error());
    return out;
  }
  std::sort(names->begin(), names->end());
  for (const auto& name : *names) {
    if (name[0] == '.') {
      continue;  // the volume's own: ..data, ..<timestamp>
    }
    auto doc = read_config(dir, name);
    if (!doc) {
      out.problems.push_back(std::move(doc).error());
      continue;
    }
    std::string network = (*doc)["name"].get<std::string>();
    out.networks[network] = std::move(*doc);
  }
  return out;
}

}  // namespace rdmanet::agent
