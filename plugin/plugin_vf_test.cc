// End to end: SR-IOV VF settings.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "plugin/testing/plugin_fixture.h"

namespace rdmanet::plugin::testing {
namespace {

namespace fs = std::filesystem;

// SR-IOV VF settings go through the PF. No driver here has VFs, so the fake
// sysfs tree makes a veth end a "VF" of another veth end; the real kernel
// then answers for the PF, and that answer must fail the ADD cleanly.
TEST_F(Rdmanet, VfSettingsGoThroughThePfAndFailCleanlyWithoutSriov) {
  auto [vf, pf] = make_ports();
  fake_pci("0000:3b:00.0", pf, "mlx5_core");
  fake_pci("0000:3b:00.5", vf, "mlx5_core");
  std::string devs = dir_ + "/sys/bus/pci/devices/";
  fs::create_directory_symlink("../0000:3b:00.5", devs + "0000:3b:00.0/virtfn3");
  fs::create_directory_symlink("../0000:3b:00.0", devs + "0000:3b:00.5/physfn");
  std::string pod = make_pod();
  std::string before = sh("ip -br link show dev " + vf);

  json c = conf(
      {{"pciBusID", "0000:3b:00.5"}, {"sysfsRoot", dir_ + "/sys"}, {"vlan", 100}, {"trust", "on"}});
  auto add = cni("ADD", "vf", pod, c);
  EXPECT_EQ(add.exit_code, 1);
  EXPECT_EQ(add.code(), 100) << add.out;
  EXPECT_NE(add.msg().find("VF 3 of PF \"" + pf + "\""), std::string::npos) << add.msg();
  EXPECT_EQ(sh("ip -br link show dev " + vf), before);
  EXPECT_TRUE(state_files().empty());
  EXPECT_TRUE(leases().empty());

  // An InfiniBand GUID goes through the PF before anything moves; refused, the VF was
  // neither rebound to its driver nor moved.
  json guid = conf({{"pciBusID", "0000:3b:00.5"},
                    {"sysfsRoot", dir_ + "/sys"},
                    {"runtimeConfig", {{"infinibandGUID", "00:11:22:33:44:55:66:77"}}}});
  auto no_guid = cni("ADD", "vf", pod, guid);
  EXPECT_EQ(no_guid.exit_code, 1);
  EXPECT_NE(no_guid.msg().find("VF 3 of PF \"" + pf + "\""), std::string::npos) << no_guid.msg();
  EXPECT_EQ(sh("cat " + dir_ + "/sys/bus/pci/drivers/mlx5_core/unbind"), "");
  EXPECT_EQ(sh("ip -br link show dev " + vf), before);
  EXPECT_TRUE(state_files().empty());

  // Without VF settings the same VF attaches like any netdev.
  json plain = conf({{"pciBusID", "0000:3b:00.5"}, {"sysfsRoot", dir_ + "/sys"}});
  auto ok = cni("ADD", "vf", pod, plain);
  ASSERT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_FALSE(link_exists(vf));
  ASSERT_EQ(cni("DEL", "vf", pod, plain).exit_code, 0);
  EXPECT_TRUE(link_exists(vf));
}

}  // namespace
}  // namespace rdmanet::plugin::testing
