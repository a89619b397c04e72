#include "netns/data_direct.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "base/testing/temp_dir.h"
#include "netns/testing/test_util.h"

namespace rdmanet::netns {
namespace {

using testing::DataDirectNode;
using testing::vpd_image;

TEST(Vpd, FindsReadOnlyKeywordsAndStripsPadding) {
  const std::string vpd =
      vpd_image("ConnectX-8", {{"PN", "MCX8"}, {"SN", "MT123   "}, {"VU", "x"}});
  EXPECT_EQ(vpd_keyword(vpd, "SN"), "MT123");
  EXPECT_EQ(vpd_keyword(vpd, "PN"), "MCX8");
  EXPECT_EQ(vpd_keyword(vpd, "VU"), "x");
  EXPECT_EQ(vpd_keyword(vpd, "V0"), "");
  EXPECT_EQ(vpd_keyword("ConnectX-8", "SN"), "") << "no resource tags: not VPD";
  EXPECT_EQ(vpd_keyword(vpd.substr(0, vpd.size() - 12), "SN"), "") << "cut short";
  EXPECT_EQ(vpd_keyword("", "SN"), "");
}

TEST(Vpd, KeywordsOfTheIdentifierStringAreNotKeywords) {
  // "SN" inside the product name (resource 0x82) is no keyword; only VPD-R holds them.
  const std::string vpd = vpd_image(
      "SN\x05"
      "fake!",
      {{"PN", "x"}});
  EXPECT_EQ(vpd_keyword(vpd, "SN"), "");
}

class DataDirect : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(tmp_.path().empty()); }
  testutil::TempDir tmp_{"rdmanet-data-direct"};
  std::string sys_ = tmp_.path() + "/sys";
  DataDirectNode node_{sys_};
};

TEST_F(DataDirect, EachNicFindsTheFunctionOfItsOwnCardNotTheNextByAddress) {
  ASSERT_NE(node_.data_direct(0), node_.data_direct(1));
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(find_data_direct(sys_, node_.nic(k)), node_.data_direct(k)) << "NIC " << k;
  }
  // The crossing is what makes this a test of the serial numbers.
  EXPECT_GT(node_.data_direct(0), node_.data_direct(1));
  EXPECT_LT(node_.nic(0), node_.nic(1));
}

TEST_F(DataDirect, NoneWhereTheKernelDoesNotDriveIt) {
  node_.unbind(0);
  EXPECT_EQ(find_data_direct(sys_, node_.nic(0)), "") << "not bound to mlx5_ib: not in use";
  EXPECT_EQ(find_data_direct(sys_, node_.nic(1)), node_.data_direct(1));
  std::filesystem::remove_all(sys_ + "/bus/pci/drivers/mlx5_ib");
  EXPECT_EQ(find_data_direct(sys_, node_.nic(1)), "") << "mlx5_ib not loaded";
  EXPECT_EQ(find_data_direct(sys_, "mlx5_0"), "") << "not a PCI address";
}

TEST_F(DataDirect, NoneWithoutTheNicsSerialOrWhenTwoClaimIt) {
  const std::string nic0_vpd = sys_ + "/bus/pci/devices/" + node_.nic(0) + "/vpd";
  std::filesystem::remove(nic0_vpd);
  EXPECT_EQ(find_data_direct(sys_, node_.nic(0)), "") << "no VPD (not root): no guess";
  // Both Data Direct functions claiming card 1's serial: ambiguous, so none.
  const std::string dd0_vpd = sys_ + "/bus/pci/devices/" + node_.data_direct(0) + "/vpd";
  std::ofstream(dd0_vpd, std::ios::binary | std::ios::trunc)
      << vpd_image("Data Direct", {{"SN", "MT2450X00001"}});
  EXPECT_EQ(find_data_direct(sys_, node_.nic(1)), "");
}

TEST_F(DataDirect, AVfUsesItsPfsCard) {
  // A VF of NIC 1 (Data Direct for VFs is enabled per VF in firmware; the function is the
  // card's either way).
  namespace fs = std::filesystem;
  const fs::path pf = fs::canonical(sys_ + "/bus/pci/devices/" + node_.nic(1));
  const std::string vf = "0000:02:00.2";
  fs::create_directories(pf.parent_path() / vf);
  fs::create_directory_symlink("../" + node_.nic(1), pf.parent_path() / vf / "physfn");
  fs::create_directory_symlink(fs::relative(pf.parent_path() / vf, sys_ + "/bus/pci/devices"),
                               sys_ + "/bus/pci/devices/" + vf);
  EXPECT_EQ(find_data_direct(sys_, vf), node_.data_direct(1));
}

}  // namespace
}  // namespace rdmanet::netns
