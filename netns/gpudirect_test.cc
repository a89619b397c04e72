#include "netns/gpudirect.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "base/testing/temp_dir.h"

namespace rdmanet::netns {
namespace {

namespace fs = std::filesystem;

// <sysfs>/module as the kernel shows loaded modules: a directory per module, with taint
// and version for out-of-tree ones.
class GpuDirect : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(tmp_.path().empty());
    fs::create_directories(sys_ + "/module/mlx5_ib");
  }
  void nvidia(const std::string& taint, const std::string& version) {
    fs::create_directories(sys_ + "/module/nvidia");
    std::ofstream(sys_ + "/module/nvidia/taint") << taint << "\n";
    std::ofstream(sys_ + "/module/nvidia/version") << version << "\n";
  }
  void peermem() { fs::create_directories(sys_ + "/module/nvidia_peermem"); }
  GpuDirectReadiness at(const std::string& kernel) {
    return gpudirect_rdma_readiness(sys_, kernel);
  }

  testutil::TempDir tmp_{"rdmanet-gpudirect"};
  std::string sys_ = tmp_.path() + "/sys";
};

TEST_F(GpuDirect, PeermemLoadedIsReadyOnAnyKernel) {
  nvidia("POE", "535.183.01");
  peermem();
  auto r = at("5.4.0-150-generic");
  EXPECT_STREQ(gpudirect_rdma_name(r.mode), "nvidia-peermem") << r.reason;
  EXPECT_NE(r.reason.find("nvidia_peermem"), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find("5.12"), std::string::npos) << "says why not DMA-BUF: " << r.reason;
}

// Both paths: NCCL takes DMA-BUF when the node offers it, so that is what the node uses.
TEST_F(GpuDirect, DmaBufWinsWhenBothAreThere) {
  nvidia("OE", "570.124.06");
  peermem();
  auto r = at("6.8.0-52-generic");
  EXPECT_EQ(r.mode, GpuDirectRdma::kDmaBuf) << r.reason;
  EXPECT_NE(r.reason.find("nvidia_peermem is loaded too"), std::string::npos) << r.reason;
}

TEST_F(GpuDirect, TheOpenModuleOnANewKernelOffersDmaBuf) {
  nvidia("OE", "570.124.06");
  auto r = at("6.8.0-52-generic");
  EXPECT_STREQ(gpudirect_rdma_name(r.mode), "dma-buf") << r.reason;
  EXPECT_NE(r.reason.find("570.124.06"), std::string::npos) << r.reason;
  EXPECT_EQ(at("5.12.0").mode, GpuDirectRdma::kDmaBuf) << "5.12 is the first";
  nvidia("", "515.43.04");  // signed and in a distribution's tree: no taint at all
  EXPECT_EQ(at("6.14.0-1007-nvidia-64k").mode, GpuDirectRdma::kDmaBuf);
}

TEST_F(GpuDirect, TheProprietaryModuleHasNoDmaBuf) {
  nvidia("POE", "570.124.06");
  auto r = at("6.8.0-52-generic");
  EXPECT_STREQ(gpudirect_rdma_name(r.mode), "none");
  EXPECT_NE(r.reason.find("proprietary"), std::string::npos) << r.reason;
}

TEST_F(GpuDirect, AnOldKernelHasNoDmaBuf) {
  nvidia("OE", "570.124.06");
  auto r = at("5.11.22");
  EXPECT_EQ(r.mode, GpuDirectRdma::kNone);
  EXPECT_NE(r.reason.find("5.12"), std::string::npos) << r.reason;
  EXPECT_EQ(at("4.18.0-553.el8_10.x86_64").mode, GpuDirectRdma::kNone);
  EXPECT_EQ(at("").mode, GpuDirectRdma::kNone);
}

TEST_F(GpuDirect, AnOldDriverHasNoDmaBuf) {
  nvidia("OE", "510.47.03");
  auto r = at("6.8.0");
  EXPECT_EQ(r.mode, GpuDirectRdma::kNone);
  EXPECT_NE(r.reason.find("515"), std::string::npos) << r.reason;
  nvidia("OE", "");
  EXPECT_EQ(at("6.8.0").mode, GpuDirectRdma::kNone) << "an unknown version is not assumed";
}

TEST_F(GpuDirect, NoNvidiaModuleNoGpuDirect) {
  auto r = at("6.8.0");
  EXPECT_EQ(r.mode, GpuDirectRdma::kNone);
  EXPECT_NE(r.reason.find("not loaded"), std::string::npos) << r.reason;
}

TEST(GpuDirectRelease, TheRunningKernelHasARelease) {
  EXPECT_FALSE(running_kernel_release().empty());
}

}  // namespace
}  // namespace rdmanet::netns
