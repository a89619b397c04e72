// GPUDirect RDMA readiness of the node: can an RDMA NIC register GPU memory, and how. Two
// kernel paths exist (NVIDIA, "GPUDirect RDMA and GPUDirect Storage" in the GPU Operator
// documentation): the legacy nvidia-peermem module, and DMA-BUF, which NVIDIA recommends.
#pragma once

#include <string>

#include "base/names.h"

namespace rdmanet::netns {

enum class GpuDirectRdma { kNvidiaPeermem, kDmaBuf, kNone };
inline constexpr Name<GpuDirectRdma> kGpuDirectRdmaNames[] = {
    {GpuDirectRdma::kNvidiaPeermem, "nvidia-peermem"},
    {GpuDirectRdma::kDmaBuf, "dma-buf"},
    {GpuDirectRdma::kNone, "none"}};
// "nvidia-peermem", "dma-buf", "none": the pod files' and `rdmanet topology`'s words.
const char* gpudirect_rdma_name(GpuDirectRdma mode);

struct GpuDirectReadiness {
  GpuDirectRdma mode = GpuDirectRdma::kNone;
  std::string reason;  // what was seen, in a sentence an operator can act on
};

// From <sysfs_root>/module and the kernel release (uname -r), in the order NCCL uses them:
//   dma-buf         module/nvidia is loaded as the open flavour (module/nvidia/taint has no
//                   'P': the open modules are MIT/GPL, the proprietary ones taint the kernel
//                   with P; DMA-BUF for CUDA memory works only with the open flavour), its
//                   version (module/nvidia/version) is 515 or later, and the kernel is 5.12
//                   or later (RDMA memory registration from a DMA-BUF, ib_umem_dmabuf);
//   nvidia-peermem  otherwise, when module/nvidia_peermem exists (the module is loaded);
//   none            otherwise, with what DMA-BUF lacks as the reason.
GpuDirectReadiness gpudirect_rdma_readiness(const std::string& sysfs_root,
                                            const std::string& kernel_release);

// The running kernel's release (uname), empty if uname fails.
std::string running_kernel_release();

}  // namespace rdmanet::netns
