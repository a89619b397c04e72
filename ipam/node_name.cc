#include "ipam/node_name.h"

#include <cstring>

#include "base/files.h"

namespace rdmanet::ipam {

namespace {

// A Kubernetes node name: a DNS-1123 subdomain.
bool is_node_name(const std::string& name) {
  if (name.empty() || name.size() > 253) {
    return false;
  }
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.')) {
      return false;
    }
  }
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  return alnum(name.front()) && alnum(name.back());
}

}  // namespace

Expected<std::string> read_node_name(const std::string& file) {
  auto unreadable = [&](const std::string& why) {
    return Error(ErrorKind::kTryAgainLater,
                 "cluster mode needs the node name in " + file + ": " + why +
                     " (the rdmanet DaemonSet writes it from NODE_NAME; is it running here?)");
  };
  // A node name is at most 253 bytes; a larger file is not one (and is not read whole).
  auto text = read_file(file, 4096);
  if (!text) {
    return unreadable(text.error().msg());
  }
  if (!*text) {
    return unreadable(std::strerror(ENOENT));
  }
  std::string name = text->value().substr(0, text->value().find('\0'));
  while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) {
    name.pop_back();
  }
  if (!is_node_name(name)) {
    return Error(ErrorKind::kInvalidConfig, "the node name in " + file +
                                                " is not a Kubernetes node name: \"" +
                                                name.substr(0, 64) + "\"");
  }
  return name;
}

}  // namespace rdmanet::ipam
