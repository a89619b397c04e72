// End to end: the device-info file (the Multus/device plugin convention).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "plugin/testing/plugin_fixture.h"

namespace rdmanet::plugin::testing {
namespace {

namespace fs = std::filesystem;

TEST_F(Rdmanet, DeviceInfoFileNamesThePciFunctionAndGoesWithDel) {
  auto [a, b] = make_ports();
  fake_pci("0000:3b:00.2", a, "mlx5_core");
  std::string info = dir_ + "/devinfo/cni/rail-ctr-net1";
  // What the device plugin wrote (Multus copies it here before ADD): kept.
  fs::create_directories(dir_ + "/devinfo/cni");
  std::ofstream(info) << R"({"type":"pci","version":"1.0.0","pci":{"pci-address":"0000:3b:00.2",)"
                      << R"("vhost-net":"/dev/vhost-net"}})";
  json c = conf({{"sysfsRoot", dir_ + "/sys"},
                 {"runtimeConfig", {{"deviceID", "0000:3b:00.2"}, {"CNIDeviceInfoFile", info}}}});
  std::string pod = make_pod();
  auto add = cni("ADD", "devinfo", pod, c);
  ASSERT_EQ(add.exit_code, 0) << add.out << add.err;
  std::ifstream in(info);
  json doc = json::parse(in, nullptr, false);
  EXPECT_EQ(doc["type"], "pci") << doc.dump();
  EXPECT_EQ(doc["version"], "1.1.0") << doc.dump();
  EXPECT_EQ(doc["pci"]["pci-address"], "0000:3b:00.2") << doc.dump();
  EXPECT_EQ(doc["pci"]["vhost-net"], "/dev/vhost-net") << "the device plugin's keys stay";
  EXPECT_FALSE(doc["pci"].contains("rdma-device")) << "this kernel has no RDMA device to name";
  ASSERT_EQ(cni("DEL", "devinfo", pod, c).exit_code, 0);
  EXPECT_FALSE(fs::exists(info)) << "DEL removes the file it wrote";
  EXPECT_EQ(cni("DEL", "devinfo", pod, c).exit_code, 0);
}

}  // namespace
}  // namespace rdmanet::plugin::testing
