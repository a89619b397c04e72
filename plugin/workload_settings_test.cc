#include "plugin/workload_settings.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "plugin/record.h"
#include "plugin/steps/soft_roce.h"
#include "plugin/testing/rails.h"

namespace rdmanet::plugin {
namespace {

using nlohmann::json;
using testutil::roce_rail;
using testutil::shared_rail;
using testutil::with_class;
using testutil::with_driver;

TEST(PodInfo, InterfaceNamesSortAsRailsAreNumbered) {
  EXPECT_TRUE(ifname_less("net2", "net10"));
  EXPECT_FALSE(ifname_less("net10", "net2"));
  EXPECT_TRUE(ifname_less("net1", "net2"));
  EXPECT_TRUE(ifname_less("eth0", "net1"));
  EXPECT_TRUE(ifname_less("net1", "net1a"));
  EXPECT_FALSE(ifname_less("net1", "net1"));
  EXPECT_TRUE(ifname_less("rail2", "rail10x"));
}

// The pod's own devices hold only its GIDs: NCCL picks the one of each rail's address by
// family and range at every start, so an index that moves never reaches a restarted process.
TEST(PodInfo, OwnDevicesLetNcclPickTheGidByAddressNotByIndex) {
  auto env = rail_env({roce_rail("net1", "mlx5_0", "10.56.0.2/24", 3),
                       roce_rail("net2", "mlx5_3", "10.56.0.3/24", 3)});
  EXPECT_EQ(env["NCCL_IB_HCA"], "=mlx5_0:1,mlx5_3:1");
  EXPECT_EQ(env["UCX_NET_DEVICES"], "mlx5_0:1,mlx5_3:1");
  EXPECT_EQ(env["NCCL_SOCKET_IFNAME"], "=net1,net2");
  EXPECT_EQ(env.count("NCCL_IB_GID_INDEX"), 0u) << "the same index on every rail, all the same";
  EXPECT_EQ(env["NCCL_IB_ADDR_FAMILY"], "AF_INET");
  EXPECT_EQ(env["NCCL_IB_ADDR_RANGE"], "10.56.0.0/24");
  EXPECT_EQ(env["RDMANET_RAILS"], "2");
  EXPECT_EQ(env["RDMANET_RAIL1_RDMA_DEVICE"], "mlx5_3");
  EXPECT_EQ(env["RDMANET_RAIL1_GID_INDEX"], "3");
  EXPECT_EQ(env["RDMANET_RAIL1_ADDRESS"], "10.56.0.3");
  EXPECT_EQ(env["RDMANET_RAIL0_NUMA_NODE"], "1");
  EXPECT_EQ(env["RDMANET_RAIL0_LINK_LAYER"], "Ethernet");
}

// On a shared HCA the family would also match other pods' GIDs: the index it is, when every
// rail has the same one.
TEST(PodInfo, OnSharedDevicesOneGidIndexForEveryRailIsNcclIbGidIndex) {
  auto env = rail_env({shared_rail("net1", "mlx5_0", "10.56.0.2/24", 3),
                       roce_rail("net2", "mlx5_3", "10.57.0.3/24", 3)});
  EXPECT_EQ(env["NCCL_IB_GID_INDEX"], "3");
  EXPECT_EQ(env.count("NCCL_IB_ADDR_FAMILY"), 0u);
  EXPECT_EQ(env["RDMANET_RAIL0_GID_INDEX"], "3");
}

// A shared HCA gives each pod's GID another index: NCCL is told how to pick them instead.
TEST(PodInfo, DifferentGidIndexesLetNcclPickByFamilyAndRange) {
  auto one_subnet = rail_env({shared_rail("net1", "mlx5_0", "10.56.0.2/24", 3),
                              shared_rail("net2", "mlx5_0", "10.56.0.3/24", 5)});
  EXPECT_EQ(one_subnet.count("NCCL_IB_GID_INDEX"), 0u);
  EXPECT_EQ(one_subnet["NCCL_IB_ADDR_FAMILY"], "AF_INET");
  EXPECT_EQ(one_subnet["NCCL_IB_ADDR_RANGE"], "10.56.0.0/24");

  auto two_subnets = rail_env({roce_rail("net1", "mlx5_0", "10.56.0.2/24", 3),
                               roce_rail("net2", "mlx5_1", "10.57.0.2/24", 5)});
  EXPECT_EQ(two_subnets["NCCL_IB_ADDR_FAMILY"], "AF_INET");
  EXPECT_EQ(two_subnets.count("NCCL_IB_ADDR_RANGE"), 0u);

  json v6_only = roce_rail("net1", "mlx5_0", "fd00:56::2/64", 0);
  v6_only["addresses"] = {"fd00:56::2/64"};
  v6_only["rdma"]["gidIndex"] = {{"ipv6", 2}};
  json v6_other = v6_only;
  v6_other["interface"] = "net2";
  v6_other["addresses"] = {"fd00:56::3/64"};
  v6_other["rdma"]["gidIndex"] = {{"ipv6", 4}};
  auto v6 = rail_env({v6_only, v6_other});
  EXPECT_EQ(v6["NCCL_IB_ADDR_FAMILY"], "AF_INET6");
  EXPECT_EQ(v6["NCCL_IB_ADDR_RANGE"], "fd00:56::/64");
  EXPECT_EQ(v6["RDMANET_RAIL0_GID_INDEX_IPV6"], "2");
  EXPECT_EQ(v6["RDMANET_RAIL0_ADDRESS_IPV6"], "fd00:56::2");
}

// IPv4 rails and an IPv6 rail have no family in common: never a family some rails lack.
TEST(PodInfo, RailsOfBothFamiliesGetTheCommonIndexOrNoGidSetting) {
  json v6 = roce_rail("net2", "mlx5_1", "fd00:56::2/64", 0);
  v6["addresses"] = {"fd00:56::2/64"};
  v6["rdma"]["gidIndex"] = {{"ipv6", 3}};
  auto same = rail_env({roce_rail("net1", "mlx5_0", "10.56.0.2/24", 3), v6});
  EXPECT_EQ(same.count("NCCL_IB_ADDR_FAMILY"), 0u);
  EXPECT_EQ(same["NCCL_IB_GID_INDEX"], "3");
  v6["rdma"]["gidIndex"] = {{"ipv6", 5}};
  auto differ = rail_env({roce_rail("net1", "mlx5_0", "10.56.0.2/24", 3), v6});
  EXPECT_EQ(differ.count("NCCL_IB_ADDR_FAMILY"), 0u);
  EXPECT_EQ(differ.count("NCCL_IB_GID_INDEX"), 0u);
  EXPECT_EQ(differ["RDMANET_RAIL1_GID_INDEX"], "5");
}

// One class for every RoCE rail is what NCCL and UCX send with; rails that disagree, or one
// without a class, leave it to each rail's own line (NCCL and UCX take one class for all).
TEST(PodInfo, TheTrafficClassIsCommonOnlyWhenEveryRoceRailAgrees) {
  auto same = rail_env({with_class(roce_rail("net1", "mlx5_0", "10.56.0.2/24", 3), 106),
                        with_class(roce_rail("net2", "mlx5_1", "10.57.0.2/24", 3), 106)});
  EXPECT_EQ(same["NCCL_IB_TC"], "106");
  EXPECT_EQ(same["UCX_IB_TRAFFIC_CLASS"], "106");
  EXPECT_EQ(same["RDMANET_RAIL1_TC"], "106");
  EXPECT_EQ(same.count("NCCL_IB_FIFO_TC"), 0u) << "NCCL's control messages follow NCCL_IB_TC";

  auto differ = rail_env({with_class(roce_rail("net1", "mlx5_0", "10.56.0.2/24", 3), 106),
                          with_class(roce_rail("net2", "mlx5_1", "10.57.0.2/24", 3), 98)});
  EXPECT_EQ(differ.count("NCCL_IB_TC"), 0u);
  EXPECT_EQ(differ.count("UCX_IB_TRAFFIC_CLASS"), 0u);
  EXPECT_EQ(differ["RDMANET_RAIL0_TC"], "106");
  EXPECT_EQ(differ["RDMANET_RAIL1_TC"], "98");

  auto one_without = rail_env({with_class(roce_rail("net1", "mlx5_0", "10.56.0.2/24", 3), 106),
                               roce_rail("net2", "mlx5_1", "10.57.0.2/24", 3)});
  EXPECT_EQ(one_without.count("NCCL_IB_TC"), 0u);
  EXPECT_EQ(one_without.count("RDMANET_RAIL1_TC"), 0u);

  json control = with_class(roce_rail("net1", "mlx5_0", "10.56.0.2/24", 3), 106);
  control["rdma"]["controlTrafficClass"] = 184;
  auto fifo = rail_env({control});
  EXPECT_EQ(fifo["NCCL_IB_FIFO_TC"], "184");
  EXPECT_EQ(fifo["NCCL_IB_TC"], "106");
}

TEST(PodInfo, InfinibandRailsNeedNoGidSettingsAndPlainRailsNoHca) {
  json ib = roce_rail("net1", "mlx5_4", "10.58.0.2/24", 0);
  ib["rdma"]["linkLayer"] = "InfiniBand";
  ib["rdma"]["gidIndex"] = json::object();
  json plain = {{"interface", "net2"}, {"network", "n"}, {"addresses", {"10.9.0.2/24"}}};
  auto env = rail_env({ib, plain});
  EXPECT_EQ(env["NCCL_IB_HCA"], "=mlx5_4:1");
  EXPECT_EQ(env["NCCL_SOCKET_IFNAME"], "=net1,net2");
  EXPECT_EQ(env.count("NCCL_IB_GID_INDEX"), 0u);
  EXPECT_EQ(env.count("NCCL_IB_ADDR_FAMILY"), 0u);
  EXPECT_EQ(env.count("RDMANET_RAIL1_RDMA_DEVICE"), 0u);
}

TEST(PodInfo, TheDocumentListsRailsInInterfaceOrder) {
  json doc = pod_document({roce_rail("net10", "mlx5_9", "10.56.0.10/24", 3),
                           roce_rail("net2", "mlx5_1", "10.56.0.2/24", 3)},
                          "uid-1");
  ASSERT_EQ(doc["rails"].size(), 2u);
  EXPECT_EQ(doc["rails"][0]["interface"], "net2");
  EXPECT_EQ(doc["env"]["NCCL_IB_HCA"], "=mlx5_1:1,mlx5_9:1");
  std::string env = env_file(doc);
  EXPECT_NE(env.find("\nNCCL_IB_HCA==mlx5_1:1,mlx5_9:1\n"), std::string::npos) << env;
  EXPECT_NE(env.find("\nRDMANET_RAILS=2\n"), std::string::npos) << env;
  std::string nccl = env_file(doc, "NCCL_");
  EXPECT_NE(nccl.find("\nNCCL_IB_HCA==mlx5_1:1,mlx5_9:1\n"), std::string::npos) << nccl;
  EXPECT_EQ(nccl.find("UCX_"), std::string::npos) << nccl;
  EXPECT_EQ(nccl.find("RDMANET_"), std::string::npos) << nccl;
  std::string ucx = env_file(doc, "UCX_");
  EXPECT_NE(ucx.find("\nUCX_NET_DEVICES=mlx5_1:1,mlx5_9:1\n"), std::string::npos) << ucx;
  EXPECT_EQ(ucx.find("NCCL_"), std::string::npos) << ucx;
}

// UCX before 1.18 takes a UD packet's GID length from the completion's sl, where only mlx5's
// provider puts the RoCE packet type: on any other driver (rxe here, irdma, older bnxt_re)
// its UD wire-up over IPv4 never connects unless the DGID check is off. One setting for all
// of UCX: off as soon as one RoCE rail needs it, and ucx.conf says why, naming the devices.
TEST(PodInfo, UdDgidCheckIsOffWhereARoceRailsDriverIsNotMlx5) {
  auto mlx5 = rail_env({roce_rail("net1", "mlx5_0", "10.56.0.2/24", 3),
                        with_driver(roce_rail("net2", "mlx5_1", "10.57.0.2/24", 3), "mlx5_core")});
  EXPECT_EQ(mlx5.count("UCX_UD_VERBS_ETH_DGID_CHECK"), 0u);
  auto rxe =
      rail_env({with_driver(roce_rail("net1", "rxe0123456789ab", "10.56.0.2/24", 1), "rxe")});
  EXPECT_EQ(rxe["UCX_UD_VERBS_ETH_DGID_CHECK"], "n");
  auto mixed = rail_env({roce_rail("net1", "mlx5_0", "10.56.0.2/24", 3),
                         with_driver(roce_rail("net2", "irdma0", "10.57.0.2/24", 3), "irdma")});
  EXPECT_EQ(mixed["UCX_UD_VERBS_ETH_DGID_CHECK"], "n");
  json unknown = roce_rail("net1", "roce0", "10.56.0.2/24", 1);
  unknown["rdma"].erase("driver");  // a record from before drivers were recorded
  EXPECT_EQ(rail_env({unknown})["UCX_UD_VERBS_ETH_DGID_CHECK"], "n");
  json ib = with_driver(roce_rail("net1", "ibp59s0", "10.58.0.2/24", 0), "irdma");
  ib["rdma"]["linkLayer"] = "InfiniBand";
  EXPECT_EQ(rail_env({ib}).count("UCX_UD_VERBS_ETH_DGID_CHECK"), 0u) << "no DGID check on IB";

  json doc =
      pod_document({with_driver(roce_rail("net1", "rxe0123456789ab", "10.56.0.2/24", 1), "rxe"),
                    roce_rail("net2", "mlx5_1", "10.57.0.2/24", 3)},
                   "uid-1");
  std::string ucx = env_file(doc, "UCX_", ucx_notes(doc));
  EXPECT_NE(ucx.find("\n# UCX_UD_VERBS_ETH_DGID_CHECK=n: rxe0123456789ab (rxe) report no RoCE "
                     "packet type in UD completions"),
            std::string::npos)
      << ucx;
  EXPECT_EQ(ucx.find("mlx5_1 ("), std::string::npos) << "an mlx5 rail is not named: " << ucx;
  EXPECT_NE(ucx.find("\nUCX_UD_VERBS_ETH_DGID_CHECK=n\n"), std::string::npos) << ucx;
  EXPECT_LT(ucx.find("# UCX_UD"), ucx.find("\nUCX_NET_DEVICES=")) << "comments first: " << ucx;
}

// A device whose name UCX truncates (over 15 characters: an operator's own name) is still
// listed, and ucx.conf says that UCX cannot open it and why.
TEST(PodInfo, UcxConfSaysWhichDeviceUcxCannotOpen) {
  json doc = pod_document({roce_rail("net1", "mlx5_bond_rail_0", "10.56.0.2/24", 3),
                           roce_rail("net2", "mlx5_1", "10.57.0.2/24", 3)},
                          "uid-1");
  auto notes = ucx_notes(doc);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0],
            "UCX cannot open RDMA device mlx5_bond_rail_0 (rail net1): its name has 16 "
            "characters, UCX takes at most 15 (UCT_MD_NAME_MAX)");
  EXPECT_NE(env_file(doc, "UCX_", notes).find("\n# UCX cannot open RDMA device mlx5_bond_rail_0"),
            std::string::npos);
  EXPECT_TRUE(
      ucx_notes(pod_document({roce_rail("net1", "mlx5_1", "10.57.0.2/24", 3)}, "u")).empty());
}

// NCCL's own parser (parseStringList, src/misc/utils.cc): an optional '^' then '=', entries
// split at ',', a name up to ':' copied into a 64-byte prefix without a bound check, the
// port atoi() of the rest. MAX_IB_DEVS 32 HCAs, MAX_IFS 16 interfaces of MAX_IF_NAME_SIZE 16.
struct NcclEntry {
  std::string name;
  int port = -1;
};
std::vector<NcclEntry> nccl_list(std::string value, bool* exact) {
  *exact = value.starts_with("=");
  if (*exact) {
    value.erase(0, 1);
  }
  std::vector<NcclEntry> entries;
  size_t start = 0;
  while (start <= value.size()) {
    const size_t end = std::min(value.find(',', start), value.size());
    const std::string token = value.substr(start, end - start);
    const size_t colon = token.find(':');
    NcclEntry e{token.substr(0, colon)};
    if (colon != std::string::npos) {
      e.port = std::atoi(token.c_str() + colon + 1);
    }
    entries.push_back(e);
    start = end + 1;
  }
  return entries;
}

// Eight rails as rdmanet names them at the longest: soft-RoCE devices on 15-byte interface
// names. What rdma.env and nccl.conf give NCCL parses as meant, within NCCL's limits, exact
// matches (NCCL matches by prefix otherwise: mlx5_1 would take mlx5_10), on port 1.
TEST(PodInfo, NcclTakesEightRailsOfTheLongestNamesAsMeant) {
  std::vector<json> rails;
  std::vector<std::string> devices;
  std::vector<std::string> ifnames;
  for (int i = 0; i < 8; ++i) {
    std::string ifname = "rail-interface" + std::to_string(i);  // 15 bytes
    ASSERT_EQ(ifname.size(), 15u);
    std::string device = soft_roce_name({"rail" + std::to_string(i), "0123456789abcdef", ifname});
    rails.push_back(
        with_driver(roce_rail(ifname, device, "10.60." + std::to_string(i) + ".2/24", 1), "rxe"));
    devices.push_back(device);
    ifnames.push_back(ifname);
  }
  auto env = rail_env(rails);
  bool exact = false;
  auto hcas = nccl_list(env["NCCL_IB_HCA"], &exact);
  EXPECT_TRUE(exact);
  ASSERT_EQ(hcas.size(), 8u);
  ASSERT_LE(hcas.size(), 32u) << "MAX_IB_DEVS";
  for (size_t i = 0; i < hcas.size(); ++i) {
    EXPECT_EQ(hcas[i].name, devices[i]);
    EXPECT_LT(hcas[i].name.size(), 64u) << "netIf.prefix[64]";
    EXPECT_LE(hcas[i].name.size(), kUcxDeviceNameMax) << "UCT_MD_NAME_MAX";
    EXPECT_EQ(hcas[i].port, 1);
  }
  auto ifs = nccl_list(env["NCCL_SOCKET_IFNAME"], &exact);
  EXPECT_TRUE(exact);
  ASSERT_EQ(ifs.size(), 8u);
  EXPECT_LE(ifs.size(), 16u) << "MAX_IFS";
  for (size_t i = 0; i < ifs.size(); ++i) {
    EXPECT_EQ(ifs[i].name, ifnames[i]);
    EXPECT_LT(ifs[i].name.size(), 16u) << "MAX_IF_NAME_SIZE";
    EXPECT_EQ(ifs[i].port, -1);
  }
  EXPECT_EQ(env["NCCL_IB_ADDR_FAMILY"], "AF_INET") << "NCCL takes AF_INET or AF_INET6 only";
  EXPECT_EQ(env["UCX_NET_DEVICES"].find('='), std::string::npos) << "UCX matches exactly";
}

TEST(PodInfo, GidFieldsAreThePodInterfacesGidsAndEachFamilysRoceV2Index) {
  json report = {
      {"device", "rxe0"},
      {"port", 1},
      {"table",
       {{{"index", 1}, {"gid", "fe80::1"}, {"type", "RoCE v2"}, {"netdev", "net1"}},
        {{"index", 3}, {"gid", "::ffff:10.56.0.2"}, {"type", "RoCE v2"}, {"netdev", "net1"}},
        {{"index", 5}, {"gid", "::ffff:10.56.0.9"}, {"type", "RoCE v2"}, {"netdev", "other"}}}},
      {"addresses",
       {{{"address", "10.56.0.2"}, {"index", 3}}, {{"address", "fd00::2"}, {"index", -1}}}}};
  json fields = gid_fields(report, "net1");
  EXPECT_EQ(fields["gids"].size(), 2u) << fields.dump();
  EXPECT_EQ(fields["gidIndex"], json({{"ipv4", 3}})) << "an address without a GID has none";
}

}  // namespace
}  // namespace rdmanet::plugin
