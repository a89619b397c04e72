#include "netns/sysctl.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "base/fd.h"
#include "netns/link.h"

namespace rdmanet::netns {
namespace {

Expected<std::string> conf_key(const char* family, const std::string& ifname,
                               const std::string& setting) {
  // "all" and "default" are not link names but are valid here.
  if (ifname != "all" && ifname != "default") {
    TRY(check_link_name(ifname));
  }
  bool plain =
      !setting.empty() &&
      setting.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") == std::string::npos;
  if (!plain) {
    return Error(ErrorKind::kInvalidConfig, "invalid sysctl setting \"" + setting + "\"");
  }
  return std::string("net/") + family + "/conf/" + ifname + "/" + setting;
}

Status check_key(const std::string& key) {
  bool bad = key.empty() || key.front() == '/' || key.find("..") != std::string::npos ||
             key.find('\0') != std::string::npos;
  if (bad) {
    return Error(ErrorKind::kInvalidConfig, "invalid sysctl key \"" + key + "\"");
  }
  return ok_status();
}

}  // namespace

Expected<std::string> ipv4_conf_key(const std::string& ifname, const std::string& setting) {
  return conf_key("ipv4", ifname, setting);
}

Expected<std::string> ipv6_conf_key(const std::string& ifname, const std::string& setting) {
  return conf_key("ipv6", ifname, setting);
}

Expected<std::string> read_sysctl(const std::string& key) {
  TRY(check_key(key));
  std::string path = "/proc/sys/" + key;
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    return sys_error("read sysctl " + key, errno);
  }
  std::string value;
  char buf[256];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      return sys_error("read sysctl " + key, errno);
    }
    if (n == 0) {
      break;
    }
    value.append(buf, static_cast<size_t>(n));
  }
  while (!value.empty() && value.back() == '\n') {
    value.pop_back();
  }
  return value;
}

Expected<std::string> write_sysctl(const std::string& key, const std::string& value) {
  TRY_ASSIGN(std::string old, read_sysctl(key));
  std::string path = "/proc/sys/" + key;
  std::string what = "write sysctl " + key + " = " + value;
  Fd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd.valid()) {
    return sys_error(what, errno);
  }
  // One write: /proc/sys parses each write() on its own.
  ssize_t n = ::write(fd.get(), value.data(), value.size());
  if (n < 0) {
    return sys_error(what, errno);
  }
  if (static_cast<size_t>(n) != value.size()) {
    return Error(ErrorKind::kKernel, what + ": short write");
  }
  return old;
}

}  // namespace rdmanet::netns
