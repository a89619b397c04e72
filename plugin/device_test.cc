#include "plugin/device.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "base/hex.h"
#include "base/testing/temp_dir.h"
#include "cni/error_code.h"
#include "netns/testing/test_util.h"

namespace rdmanet::plugin {
namespace {

namespace fs = std::filesystem;
using Kind = DeviceSelector::Kind;
using netns::testing::TestNetns;

TEST(DeviceKey, OneFileNameSafeKeyPerDevice) {
  EXPECT_EQ(device_key({Kind::kPci, "0000:3b:00.2", "pciBusID"}), "pci-0000:3b:00.2");
  EXPECT_EQ(device_key({Kind::kAuxiliary, "mlx5_core.sf.2", "auxDeviceID"}),
            "aux-" + hex("mlx5_core.sf.2"));
  EXPECT_EQ(device_key({Kind::kName, "ens1f0", "device"}), "name-" + hex("ens1f0"));
  EXPECT_EQ(device_key({Kind::kHwaddr, "02:00:00:00:aa:01", "hwaddr"}),
            "mac-" + hex("02:00:00:00:aa:01"));
  // The key is the device's, not the spelling's: however a config writes the MAC, or
  // whichever key selects a PCI function, two pods contend for the same lock.
  EXPECT_EQ(device_key({Kind::kHwaddr, "02:00:00:00:AA:01", "hwaddr"}),
            device_key({Kind::kHwaddr, "02:00:00:00:aa:01", "hwaddr"}));
  EXPECT_EQ(device_key({Kind::kPci, "0000:3b:00.2", "runtimeConfig.deviceID"}),
            device_key({Kind::kPci, "0000:3b:00.2", "pciBusID"}));

  // Different devices never share a key, even when one kind's value reads like another's.
  std::set<std::string> keys;
  std::vector<DeviceSelector> selectors = {
      {Kind::kPci, "0000:3b:00.2", ""},
      {Kind::kPci, "0000:3b:00.3", ""},
      {Kind::kAuxiliary, "mlx5_core.sf.2", ""},
      {Kind::kAuxiliary, "0000:3b:00.2", ""},
      {Kind::kName, "ens1f0", ""},
      {Kind::kName, "mlx5_core.sf.2", ""},
      {Kind::kName, "../../etc", ""},
      {Kind::kRdma, "mlx5_0", ""},
      {Kind::kRdma, "ens1f0", ""},
      {Kind::kHwaddr, "02:00:00:00:aa:01", ""},
      {Kind::kHwaddr, "02:00:00:00:aa:02", ""},
  };
  for (const auto& s : selectors) {
    std::string key = device_key(s);
    EXPECT_EQ(key.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789:.-"), std::string::npos)
        << key;
    keys.insert(key);
  }
  EXPECT_EQ(keys.size(), selectors.size());
}

// resolve_device against real veth links in a throwaway netns (the Rtnl talks to it), with
// a fake sysfs tree laid out like /sys (devices under /sys/devices, symlinks to them from
// /sys/bus/*/devices) that maps PCI and auxiliary ids to those links. The fake tree is a
// test double: this machine has no PCI NICs, SR-IOV VFs or auxiliary devices.
class ResolveDevice : public netns::testing::KernelTest {
 protected:
  void SetUp() override {
    KernelTest::SetUp();
    if (HasFatalFailure()) {
      return;
    }
    ASSERT_FALSE(tmp_.path().empty()) << "cannot create a temporary directory";
    root_ = tmp_.path() + "/sys";
    ns_ = &make_netns();
  }

  // A veth pair standing in for two netdevs.
  void links(const std::string& a, const std::string& b) { make_veth(*ns_, a, *ns_, b); }

  void pci(const std::string& addr, const std::string& driver,
           const std::vector<std::string>& netdevs) {
    netns::testing::FakeSysfs(root_).pci(addr, driver, netdevs);
  }
  void vf(const std::string& pf, int index, const std::string& vf_addr) {
    netns::testing::FakeSysfs(root_).vf(pf, index, vf_addr);
  }
  // An auxiliary device (a scalable function) of PCI function 0000:3b:00.0.
  void aux(const std::string& id, const std::vector<std::string>& netdevs) {
    netns::testing::FakeSysfs(root_).aux("0000:3b:00.0", id, netdevs);
  }

  Expected<HostDevice> resolve(const DeviceSelector& selector) {
    netns::Rtnl rtnl = ns_->rtnl();
    return resolve_device(selector, netns::Sysfs(root_), rtnl);
  }

  int index_of(const std::string& name) {
    netns::Rtnl rtnl = ns_->rtnl();
    auto link = netns::find_link_by_name(rtnl, name);
    EXPECT_TRUE(link.ok()) << link.error().msg();
    return link.ok() ? link->index : -1;
  }

  // resolve must fail with `code` and a message that contains every one of `words`.
  void expect_error(const DeviceSelector& selector, int code,
                    const std::vector<std::string>& words) {
    auto dev = resolve(selector);
    ASSERT_FALSE(dev.ok()) << selector.str() << " resolved to " << dev->link.name;
    EXPECT_EQ(cni::error_code(dev.error()), code) << dev.error().msg();
    for (const auto& word : words) {
      EXPECT_NE(dev.error().msg().find(word), std::string::npos)
          << selector.str() << ": no \"" << word << "\" in: " << dev.error().msg();
    }
  }

  testutil::TempDir tmp_{"rdmanet-device-test"};
  std::string root_;
  TestNetns* ns_ = nullptr;
};

TEST_F(ResolveDevice, PciAddressToItsNetdev) {
  links("ens1f0", "ens1f1");
  pci("0000:3b:00.0", "mlx5_core", {"ens1f0"});
  pci("0000:3b:00.1", "mlx5_core", {"ens1f1"});
  auto dev = resolve({Kind::kPci, "0000:3b:00.1", "pciBusID"});
  ASSERT_TRUE(dev.ok()) << dev.error().msg();
  EXPECT_EQ(dev->link.name, "ens1f1");
  EXPECT_EQ(dev->link.index, index_of("ens1f1"));
  EXPECT_EQ(dev->pci, "0000:3b:00.1");
  EXPECT_FALSE(dev->vf) << "a PF is no VF";
  EXPECT_EQ(dev->pf_name, "");

  expect_error({Kind::kPci, "0000:3b:00.7", "pciBusID"}, 100,
               {"pciBusID=0000:3b:00.7", "not found"});
  // sysfs names a netdev the host has not got (renamed, or in another netns).
  pci("0000:3b:00.2", "mlx5_core", {"ens1f2"});
  expect_error({Kind::kPci, "0000:3b:00.2", "deviceID"}, 100, {"deviceID=0000:3b:00.2", "ens1f2"});
}

TEST_F(ResolveDevice, VfToItsPfNameAndIndex) {
  links("ens1f0", "ens1f0v3");
  pci("0000:3b:00.0", "mlx5_core", {"ens1f0"});
  pci("0000:3b:00.5", "mlx5_core", {"ens1f0v3"});
  vf("0000:3b:00.0", 3, "0000:3b:00.5");
  auto dev = resolve({Kind::kPci, "0000:3b:00.5", "runtimeConfig.deviceID"});
  ASSERT_TRUE(dev.ok()) << dev.error().msg();
  EXPECT_EQ(dev->link.name, "ens1f0v3");
  EXPECT_EQ(dev->link.index, index_of("ens1f0v3"));
  EXPECT_EQ(dev->pci, "0000:3b:00.5");
  ASSERT_TRUE(dev->vf);
  EXPECT_EQ(dev->vf->pf_pci, "0000:3b:00.0");
  EXPECT_EQ(dev->vf->index, 3);
  EXPECT_EQ(dev->pf_name, "ens1f0");

  auto pf = resolve({Kind::kPci, "0000:3b:00.0", "pciBusID"});
  ASSERT_TRUE(pf.ok()) << pf.error().msg();
  EXPECT_FALSE(pf->vf);
}

TEST_F(ResolveDevice, VfWhosePfHasNoNetdevIsAnError) {
  links("ens1f0v1", "peer0");
  pci("0000:3b:00.0", "vfio-pci", {});
  pci("0000:3b:00.3", "mlx5_core", {"ens1f0v1"});
  vf("0000:3b:00.0", 1, "0000:3b:00.3");
  expect_error({Kind::kPci, "0000:3b:00.3", "pciBusID"}, 100,
               {"pciBusID=0000:3b:00.3", "PF 0000:3b:00.0", "vfio-pci"});
}

TEST_F(ResolveDevice, PciFunctionWithoutANetdevNamesItsDriver) {
  links("ens1f0", "ens1f1");
  pci("0000:3b:00.3", "vfio-pci", {});
  pci("0000:3b:00.4", "", {});
  expect_error({Kind::kPci, "0000:3b:00.3", "pciBusID"}, 100,
               {"pciBusID=0000:3b:00.3", "no netdev", "vfio-pci"});
  expect_error({Kind::kPci, "0000:3b:00.4", "pciBusID"}, 100,
               {"pciBusID=0000:3b:00.4", "no netdev", "no driver bound"});
}

TEST_F(ResolveDevice, AuxiliaryDeviceNeedsExactlyOneNetdev) {
  links("enp59s0f0s2", "enp59s0f0s3");
  pci("0000:3b:00.0", "mlx5_core", {});
  aux("mlx5_core.sf.2", {"enp59s0f0s2"});
  aux("mlx5_core.sf.3", {});
  aux("mlx5_core.sf.4", {"enp59s0f0s3", "enp59s0f0s4"});
  auto dev = resolve({Kind::kAuxiliary, "mlx5_core.sf.2", "auxDeviceID"});
  ASSERT_TRUE(dev.ok()) << dev.error().msg();
  EXPECT_EQ(dev->link.name, "enp59s0f0s2");
  EXPECT_EQ(dev->link.index, index_of("enp59s0f0s2"));
  EXPECT_EQ(dev->pci, "") << "an auxiliary device has no PCI address of its own";
  EXPECT_FALSE(dev->vf);

  expect_error({Kind::kAuxiliary, "mlx5_core.sf.3", "auxDeviceID"}, 100,
               {"auxDeviceID=mlx5_core.sf.3", "0 netdevs"});
  expect_error({Kind::kAuxiliary, "mlx5_core.sf.4", "deviceID"}, 100,
               {"deviceID=mlx5_core.sf.4", "2 netdevs"});
  expect_error({Kind::kAuxiliary, "mlx5_core.sf.9", "auxDeviceID"}, 100,
               {"auxDeviceID=mlx5_core.sf.9", "not found"});
}

// A shared HCA named by its RDMA device (the name the node's RDMA tools and the topology
// show), so one NAD serves nodes whose netdev names differ.
TEST_F(ResolveDevice, RdmaDeviceToTheNetdevOfItsParent) {
  links("ens1f0np0", "ens1f1np1");
  pci("0000:3b:00.0", "mlx5_core", {"ens1f0np0"});
  const std::string ib = root_ + "/class/infiniband/mlx5_0";
  std::filesystem::create_directories(ib);
  std::filesystem::create_directory_symlink("../../../devices/pci0000:3a/0000:3b:00.0",
                                            ib + "/device");
  auto dev = resolve({Kind::kRdma, "mlx5_0", "rdmaDevice"});
  ASSERT_TRUE(dev.ok()) << dev.error().msg();
  EXPECT_EQ(dev->link.name, "ens1f0np0");
  expect_error({Kind::kRdma, "mlx5_9", "rdmaDevice"}, 100, {"rdmaDevice=mlx5_9", "no RDMA device"});
  // soft-RoCE: no parent device, so no netdev to find this way.
  std::filesystem::create_directories(root_ + "/class/infiniband/rxe0");
  expect_error({Kind::kRdma, "rxe0", "rdmaDevice"}, 100, {"rxe0", "0 netdevs"});
}

TEST_F(ResolveDevice, ByName) {
  links("ens1f0", "ens1f1");
  auto dev = resolve({Kind::kName, "ens1f1", "device"});
  ASSERT_TRUE(dev.ok()) << dev.error().msg();
  EXPECT_EQ(dev->link.name, "ens1f1");
  EXPECT_EQ(dev->link.index, index_of("ens1f1"));
  EXPECT_EQ(dev->pci, "");
  EXPECT_FALSE(dev->vf);
  expect_error({Kind::kName, "ens9f9", "device"}, 100, {"device=ens9f9"});
}

TEST_F(ResolveDevice, ByHwaddr) {
  links("ens1f0", "ens1f1");
  ns_->ip("link set ens1f0 address 02:00:00:00:aa:01");
  ns_->ip("link set ens1f1 address 02:00:00:00:aa:02");
  auto dev = resolve({Kind::kHwaddr, "02:00:00:00:AA:02", "hwaddr"});
  ASSERT_TRUE(dev.ok()) << dev.error().msg();
  EXPECT_EQ(dev->link.name, "ens1f1");
  EXPECT_EQ(dev->link.index, index_of("ens1f1"));
  expect_error({Kind::kHwaddr, "02:00:00:00:aa:03", "hwaddr"}, 100, {"hwaddr=02:00:00:00:aa:03"});

  // Two links with one MAC (a VLAN, a bond): the config must name the device instead.
  ns_->ip("link set ens1f0 address 02:00:00:00:aa:02");
  expect_error({Kind::kHwaddr, "02:00:00:00:aa:02", "hwaddr"}, 7,
               {"hwaddr=02:00:00:00:aa:02", "ens1f0", "ens1f1"});
}

}  // namespace
}  // namespace rdmanet::plugin
