#include "plugin/topology_command.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/testing/temp_dir.h"
#include "netns/testing/test_util.h"

namespace rdmanet::plugin {
namespace {

using nlohmann::json;

class TopologyCommand : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(tmp_.path().empty()); }
  int run(const std::vector<std::string>& args) {
    out_.str("");
    err_.str("");
    return topology_main(args, out_, err_);
  }
  testutil::TempDir tmp_{"rdmanet-topology-cmd"};
  netns::testing::EightGpuNode node_{tmp_.path() + "/sys"};
  std::ostringstream out_;
  std::ostringstream err_;
};

// What an operator writing eight per-rail resources reads: NIC k with GPU k behind its
// switch, as a table and as JSON.
TEST_F(TopologyCommand, EachNicIsListedWithTheGpuBelowItsSwitch) {
  ASSERT_EQ(run({"--sysfs-root", tmp_.path() + "/sys"}), 0) << err_.str();
  std::string table = out_.str();
  for (int k = 0; k < 8; ++k) {
    std::string line = table.substr(table.find(node_.nic(k)));
    line = line.substr(0, line.find('\n'));
    EXPECT_NE(line.find("mlx5_" + std::to_string(k)), std::string::npos) << line;
    EXPECT_NE(line.find(node_.gpu(k) + " (PIX)"), std::string::npos) << line;
    EXPECT_EQ(line.find("(PHB)"), std::string::npos) << "only the nearest GPUs: " << line;
  }

  ASSERT_EQ(run({"--json", "--sysfs-root", tmp_.path() + "/sys"}), 0) << err_.str();
  json doc = json::parse(out_.str());
  ASSERT_EQ(doc["nics"].size(), 8u);
  ASSERT_EQ(doc["gpus"].size(), 8u);
  const json& nic3 = doc["nics"][3];
  EXPECT_EQ(nic3["rdmaDevice"], "mlx5_3");
  EXPECT_EQ(nic3["netdev"], "ens3np0");
  EXPECT_EQ(nic3["numaNode"], 0);
  EXPECT_EQ(nic3["linkLayer"], "Ethernet");
  ASSERT_EQ(nic3["gpus"].size(), 8u);
  EXPECT_EQ(nic3["gpus"][3]["pciAddress"], node_.gpu(3));
  EXPECT_EQ(nic3["gpus"][3]["relation"], "PIX");
  EXPECT_EQ(nic3["gpus"][0]["relation"], "PHB");
  EXPECT_EQ(nic3["gpus"][4]["relation"], "SYS");
}

// A ConnectX-8 with its Data Direct function under another root port than its NIC
// function: the table and the JSON name that function, align with its root and find the
// GPU below its switch; the node's GPUDirect RDMA readiness closes the table.
TEST(TopologyCommandDataDirect, NicsAlignWithTheirDataDirectFunctionsRoot) {
  testutil::TempDir tmp("rdmanet-topology-cmd");
  ASSERT_FALSE(tmp.path().empty());
  const std::string sys = tmp.path() + "/sys";
  netns::testing::DataDirectNode node(sys);
  std::filesystem::create_directories(sys + "/module/nvidia_peermem");
  std::ostringstream out;
  std::ostringstream err;
  ASSERT_EQ(topology_main({"--sysfs-root", sys}, out, err), 0) << err.str();
  const std::string table = out.str();
  for (int k = 0; k < 2; ++k) {
    std::string line = table.substr(table.find(node.nic(k)));
    line = line.substr(0, line.find('\n'));
    EXPECT_NE(line.find(node.data_direct(k)), std::string::npos) << line;
    EXPECT_NE(line.find("pci0000:00/" + node.gpu_root_port(k)), std::string::npos) << line;
    EXPECT_NE(line.find(node.gpu(k) + " (PIX)"), std::string::npos) << line;
    EXPECT_EQ(line.find("(PHB)"), std::string::npos) << "not from the NIC function: " << line;
  }
  EXPECT_NE(table.find("GPUDirect RDMA: nvidia-peermem ("), std::string::npos) << table;

  out.str("");
  ASSERT_EQ(topology_main({"--json", "--sysfs-root", sys}, out, err), 0) << err.str();
  json doc = json::parse(out.str());
  const json& nic0 = doc["nics"][0];
  EXPECT_EQ(nic0["pciAddress"], node.nic(0));
  EXPECT_EQ(nic0["rootPort"], node.nic_root_port(0));
  EXPECT_EQ(nic0["dataDirect"]["pciAddress"], node.data_direct(0));
  EXPECT_EQ(nic0["alignment"]["pciAddress"], node.data_direct(0));
  EXPECT_EQ(nic0["alignment"]["rootComplex"], "pci0000:00");
  EXPECT_EQ(nic0["alignment"]["rootPort"], node.gpu_root_port(0));
  EXPECT_EQ(nic0["alignment"]["pcieRoot"], node.gpu_root_port(0));
  for (const json& gpu : nic0["gpus"]) {
    EXPECT_EQ(gpu["relation"], gpu["pciAddress"] == node.gpu(0) ? "PIX" : "PHB") << gpu.dump();
  }
  EXPECT_EQ(doc["gpudirectRdma"]["mode"], "nvidia-peermem");
  EXPECT_FALSE(doc["gpudirectRdma"]["reason"].get<std::string>().empty());
}

TEST_F(TopologyCommand, NicsWithoutDataDirectSayNone) {
  ASSERT_EQ(run({"--json", "--sysfs-root", tmp_.path() + "/sys"}), 0) << err_.str();
  json doc = json::parse(out_.str());
  EXPECT_TRUE(doc["nics"][2]["dataDirect"].is_null());
  EXPECT_EQ(doc["nics"][2]["alignment"]["pciAddress"], node_.nic(2));
  EXPECT_EQ(doc["nics"][2]["alignment"]["pcieRoot"], "0000:00:03.0");
  EXPECT_EQ(doc["gpudirectRdma"]["mode"], "none") << "no NVIDIA module in the fake tree";
}

TEST_F(TopologyCommand, BadArgumentsAreAUsageError) {
  EXPECT_EQ(run({"--bogus"}), 2);
  EXPECT_NE(err_.str().find("usage: rdmanet topology"), std::string::npos);
  EXPECT_EQ(run({"--sysfs-root", tmp_.path() + "/missing"}), 1);
  EXPECT_NE(err_.str().find("missing"), std::string::npos) << err_.str();
}

}  // namespace
}  // namespace rdmanet::plugin
