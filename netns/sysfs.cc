#include "netns/sysfs.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "base/fd.h"
#include "base/files.h"

namespace rdmanet::netns {
namespace fs = std::filesystem;
namespace {

bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

bool all_hex(std::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), is_hex); }

// Auxiliary ids look like "<module>.<name>.<n>". The charset keeps '/', NUL and control
// characters out, and without ".." no id can name a parent directory.
bool is_aux_id(std::string_view id) {
  if (id.empty() || id.size() > 64 || id.find("..") != id.npos || id.front() == '.') {
    return false;
  }
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.' || c == ':';
  });
}

// Directory entry names under dir, sorted; an absent directory is an empty list.
Expected<std::vector<std::string>> list_dir(const fs::path& dir, const std::string& what) {
  std::error_code ec;
  std::vector<std::string> names;
  fs::directory_iterator it(dir, ec);
  if (ec == std::errc::no_such_file_or_directory) {
    return names;
  }
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  if (ec) {
    return Error(ErrorKind::kIo, what + ": read " + dir.string() + ": " + ec.message());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// The basename of a symlink's target; std::nullopt when the link does not exist.
Expected<std::optional<std::string>> link_basename(const fs::path& link, const std::string& what) {
  std::error_code ec;
  fs::path target = fs::read_symlink(link, ec);
  if (ec == std::errc::no_such_file_or_directory) {
    return std::optional<std::string>();
  }
  if (ec) {
    return Error(ErrorKind::kIo, what + ": readlink " + link.string() + ": " + ec.message());
  }
  return std::optional<std::string>(target.filename().string());
}

// RDMA devices registered on a device: <dir>/infiniband/*, else <dir>/<child>/infiniband/*.
Expected<std::vector<std::string>> rdma_devices_under(const fs::path& dir,
                                                      const std::string& what) {
  TRY_ASSIGN(std::vector<std::string> direct, list_dir(dir / "infiniband", what));
  if (!direct.empty()) {
    return direct;
  }
  TRY_ASSIGN(std::vector<std::string> children, list_dir(dir, what));
  std::vector<std::string> names;
  for (const auto& child : children) {
    // Only real subdirectories are child devices; symlinks (physfn, virtfnN, driver,
    // subsystem) lead to other devices.
    std::error_code ec;
    if (child == "infiniband" || !fs::is_directory(fs::symlink_status(dir / child, ec)) ||
        !fs::is_directory(dir / child / "infiniband", ec)) {
      continue;
    }
    TRY_ASSIGN(std::vector<std::string> found, list_dir(dir / child / "infiniband", what));
    names.insert(names.end(), found.begin(), found.end());
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

std::string read_attribute(const std::string& path, size_t max_size) {
  auto text = read_file(path, max_size);
  if (!text || !*text) {
    return "";
  }
  std::string value = std::move(**text);
  while (!value.empty() && (value.back() == '\n' || value.back() == ' ' || value.back() == '\0')) {
    value.pop_back();
  }
  return value;
}

bool is_pci_address(std::string_view text) {
  // domain:bus:device.function
  size_t colon1 = text.find(':');
  if (colon1 == text.npos || colon1 < 4 || colon1 > 8) {
    return false;
  }
  std::string_view rest = text.substr(colon1 + 1);
  return all_hex(text.substr(0, colon1)) && rest.size() == 7 && all_hex(rest.substr(0, 2)) &&
         rest[2] == ':' && all_hex(rest.substr(3, 2)) && rest[3] <= '1' && rest[5] == '.' &&
         rest[6] >= '0' && rest[6] <= '7';
}

Expected<std::string> Sysfs::pci_dir(const std::string& pci) const {
  if (!is_pci_address(pci)) {
    return Error(ErrorKind::kInvalidConfig,
                 "invalid PCI address " + in_quotes(pci) + ": expected lower-case 0000:3b:00.2");
  }
  std::string dir = root_ + "/bus/pci/devices/" + pci;
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    return Error(ErrorKind::kDeviceNotFound,
                 "PCI device " + pci + ": not found in " + root_ + "/bus/pci/devices");
  }
  return dir;
}

Expected<std::string> Sysfs::rdma_device_dir(const std::string& rdma_device) const {
  if (rdma_device.empty() || rdma_device == "." || rdma_device == ".." ||
      rdma_device.find('/') != std::string::npos) {
    return Error(ErrorKind::kInvalidConfig, "invalid RDMA device name " + in_quotes(rdma_device));
  }
  const fs::path dir = fs::path(root_) / "class" / "infiniband" / rdma_device;
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    return Error(ErrorKind::kDeviceNotFound,
                 "no RDMA device " + rdma_device + " in " + root_ + "/class/infiniband");
  }
  return dir.string();
}

Expected<std::string> Sysfs::rdma_netdev(const std::string& rdma_device) const {
  TRY_ASSIGN(const fs::path dir, rdma_device_dir(rdma_device));
  TRY_ASSIGN(auto names, list_dir(dir / "device" / "net", "RDMA device " + rdma_device));
  if (names.size() != 1) {
    return Error(ErrorKind::kDeviceNotFound,
                 "RDMA device " + rdma_device + " has " + std::to_string(names.size()) +
                     " netdevs under its parent device, need exactly 1");
  }
  return names.front();
}

Expected<std::optional<std::string>> Sysfs::rdma_driver(const std::string& rdma_device) const {
  TRY_ASSIGN(const fs::path dir, rdma_device_dir(rdma_device));
  TRY_ASSIGN(auto driver, link_basename(dir / "device" / "driver", "RDMA device " + rdma_device));
  if (driver) {
    return driver;
  }
  // soft-RoCE has no parent device; its own attribute "parent" names its netdev.
  std::error_code ec;
  if (fs::exists(dir / "parent", ec)) {
    return std::optional<std::string>("rxe");
  }
  return std::optional<std::string>();
}

Expected<bool> Sysfs::pci_device_exists(const std::string& pci) const {
  if (!is_pci_address(pci)) {
    return Error(ErrorKind::kInvalidConfig,
                 "invalid PCI address " + in_quotes(pci) + ": expected lower-case 0000:3b:00.2");
  }
  std::error_code ec;
  (void)fs::status(root_ + "/bus/pci/devices/" + pci, ec);
  if (ec == std::errc::no_such_file_or_directory) {
    return false;
  }
  if (ec) {
    return Error(ErrorKind::kIo, "look up PCI device " + pci + " in " + root_ +
                                     "/bus/pci/devices: " + ec.message());
  }
  return true;
}

Expected<std::vector<std::string>> Sysfs::pci_netdevs(const std::string& pci) const {
  TRY_ASSIGN(std::string dir, pci_dir(pci));
  return list_dir(fs::path(dir) / "net", "PCI device " + pci);
}

Expected<std::string> Sysfs::pci_netdev(const std::string& pci) const {
  TRY_ASSIGN(std::vector<std::string> names, pci_netdevs(pci));
  if (names.size() == 1) {
    return names.front();
  }
  if (names.size() > 1) {
    std::string list;
    for (const auto& name : names) {
      list += (list.empty() ? "" : ", ") + name;
    }
    return Error(ErrorKind::kInvalidConfig,
                 "PCI device " + pci + " has several netdevs (" + list + "); name one");
  }
  TRY_ASSIGN(std::optional<std::string> driver, pci_driver(pci));
  std::string why = driver ? "bound to " + *driver : "no driver bound";
  return Error(ErrorKind::kDeviceNotFound, "PCI device " + pci + " has no netdev (" + why + ")");
}

Expected<std::optional<std::string>> Sysfs::pci_driver(const std::string& pci) const {
  TRY_ASSIGN(std::string dir, pci_dir(pci));
  return link_basename(fs::path(dir) / "driver", "PCI device " + pci);
}

namespace {

// Writes `text` to an existing sysfs attribute file (never created, never followed).
Status write_attribute(const std::string& path, const std::string& text) {
  Fd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid()) {
    return sys_error("open " + path, errno);
  }
  if (::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    return sys_error("write " + text + " to " + path, errno);
  }
  return ok_status();
}

}  // namespace

Status Sysfs::rebind_pci_driver(const std::string& pci) const {
  TRY_ASSIGN(std::optional<std::string> driver, pci_driver(pci));
  if (!driver) {
    return Error(ErrorKind::kDeviceNotFound, "PCI device " + pci + ": no driver bound to rebind");
  }
  if (driver->empty() || *driver == "." || *driver == ".." ||
      driver->find('/') != std::string::npos) {
    return Error(ErrorKind::kKernel, "PCI device " + pci + ": driver " + in_quotes(*driver));
  }
  const std::string dir = root_ + "/bus/pci/drivers/" + *driver;
  TRY(write_attribute(dir + "/unbind", pci).with_context("unbind " + pci + " from " + *driver));
  return write_attribute(dir + "/bind", pci).with_context("bind " + pci + " to " + *driver);
}

Expected<std::optional<VfInfo>> Sysfs::pci_vf(const std::string& pci) const {
  std::string what = "PCI device " + pci;
  TRY_ASSIGN(std::string dir, pci_dir(pci));
  TRY_ASSIGN(std::optional<std::string> pf, link_basename(fs::path(dir) / "physfn", what));
  if (!pf) {
    return std::optional<VfInfo>();
  }
  const std::string& pf_pci = *pf;
  if (!is_pci_address(pf_pci)) {
    return Error(ErrorKind::kKernel, what + ": physfn points at " + in_quotes(pf_pci));
  }
  TRY_ASSIGN(std::string pf_dir, pci_dir(pf_pci).with_context(what + ": its PF"));
  TRY_ASSIGN(std::vector<std::string> entries, list_dir(pf_dir, what));
  for (const auto& entry : entries) {
    std::string_view name = entry;
    if (name.substr(0, 6) != "virtfn" || name.size() == 6 ||
        name.find_first_not_of("0123456789", 6) != name.npos) {
      continue;
    }
    TRY_ASSIGN(std::optional<std::string> vf, link_basename(fs::path(pf_dir) / entry, what));
    if (vf && *vf == pci) {
      return std::optional<VfInfo>(VfInfo{pf_pci, std::stoi(entry.substr(6))});
    }
  }
  return Error(ErrorKind::kKernel, what + ": PF " + pf_pci + " lists no virtfn for it");
}

Expected<std::vector<std::string>> Sysfs::aux_netdevs(const std::string& id) const {
  if (!is_aux_id(id)) {
    return Error(ErrorKind::kInvalidConfig,
                 "invalid auxiliary device id " + in_quotes(id) + ": expected e.g. mlx5_core.sf.2");
  }
  std::string dir = root_ + "/bus/auxiliary/devices/" + id;
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    return Error(ErrorKind::kDeviceNotFound,
                 "auxiliary device " + id + ": not found in " + root_ + "/bus/auxiliary/devices");
  }
  return list_dir(fs::path(dir) / "net", "auxiliary device " + id);
}

Expected<std::vector<std::string>> Sysfs::pci_rdma_devices(const std::string& pci) const {
  TRY_ASSIGN(std::string dir, pci_dir(pci));
  return rdma_devices_under(dir, "PCI device " + pci);
}

Expected<std::vector<std::string>> Sysfs::aux_rdma_devices(const std::string& id) const {
  if (!is_aux_id(id)) {
    return Error(ErrorKind::kInvalidConfig,
                 "invalid auxiliary device id " + in_quotes(id) + ": expected e.g. mlx5_core.sf.2");
  }
  return rdma_devices_under(root_ + "/bus/auxiliary/devices/" + id, "auxiliary device " + id);
}

}  // namespace rdmanet::netns
