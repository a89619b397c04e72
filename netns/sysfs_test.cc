#include "netns/sysfs.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "netns/testing/test_util.h"

namespace rdmanet::netns {
namespace {

namespace fs = std::filesystem;

// A fake /sys laid out like the real one: devices under /sys/devices, symlinks to them from
// /sys/bus/*/devices, driver and physfn/virtfn symlinks between them.
class SysfsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rdmanet-sysfs-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    base_ = tmpl;
    root_ = base_ + "/sys";
    // A file next to the root that hostile ids would like to reach.
    std::ofstream(base_ + "/secret") << "x";
    fs::create_directories(base_ + "/net/evil/net/leak0");

    pci("0000:3b:00.0", "mlx5_core", {"ens1f0"});
    pci("0000:3b:00.2", "mlx5_core", {"ens1f0v0"});
    pci("0000:3b:00.3", "vfio-pci", {});
    pci("0000:3b:00.4", "", {});
    pci("0000:3c:00.0", "mlx4_core", {"ib0", "ib1"});
    vf("0000:3b:00.0", 0, "0000:3b:00.2");
    vf("0000:3b:00.0", 1, "0000:3b:00.3");

    testing::FakeSysfs(root_).aux("0000:3b:00.0", "mlx5_core.sf.2", {"enp59s0f0s2"});
  }

  void TearDown() override { fs::remove_all(base_); }

  void pci(const std::string& addr, const std::string& driver,
           const std::vector<std::string>& netdevs) {
    testing::FakeSysfs(root_).pci(addr, driver, netdevs);
  }
  void vf(const std::string& pf, int index, const std::string& vf_addr) {
    testing::FakeSysfs(root_).vf(pf, index, vf_addr);
  }

  std::string base_;
  std::string root_;
};

TEST_F(SysfsTest, FindsTheNetdevOfAPciFunction) {
  Sysfs sysfs(root_);
  EXPECT_EQ(*sysfs.pci_netdev("0000:3b:00.0"), "ens1f0");
  EXPECT_EQ(*sysfs.pci_netdev("0000:3b:00.2"), "ens1f0v0");
  EXPECT_EQ(*sysfs.pci_driver("0000:3b:00.2"), std::optional<std::string>("mlx5_core"));
  EXPECT_EQ(*sysfs.pci_netdevs("0000:3c:00.0"), (std::vector<std::string>{"ib0", "ib1"}));
  auto two = sysfs.pci_netdev("0000:3c:00.0");
  ASSERT_FALSE(two.ok());
  EXPECT_EQ(two.error().msg(), "PCI device 0000:3c:00.0 has several netdevs (ib0, ib1); name one");
}

TEST_F(SysfsTest, SaysWhyAFunctionHasNoNetdev) {
  Sysfs sysfs(root_);
  EXPECT_TRUE(sysfs.pci_netdevs("0000:3b:00.3")->empty());
  auto vfio = sysfs.pci_netdev("0000:3b:00.3");
  ASSERT_FALSE(vfio.ok());
  EXPECT_EQ(vfio.error().kind(), ErrorKind::kDeviceNotFound);
  EXPECT_EQ(vfio.error().msg(), "PCI device 0000:3b:00.3 has no netdev (bound to vfio-pci)");

  auto unbound = sysfs.pci_netdev("0000:3b:00.4");
  ASSERT_FALSE(unbound.ok());
  EXPECT_EQ(unbound.error().msg(), "PCI device 0000:3b:00.4 has no netdev (no driver bound)");
  EXPECT_FALSE(sysfs.pci_driver("0000:3b:00.4")->has_value());

  auto absent = sysfs.pci_netdev("0000:3b:00.7");
  ASSERT_FALSE(absent.ok());
  EXPECT_EQ(absent.error().kind(), ErrorKind::kDeviceNotFound);
  EXPECT_EQ(absent.error().msg(),
            "PCI device 0000:3b:00.7: not found in " + root_ + "/bus/pci/devices");
}

TEST_F(SysfsTest, MapsAVfToItsPfAndIndex) {
  Sysfs sysfs(root_);
  auto vf0 = sysfs.pci_vf("0000:3b:00.2");
  ASSERT_TRUE(vf0.ok()) << vf0.error().msg();
  ASSERT_TRUE(vf0->has_value());
  EXPECT_EQ((*vf0)->pf_pci, "0000:3b:00.0");
  EXPECT_EQ((*vf0)->index, 0);
  EXPECT_EQ((*sysfs.pci_vf("0000:3b:00.3"))->index, 1);
  EXPECT_EQ(*sysfs.pci_netdev((*vf0)->pf_pci), "ens1f0");
  EXPECT_FALSE(sysfs.pci_vf("0000:3b:00.0")->has_value()) << "a PF is not a VF";
}

TEST_F(SysfsTest, SaysWhetherAPciFunctionExistsAndWhenItCannotTell) {
  Sysfs sysfs(root_);
  EXPECT_TRUE(*sysfs.pci_device_exists("0000:3b:00.2"));
  EXPECT_FALSE(*sysfs.pci_device_exists("0000:3b:00.7"));
  EXPECT_EQ(sysfs.pci_device_exists("../../x").error().kind(), ErrorKind::kInvalidConfig);
  // Not "absent" when the lookup itself fails: a devices directory that is not one.
  const std::string broken = root_ + "-broken";
  std::filesystem::create_directories(broken + "/bus/pci");
  std::ofstream(broken + "/bus/pci/devices") << "not a directory";
  auto unknown = Sysfs(broken).pci_device_exists("0000:3b:00.2");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().kind(), ErrorKind::kIo) << unknown.error().msg();
  std::filesystem::remove_all(broken);
}

// A test double: sysfs's bind and unbind attributes are plain files in the fake tree, so
// the test sees what was written (a real rebind needs a driver that probes again; the PCI
// tier of the kernel lab has no InfiniBand VF for it).
TEST_F(SysfsTest, RebindsAFunctionToItsOwnDriver) {
  Sysfs sysfs(root_);
  ASSERT_TRUE(sysfs.rebind_pci_driver("0000:3b:00.2").ok());
  auto read = [&](const std::string& attribute) {
    std::ifstream in(root_ + "/bus/pci/drivers/mlx5_core/" + attribute);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_EQ(read("unbind"), "0000:3b:00.2");
  EXPECT_EQ(read("bind"), "0000:3b:00.2");
  auto unbound = sysfs.rebind_pci_driver("0000:3b:00.4");
  ASSERT_FALSE(unbound.ok());
  EXPECT_EQ(unbound.error().kind(), ErrorKind::kDeviceNotFound) << unbound.error().msg();
  EXPECT_FALSE(sysfs.rebind_pci_driver("../secret").ok());
}

TEST_F(SysfsTest, FindsTheNetdevOfAnAuxiliaryDevice) {
  Sysfs sysfs(root_);
  EXPECT_EQ(*sysfs.aux_netdevs("mlx5_core.sf.2"), std::vector<std::string>{"enp59s0f0s2"});
  auto absent = sysfs.aux_netdevs("mlx5_core.sf.9");
  ASSERT_FALSE(absent.ok());
  EXPECT_EQ(absent.error().kind(), ErrorKind::kDeviceNotFound);
}

TEST_F(SysfsTest, RejectsHostileAndMalformedIds) {
  Sysfs sysfs(root_);
  const std::string bad_pci[] = {"",
                                 "3b:00.2",
                                 "0000:3B:00.2",
                                 "0000:3b:20.0",
                                 "0000:3b:00.8",
                                 "0000:3b:00.2/../../../secret",
                                 "../../../../secret",
                                 "0000:3b:00.2\n",
                                 std::string("0000:3b:00.2\0x", 14),
                                 "0000:3b:0.2",
                                 "000000000:3b:00.2",
                                 " 0000:3b:00.2"};
  for (const auto& id : bad_pci) {
    auto result = sysfs.pci_netdevs(id);
    EXPECT_FALSE(result.ok()) << "accepted \"" << id << "\"";
    if (!result.ok()) {
      EXPECT_EQ(result.error().kind(), ErrorKind::kInvalidConfig) << id;
    }
    EXPECT_FALSE(sysfs.pci_vf(id).ok());
    EXPECT_FALSE(sysfs.pci_driver(id).ok());
    EXPECT_FALSE(is_pci_address(id));
  }
  EXPECT_TRUE(is_pci_address("10000:e1:00.0")) << "VMD domains have five digits";

  const std::string bad_aux[] = {"",
                                 ".",
                                 "..",
                                 "../../../net/evil",
                                 "mlx5_core.sf.2/../../..",
                                 "a/b",
                                 std::string("mlx5_core\0.sf.2", 15),
                                 ".hidden",
                                 std::string(300, 'a'),
                                 "mlx5_core..sf"};
  for (const auto& id : bad_aux) {
    auto result = sysfs.aux_netdevs(id);
    ASSERT_FALSE(result.ok()) << "accepted \"" << id << "\"";
    EXPECT_EQ(result.error().kind(), ErrorKind::kInvalidConfig) << id;
  }
}

TEST_F(SysfsTest, FindsTheRdmaDevicesOfPciAndAuxiliaryDevices) {
  const std::string devices = root_ + "/devices/pci0000:3a/";
  // mlx4: the RDMA device hangs off the PCI function itself.
  fs::create_directories(devices + "0000:3c:00.0/infiniband/mlx4_0");
  // mlx5: on an auxiliary child of the function (and of the SF).
  fs::create_directories(devices + "0000:3b:00.0/mlx5_core.rdma.0/infiniband/mlx5_0");
  fs::create_directories(devices + "0000:3b:00.2/mlx5_core.rdma.1/infiniband/mlx5_3");
  fs::create_directories(devices +
                         "0000:3b:00.0/mlx5_core.sf.2/mlx5_core.rdma.4/infiniband/mlx5_5");
  Sysfs sysfs(root_);
  EXPECT_EQ(*sysfs.pci_rdma_devices("0000:3c:00.0"), std::vector<std::string>{"mlx4_0"});
  EXPECT_EQ(*sysfs.pci_rdma_devices("0000:3b:00.2"), std::vector<std::string>{"mlx5_3"});
  EXPECT_EQ(*sysfs.pci_rdma_devices("0000:3b:00.0"), std::vector<std::string>{"mlx5_0"})
      << "the SF's device and the VFs' (behind virtfnN links) are not the PF's";
  EXPECT_EQ(*sysfs.aux_rdma_devices("mlx5_core.sf.2"), std::vector<std::string>{"mlx5_5"});
  EXPECT_TRUE(sysfs.pci_rdma_devices("0000:3b:00.3")->empty()) << "vfio-bound: no RDMA device";
  EXPECT_EQ(sysfs.pci_rdma_devices("0000:3b:00.7").error().kind(), ErrorKind::kDeviceNotFound);
  EXPECT_EQ(sysfs.aux_rdma_devices("../../../net/evil").error().kind(), ErrorKind::kInvalidConfig);
  EXPECT_EQ(sysfs.pci_rdma_devices("0000:3b:00.2/..").error().kind(), ErrorKind::kInvalidConfig);
}

// The driver of an RDMA device, as /sys lays it out: class/infiniband/<dev> links to the
// device under its parent (an mlx5 auxiliary device bound to mlx5_ib, a PCI function bound to
// irdma); soft-RoCE and siw are virtual, soft-RoCE with an attribute "parent" (its netdev).
TEST_F(SysfsTest, FindsTheDriverOfAnRdmaDevice) {
  const std::string devices = root_ + "/devices/pci0000:3a/";
  const std::string aux = devices + "0000:3b:00.0/mlx5_core.rdma.0";
  fs::create_directories(aux + "/infiniband/mlx5_0");
  fs::create_directories(root_ + "/bus/auxiliary/drivers/mlx5_ib");
  fs::create_directory_symlink(root_ + "/bus/auxiliary/drivers/mlx5_ib", aux + "/driver");
  fs::create_directory_symlink(aux, aux + "/infiniband/mlx5_0/device");
  fs::create_directories(devices + "0000:5e:00.0/infiniband/irdma0");
  fs::create_directories(root_ + "/bus/pci/drivers/irdma");
  fs::create_directory_symlink(root_ + "/bus/pci/drivers/irdma", devices + "0000:5e:00.0/driver");
  fs::create_directory_symlink(devices + "0000:5e:00.0",
                               devices + "0000:5e:00.0/infiniband/irdma0/device");
  fs::create_directories(root_ + "/devices/virtual/infiniband/rxe3f2a/");
  std::ofstream(root_ + "/devices/virtual/infiniband/rxe3f2a/parent") << "net1\n";
  fs::create_directories(root_ + "/devices/virtual/infiniband/siw0");
  fs::create_directories(root_ + "/class/infiniband");
  for (const auto& [name, dir] :
       {std::pair{"mlx5_0", aux + "/infiniband/mlx5_0"},
        std::pair{"irdma0", devices + "0000:5e:00.0/infiniband/irdma0"},
        std::pair{"rxe3f2a", root_ + "/devices/virtual/infiniband/rxe3f2a"},
        std::pair{"siw0", root_ + "/devices/virtual/infiniband/siw0"}}) {
    fs::create_directory_symlink(dir, root_ + "/class/infiniband/" + name);
  }
  Sysfs sysfs(root_);
  EXPECT_EQ(*sysfs.rdma_driver("mlx5_0"), std::optional<std::string>("mlx5_ib"));
  EXPECT_EQ(*sysfs.rdma_driver("irdma0"), std::optional<std::string>("irdma"));
  EXPECT_EQ(*sysfs.rdma_driver("rxe3f2a"), std::optional<std::string>("rxe"));
  EXPECT_EQ(*sysfs.rdma_driver("siw0"), std::optional<std::string>());
  EXPECT_EQ(sysfs.rdma_driver("mlx5_9").error().kind(), ErrorKind::kDeviceNotFound);
  EXPECT_EQ(sysfs.rdma_driver("../../secret").error().kind(), ErrorKind::kInvalidConfig);
}

TEST(SysfsRealTest, DefaultsToSlashSys) {
  auto missing = Sysfs().pci_netdevs("ffff:ff:1f.7");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().msg().find("/sys/bus/pci/devices"), std::string::npos);
}

}  // namespace
}  // namespace rdmanet::netns
