#include "netns/gpudirect.h"

#include <sys/utsname.h>

#include <cstdio>
#include <filesystem>

#include "netns/sysfs.h"

namespace rdmanet::netns {
namespace {

// The first kernel with RDMA memory regions on DMA-BUF (ib_umem_dmabuf, ibv_reg_dmabuf_mr).
constexpr int kDmaBufKernel[2] = {5, 12};
// The first NVIDIA driver branch with DMA-BUF for CUDA memory (R515, also the first
// release of the open kernel modules).
constexpr int kDmaBufDriver = 515;

// The leading "major.minor" of a release or version string; false when there is none.
bool leading_numbers(const std::string& text, int* major, int* minor) {
  return std::sscanf(text.c_str(), "%d.%d", major, minor) == 2;
}

}  // namespace

const char* gpudirect_rdma_name(GpuDirectRdma mode) {
  // The table's names are string literals, so the view's data() ends in a NUL.
  return name_of(kGpuDirectRdmaNames, mode).data();
}

namespace {

// Whether the node offers DMA-BUF for GPU memory: empty when it does (with the NVIDIA
// module's version in *driver_version), else what is missing.
std::string dma_buf_missing(const std::string& modules, const std::string& kernel_release,
                            std::string* driver_version) {
  std::error_code ec;
  if (!std::filesystem::exists(modules + "/nvidia", ec)) {
    return "the NVIDIA kernel module is not loaded (no " + modules + "/nvidia)";
  }
  int major = 0;
  int minor = 0;
  if (!leading_numbers(kernel_release, &major, &minor)) {
    return "kernel release \"" + kernel_release + "\" not understood";
  }
  if (major < kDmaBufKernel[0] || (major == kDmaBufKernel[0] && minor < kDmaBufKernel[1])) {
    return "kernel " + kernel_release + " predates RDMA DMA-BUF (5.12)";
  }
  const std::string taint = read_attribute(modules + "/nvidia/taint");
  if (taint.find('P') != std::string::npos) {
    return "the NVIDIA kernel module is the proprietary flavour (taint " + taint +
           "): DMA-BUF needs the open one";
  }
  const std::string version = read_attribute(modules + "/nvidia/version");
  int driver = 0;
  int driver_minor = 0;
  if (!leading_numbers(version, &driver, &driver_minor)) {
    return "the NVIDIA kernel module's version (" + modules + "/nvidia/version) is unreadable";
  }
  if (driver < kDmaBufDriver) {
    return "NVIDIA driver " + version + " predates DMA-BUF (515)";
  }
  *driver_version = version;
  return "";
}

}  // namespace

GpuDirectReadiness gpudirect_rdma_readiness(const std::string& sysfs_root,
                                            const std::string& kernel_release) {
  const std::string modules = sysfs_root + "/module";
  std::error_code ec;
  const bool peermem = std::filesystem::exists(modules + "/nvidia_peermem", ec);
  // DMA-BUF first: NCCL registers GPU memory through it whenever the node offers it, and
  // through nvidia-peermem only otherwise.
  std::string driver_version;
  const std::string missing = dma_buf_missing(modules, kernel_release, &driver_version);
  if (missing.empty()) {
    return {GpuDirectRdma::kDmaBuf, "kernel " + kernel_release +
                                        " and the open NVIDIA kernel module " + driver_version +
                                        (peermem ? " (nvidia_peermem is loaded too)" : "")};
  }
  if (peermem) {
    return {GpuDirectRdma::kNvidiaPeermem,
            "nvidia_peermem is loaded (" + modules + "/nvidia_peermem); no DMA-BUF: " + missing};
  }
  return {GpuDirectRdma::kNone, missing + ", and nvidia_peermem is not loaded"};
}

std::string running_kernel_release() {
  struct utsname name {};
  return ::uname(&name) == 0 ? std::string(name.release) : std::string();
}

}  // namespace rdmanet::netns
