#include "agent/networks_dir.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>

#include "base/dir.h"
#include "base/files.h"
#include "base/json_fields.h"

namespace rdmanet::agent {

namespace {

constexpr size_t kMaxConfig = 1 << 20;

// The directory of the volume a ConfigMap key's content is in ("..<timestamp>"), when the
// entry `name` is the link "..data/<name>" and "..data" the link "..<timestamp>" to a
// private directory of `dir`.
Expected<Dir> config_map_data(const Dir& dir, const std::string& name) {
  TRY_ASSIGN(std::string target, dir.link_target(name));
  if (target != "..data/" + name) {
    return Error(ErrorKind::kIo, dir.path() + "/" + name + " is a link to \"" + target +
                                     "\", not a ConfigMap key (..data/" + name + ")");
  }
  TRY_ASSIGN(std::string data, dir.link_target("..data"));
  if (data.rfind("..", 0) != 0 || data.find('/') != std::string::npos || data == "..") {
    return Error(ErrorKind::kIo,
                 dir.path() + "/..data points at \"" + data + "\", not a directory of the volume");
  }
  TRY_ASSIGN(auto volume, dir.sub(data));
  if (!volume) {
    return Error(ErrorKind::kIo, dir.path() + "/" + data + " is gone");
  }
  TRY(volume->check_private());
  return std::move(*volume);
}

// The config `name` of `dir`: a regular file, or a ConfigMap key; read relative to the open
// directory, never following any other link.
Expected<nlohmann::json> read_config(const Dir& dir, const std::string& name) {
  const std::string path = dir.path() + "/" + name;
  struct stat st {};
  if (::fstatat(dir.fd(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return io_error("stat " + path, errno);
  }
  std::optional<Dir> volume;
  if (S_ISLNK(st.st_mode)) {
    TRY_ASSIGN(volume, config_map_data(dir, name));
  } else if (!S_ISREG(st.st_mode)) {
    return Error(ErrorKind::kIo, path + " is neither a file nor a ConfigMap key");
  }
  const Dir& in = volume ? *volume : dir;
  const std::string file = in.path() + "/" + name;
  TRY_ASSIGN(auto text, read_file_at(in.fd(), name, file, {.max_size = kMaxConfig}));
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

NetworksDir read_networks_dir(const std::string& path) {
  NetworksDir out;
  if (path.empty()) {
    return out;
  }
  auto dir = Dir::open(path);
  if (!dir) {
    out.problems.push_back(std::move(dir).error());
    return out;
  }
  if (!*dir) {
    return out;  // a missing directory holds none
  }
  if (auto trusted = (*dir)->check_private(); !trusted) {
    out.problems.push_back(std::move(trusted).error());
    return out;
  }
  auto names = (*dir)->entries();
  if (!names) {
    out.problems.push_back(std::move(names).error());
    return out;
  }
  std::sort(names->begin(), names->end());
  for (const auto& name : *names) {
    if (name[0] == '.') {
      continue;  // the volume's own: ..data, ..<timestamp>
    }
    auto doc = read_config(**dir, name);
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
