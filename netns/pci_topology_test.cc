#include "netns/pci_topology.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "base/testing/temp_dir.h"
#include "netns/testing/test_util.h"

namespace rdmanet::netns {
namespace {

namespace fs = std::filesystem;

using testing::DataDirectNode;
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

// A ConnectX-8 whose Data Direct function shares a switch with GPU k while the NIC function
// hangs from another root port: the NIC function alone would see every GPU across the
// host bridge; its alignment place sees GPU k below one switch.
TEST(PciTopology, ANicWithDataDirectAlignsWithThatFunctionsPlace) {
  testutil::TempDir tmp("rdmanet-topology");
  ASSERT_FALSE(tmp.path().empty());
  DataDirectNode node(tmp.path() + "/sys");
  auto topology = scan_pci_topology(tmp.path() + "/sys");
  ASSERT_TRUE(topology.ok()) << topology.error().msg();
  ASSERT_EQ(topology->nics.size(), 2u);
  ASSERT_EQ(topology->gpus.size(), 2u) << "bridges and Data Direct functions are no GPUs";
  for (int k = 0; k < 2; ++k) {
    const RdmaNic& nic = topology->nics[k];
    ASSERT_EQ(nic.place.address, node.nic(k));
    EXPECT_EQ(nic.place.root(), node.nic_root_port(k));
    ASSERT_TRUE(nic.data_direct.has_value()) << "NIC " << k;
    EXPECT_EQ(nic.data_direct->address, node.data_direct(k));
    EXPECT_EQ(nic.alignment().root(), node.gpu_root_port(k));
    EXPECT_NE(nic.alignment().root(), nic.place.root()) << "a different PCIe tree";
    for (const Gpu& gpu : topology->gpus) {
      EXPECT_EQ(relation_between(nic.place, gpu.place), PciRelation::kPhb);
      EXPECT_EQ(relation_between(nic.alignment(), gpu.place),
                gpu.place.address == node.gpu(k) ? PciRelation::kPix : PciRelation::kPhb)
          << "NIC " << k << ", GPU " << gpu.place.address;
    }
  }
}

TEST(PciTopology, WithoutDataDirectANicAlignsWithItself) {
  testutil::TempDir tmp("rdmanet-topology");
  ASSERT_FALSE(tmp.path().empty());
  EightGpuNode node(tmp.path() + "/sys");
  auto topology = scan_pci_topology(tmp.path() + "/sys");
  ASSERT_TRUE(topology.ok()) << topology.error().msg();
  for (const RdmaNic& nic : topology->nics) {
    EXPECT_FALSE(nic.data_direct.has_value()) << nic.place.address;
    EXPECT_EQ(&nic.alignment(), &nic.place);
  }
}

TEST(PciTopology, ThePlaceOfOneFunctionIsThatOfTheScan) {
  testutil::TempDir tmp("rdmanet-topology");
  ASSERT_FALSE(tmp.path().empty());
  EightGpuNode node(tmp.path() + "/sys");
  auto place = pci_place(tmp.path() + "/sys", node.nic(5));
  ASSERT_TRUE(place.ok()) << place.error().msg();
  EXPECT_EQ(place->address, node.nic(5));
  EXPECT_EQ(place->root_complex, "pci0000:80");
  EXPECT_EQ(place->root(), "0000:80:02.0");
  EXPECT_EQ(place->numa_node, 1);
  EXPECT_FALSE(pci_place(tmp.path() + "/sys", "0000:99:00.0").ok());
  EXPECT_FALSE(pci_place(tmp.path() + "/sys", "../../etc").ok());
  PciPlace flat{"0000:00:05.0", "pci0000:00", {}, 0};
  EXPECT_EQ(flat.root(), "pci0000:00") << "on the root bus: the root complex";
}

TEST(RailGpuFacts, ARailOfADataDirectCardAlignsWithItsDataDirectRoot) {
  testutil::TempDir tmp("rdmanet-topology");
  ASSERT_FALSE(tmp.path().empty());
  const std::string sys = tmp.path() + "/sys";
  DataDirectNode node(sys);
  fs::create_directories(sys + "/module/nvidia_peermem");
  for (int k = 0; k < 2; ++k) {
    RailGpuFacts facts = rail_gpu_facts(sys, node.nic(k), "6.14.0-1007-nvidia-64k");
    EXPECT_EQ(facts.pcie_root, node.gpu_root_port(k)) << "NIC " << k;
    EXPECT_EQ(facts.data_direct_pci, node.data_direct(k));
    EXPECT_EQ(facts.gpudirect.mode, GpuDirectRdma::kNvidiaPeermem);
  }
  node.unbind(1);
  RailGpuFacts facts = rail_gpu_facts(sys, node.nic(1), "6.14.0");
  EXPECT_EQ(facts.pcie_root, node.nic_root_port(1)) << "no Data Direct: the NIC's own root";
  EXPECT_EQ(facts.data_direct_pci, "");
}

TEST(RailGpuFacts, ARailOfAPlainNicAlignsWithItsRootPort) {
  testutil::TempDir tmp("rdmanet-topology");
  ASSERT_FALSE(tmp.path().empty());
  const std::string sys = tmp.path() + "/sys";
  EightGpuNode node(sys);
  RailGpuFacts facts = rail_gpu_facts(sys, node.nic(6), "6.8.0");
  EXPECT_EQ(facts.pcie_root, "0000:80:03.0");
  EXPECT_EQ(facts.data_direct_pci, "");
  EXPECT_EQ(facts.gpudirect.mode, GpuDirectRdma::kNone) << facts.gpudirect.reason;
  EXPECT_EQ(rail_gpu_facts(sys, "0000:99:00.0", "6.8.0").pcie_root, "") << "no such function";
}

}  // namespace
}  // namespace rdmanet::netns
