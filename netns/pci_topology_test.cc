#include "netns/pci_topology.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "base/testing/temp_dir.h"
#include "netns/test_util.h"

namespace rdmanet::netns {
namespace {

namespace fs = std::filesystem;

using testing::EightGpuNode;

TEST(PciTopology, FindsEachNicsGpuBelowItsSwitchOnAnEightGpuNode) {
  testutil::TempDir tmp("rdmanet-topology");
  ASSERT_FALSE(tmp.path().empty());
  EightGpuNode node(tmp.path() + "/sys");
  auto topology = scan_pci_topology(tmp.path() + "/sys");
  ASSERT_TRUE(topology.ok()) << topology.error().msg();
  ASSERT_EQ(topology->nics.size(), 8u) << "rxe0 has no PCI function";
  ASSERT_EQ(topology->gpus.size(), 8u) << "bridges and NICs are no GPUs";
  for (int k = 0; k < 8; ++k) {
    const RdmaNic& nic = topology->nics[k];
    EXPECT_EQ(nic.place.address, node.nic(k));
    EXPECT_EQ(nic.rdma_device, "mlx5_" + std::to_string(k));
    EXPECT_EQ(nic.netdev, "ens" + std::to_string(k) + "np0");
    EXPECT_EQ(nic.link_layer, k == 7 ? "InfiniBand" : "Ethernet");
    EXPECT_EQ(nic.place.numa_node, k / 4);
    ASSERT_EQ(nic.place.bridges.size(), 3u);
    for (int g = 0; g < 8; ++g) {
      const PciRelation want = g == k           ? PciRelation::kPix
                               : g / 4 == k / 4 ? PciRelation::kPhb
                                                : PciRelation::kSys;
      EXPECT_EQ(relation_name(relation_between(nic.place, topology->gpus[g].place)),
                std::string(relation_name(want)))
          << "NIC " << k << ", GPU " << g;
    }
  }
}

TEST(PciTopology, RelationsFollowTheSharedBridges) {
  PciPlace a{"0000:13:00.0", "pci0000:00", {"0000:00:01.0", "0000:10:00.0", "0000:11:01.0"}, 0};
  PciPlace b = a;
  b.bridges = {"0000:00:01.0", "0000:10:00.0", "0000:11:00.0"};
  EXPECT_EQ(relation_between(a, b), PciRelation::kPix);
  b.bridges = {"0000:00:01.0", "0000:20:00.0"};
  EXPECT_EQ(relation_between(a, b), PciRelation::kPxb);
  b.bridges = {"0000:00:02.0"};
  EXPECT_EQ(relation_between(a, b), PciRelation::kPhb);
  b.root_complex = "pci0000:3a";
  EXPECT_EQ(relation_between(a, b), PciRelation::kNode);
  b.numa_node = 1;
  EXPECT_EQ(relation_between(a, b), PciRelation::kSys);
  b.numa_node = -1;
  a.numa_node = -1;
  EXPECT_EQ(relation_between(a, b), PciRelation::kSys) << "unknown NUMA nodes are not one";
}

TEST(PciTopology, ANodeWithoutRdmaOrGpusHasNone) {
  testutil::TempDir tmp("rdmanet-topology");
  fs::create_directories(tmp.path() + "/sys/devices");
  auto topology = scan_pci_topology(tmp.path() + "/sys");
  ASSERT_TRUE(topology.ok()) << topology.error().msg();
  EXPECT_TRUE(topology->nics.empty());
  EXPECT_TRUE(topology->gpus.empty());
}

}  // namespace
}  // namespace rdmanet::netns
