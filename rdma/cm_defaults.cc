#include "rdma/cm_defaults.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>

#include "base/fd.h"
#include "rdma/nldev.h"

namespace rdmanet::rdma {

namespace fs = std::filesystem;

namespace {

// default_roce_mode's own spellings; parse_roce_mode accepts them too, so a value read back
// parses.
constexpr Name<RoceMode> kKernelRoceModeNames[] = {{RoceMode::kV2, "RoCE v2"},
                                                   {RoceMode::kV1, "IB/RoCE v1"}};

// configfs attributes take one write of the whole value.
Status write_attr(const fs::path& path, const std::string& value) {
  Fd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    return sys_error("open " + path.string(), errno);
  }
  if (::write(fd.get(), value.data(), value.size()) != static_cast<ssize_t>(value.size())) {
    return sys_error("write \"" + value + "\" to " + path.string(), errno);
  }
  return ok_status();
}

Expected<fs::path> port_dir(const std::string& root, const std::string& device, uint32_t port,
                            bool create) {
  if (!is_safe_device_name(device)) {
    return Error(ErrorKind::kInvalidConfig, "invalid RDMA device name \"" + device + "\"");
  }
  fs::path cm = fs::path(root) / "rdma_cm";
  std::error_code ec;
  if (!fs::is_directory(cm, ec)) {
    return Error(ErrorKind::kKernel,
                 "RDMA-CM defaults for " + device + ": " + cm.string() +
                     " does not exist; load the rdma_cm module and mount configfs at " + root +
                     " (mount -t configfs none " + root + ")");
  }
  fs::path dev = cm / device;
  if (create && ::mkdir(dev.c_str(), 0755) != 0 && errno != EEXIST) {
    Error e = sys_error("create " + dev.string(), errno);
    if (e.sys_errno() == ENODEV) {
      return Error(ErrorKind::kDeviceNotFound,
                   e.msg() + " (rdma_cm does not know RDMA device " + device + ")");
    }
    return e;
  }
  fs::path dir = dev / "ports" / std::to_string(port);
  if (!fs::is_directory(dir, ec)) {
    return Error(ErrorKind::kDeviceNotFound, "RDMA-CM defaults: " + device + " has no port " +
                                                 std::to_string(port) + " (" + dir.string() + ")");
  }
  return dir;
}

}  // namespace

Expected<RoceMode> parse_roce_mode(const std::string& text, const std::string& field) {
  if (auto mode = value_of(kRoceModeNames, text)) {
    return *mode;
  }
  if (auto mode = value_of(kKernelRoceModeNames, text)) {
    return *mode;
  }
  return Error(ErrorKind::kInvalidConfig,
               field + ": \"" + text + "\" is not a RoCE mode (use \"v2\" or \"v1\")");
}

Status set_cm_defaults(const std::string& configfs_root, const std::string& device, uint32_t port,
                       const CmDefaults& values) {
  if (!values.tos && !values.mode) {
    return ok_status();
  }
  TRY_ASSIGN(fs::path dir, port_dir(configfs_root, device, port, true));
  if (values.mode) {
    TRY(write_attr(dir / "default_roce_mode",
                   std::string(name_of(kKernelRoceModeNames, *values.mode))));
  }
  if (values.tos) {
    TRY(write_attr(dir / "default_roce_tos", std::to_string(*values.tos)));
  }
  return ok_status();
}

Expected<CmDefaults> read_cm_defaults(const std::string& configfs_root, const std::string& device,
                                      uint32_t port) {
  TRY_ASSIGN(fs::path dir, port_dir(configfs_root, device, port, false));
  CmDefaults out;
  std::string tos;
  std::string mode;
  std::ifstream(dir / "default_roce_tos") >> tos;
  std::getline(std::ifstream(dir / "default_roce_mode"), mode);
  try {
    out.tos = std::stoi(tos);
  } catch (const std::exception&) {
    return Error(ErrorKind::kKernel,
                 "read " + (dir / "default_roce_tos").string() + ": unexpected \"" + tos + "\"");
  }
  TRY_ASSIGN(out.mode, parse_roce_mode(mode, (dir / "default_roce_mode").string()));
  return out;
}

Status remove_cm_group(const std::string& configfs_root, const std::string& device) {
  if (!is_safe_device_name(device)) {
    return ok_status();
  }
  fs::path dev = fs::path(configfs_root) / "rdma_cm" / device;
  if (::rmdir(dev.c_str()) != 0 && errno != ENOENT) {
    return sys_error("remove " + dev.string(), errno);
  }
  return ok_status();
}

}  // namespace rdmanet::rdma
