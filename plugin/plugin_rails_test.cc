// End to end: pods with eight RDMA rails, as on 8-GPU nodes. Each rail is a veth pair whose
// ends go to two rdmanet pods (the pod and its peer), one rail per CNI_IFNAME, on one shared
// subnet and on eight subnets. Every rail must reach its peer rail out of its own
// interface, with the replies coming back on it (tcpdump in the pod says which interface
// each packet crossed), and DEL of one rail must leave the others working.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "plugin/testing/plugin_fixture.h"

namespace rdmanet::plugin::testing {
namespace {

constexpr int kRails = 8;

class Rails : public Rdmanet {
 protected:
  // Rail k's config: network "rails" on one subnet, or "rail<k>" on a subnet of its own.
  json rail_conf(int k, bool own_subnet) {
    std::string subnet = own_subnet ? "10.13" + std::to_string(k) + ".0.0/24" : "10.130.0.0/24";
    json c = conf({{"device", ports_[k].first}});
    c["name"] = own_subnet ? "rail" + std::to_string(k) : "rails";
    c["ipam"]["ranges"] = {{{{"subnet", subnet}}}};
    c["ipam"]["routes"] = {{{"dst", "10.200." + std::to_string(k) + ".0/24"}}};
    return c;
  }
  json peer_conf(int k, bool own_subnet) {
    json c = rail_conf(k, own_subnet);
    c["device"] = ports_[k].second;
    return c;
  }
  static std::string ifname(int k) { return "net" + std::to_string(k + 1); }

  // Attaches the eight rails to the pod and their peers to the peer pod; returns false (with
  // a test failure) when an ADD fails.
  void attach_all(bool own_subnet) {
    for (int k = 0; k < kRails; ++k) {
      ports_.push_back(make_ports());
    }
    pod_ = make_pod();
    peer_ = make_pod();
    for (int k = 0; k < kRails; ++k) {
      auto add = cni("ADD", "trainer", pod_, rail_conf(k, own_subnet), ifname(k));
      ASSERT_EQ(add.exit_code, 0) << add.out << add.err;
      addr_.push_back(address_of(add));
      expect_rails_file(k + 1);
      auto peer = cni("ADD", "peer", peer_, peer_conf(k, own_subnet), ifname(k));
      ASSERT_EQ(peer.exit_code, 0) << peer.out << peer.err;
      peer_addr_.push_back(address_of(peer));
    }
  }
  // The pod's rails files (K8S_POD_UID uid-trainer) list these rails, in order.
  void expect_rails_file(const std::vector<int>& rails) {
    std::string dir = dir_ + "/pods/uid-trainer";
    json doc = json::parse(sh("cat " + dir + "/rails.json"), nullptr, false);
    ASSERT_TRUE(doc.is_object()) << "no rails.json in " << dir;
    ASSERT_EQ(doc["rails"].size(), rails.size()) << doc.dump();
    std::string ifnames;
    for (size_t i = 0; i < rails.size(); ++i) {
      const int k = rails[i];
      EXPECT_EQ(doc["rails"][i]["interface"], ifname(k));
      EXPECT_EQ(doc["rails"][i]["addresses"][0].get<std::string>().rfind(addr_[k] + "/", 0), 0u)
          << doc["rails"][i].dump();
      ifnames += (i == 0 ? "=" : ",") + ifname(k);
    }
    std::string env = sh("cat " + dir + "/rdma.env");
    EXPECT_NE(env.find("\nNCCL_SOCKET_IFNAME=" + ifnames + "\n"), std::string::npos) << env;
    EXPECT_NE(env.find("\nRDMANET_RAILS=" + std::to_string(rails.size()) + "\n"), std::string::npos)
        << env;
  }
  void expect_rails_file(int first_n) {
    std::vector<int> rails(first_n);
    std::iota(rails.begin(), rails.end(), 0);
    expect_rails_file(rails);
  }

  static std::string address_of(const Output& add) {
    std::string cidr = add.doc()["ips"][0]["address"];
    return cidr.substr(0, cidr.find('/'));
  }

  // Pings each listed rail's peer from the rail's address while tcpdump watches every rail
  // of the pod; returns, per rail of the pod, the ICMP packets it saw ("<src> > <dst>"), and
  // in `unreachable` a line per rail whose ping got no answer.
  std::vector<std::string> ping_rails(const std::vector<int>& rails, std::string* unreachable) {
    std::string dir = sh("mktemp -d /tmp/rdmanet-rails.XXXXXX");
    dir.pop_back();
    const int n = static_cast<int>(ports_.size());
    std::ostringstream script;
    script << "set -e; cd " << dir << "\n";
    for (int k = 0; k < n; ++k) {
      script << "ip netns exec " << pod_ << " timeout 20 tcpdump -i " << ifname(k)
             << " -n -l -p icmp > cap" << k << " 2> err" << k << " &\n";
    }
    // Until every capture is listening.
    script << "for i in $(seq 100); do n=$(cat err* | grep -c 'listening on' || true); "
              "[ \"$n\" -eq "
           << n << " ] && break; sleep 0.05; done\n";
    for (int k : rails) {
      script << "ip netns exec " << pod_ << " ping -q -c 1 -W 3 -I " << addr_[k] << " "
             << peer_addr_[k] << " > ping" << k << " || echo 'rail " << k << " unreachable'\n";
    }
    script << "sleep 0.5; ip netns pids " << pod_ << " | xargs -r kill 2>/dev/null || true; wait\n";
    std::ofstream(dir + "/run.sh") << script.str();
    *unreachable = sh("sh " + dir + "/run.sh");
    std::vector<std::string> seen;
    seen.reserve(n);
    for (int k = 0; k < n; ++k) {
      // "12:00:00.000000 IP 10.130.0.2 > 10.130.0.3: ICMP echo request, ..." -> "<src> > <dst>"
      seen.push_back(sh("awk '$2 == \"IP\" { sub(/:$/, \"\", $5); printf \"%s > %s \", $3, $5 }' " +
                        dir + "/cap" + std::to_string(k)));
    }
    sh("rm -rf " + dir);
    return seen;
  }
  std::string exchange(int k) const {
    return addr_[k] + " > " + peer_addr_[k] + " " + peer_addr_[k] + " > " + addr_[k] + " ";
  }

  // Every rail's echo request and reply crossed that rail's interface and no other.
  void expect_each_rail_on_its_own(const std::vector<int>& rails) {
    std::string unreachable;
    auto seen = ping_rails(rails, &unreachable);
    EXPECT_EQ(unreachable, "");
    for (int k = 0; k < kRails; ++k) {
      bool pinged = std::find(rails.begin(), rails.end(), k) != rails.end();
      EXPECT_EQ(seen[k], pinged ? exchange(k) : "") << ifname(k) << " of the pod";
    }
  }

  std::vector<std::pair<std::string, std::string>> ports_;
  std::string pod_;
  std::string peer_;
  std::vector<std::string> addr_;
  std::vector<std::string> peer_addr_;
};

std::vector<int> all_rails() {
  std::vector<int> rails(kRails);
  std::iota(rails.begin(), rails.end(), 0);
  return rails;
}

TEST_F(Rails, EightRailsOnOneSubnetEachUseTheirOwnInterface) {
  attach_all(false);
  if (HasFatalFailure()) {
    return;
  }
  // The same route on eight rails: the first one's is in the main table, each rail's in
  // its own.
  EXPECT_NE(sh("ip -n " + pod_ + " route show").find("10.200.0.0/24 via 10.130.0.1 dev net1"),
            std::string::npos);
  expect_each_rail_on_its_own(all_rails());

  // DEL of rail 3 leaves the other seven as they were.
  ASSERT_EQ(cni("DEL", "trainer", pod_, rail_conf(3, false), ifname(3)).exit_code, 0);
  EXPECT_FALSE(link_exists(ifname(3), pod_));
  EXPECT_EQ(sh("ip -n " + pod_ + " rule show").find("from " + addr_[3] + " "), std::string::npos);
  std::vector<int> rest = {0, 1, 2, 4, 5, 6, 7};
  expect_rails_file(rest);
  for (int k : rest) {
    EXPECT_NE(sh("ip -n " + pod_ + " rule show").find("from " + addr_[k] + " lookup"),
              std::string::npos)
        << "rail " << k << " lost its rule";
  }
  expect_each_rail_on_its_own(rest);
}

TEST_F(Rails, EightRailsOnEightSubnetsEachUseTheirOwnInterface) {
  attach_all(true);
  if (HasFatalFailure()) {
    return;
  }
  expect_each_rail_on_its_own(all_rails());
  ASSERT_EQ(cni("DEL", "trainer", pod_, rail_conf(3, true), ifname(3)).exit_code, 0);
  expect_rails_file({0, 1, 2, 4, 5, 6, 7});
  expect_each_rail_on_its_own({0, 1, 2, 4, 5, 6, 7});
  // The last rail's DEL takes the pod's directory with it.
  for (int k : {0, 1, 2, 4, 5, 6, 7}) {
    ASSERT_EQ(cni("DEL", "trainer", pod_, rail_conf(k, true), ifname(k)).exit_code, 0);
  }
  EXPECT_FALSE(link_exists(ifname(0), pod_));
  EXPECT_EQ(sh("ls " + dir_ + "/pods"), "uid-peer\n")
      << "the pod's rails directory outlived its last rail (the peer pod's stays)";
}

// Without sourceRouting the kernel sends everything for a shared subnet out of one rail, and
// the peer's rail there (arp_ignore=1, as multi-rail needs) does not answer ARP for another
// rail's address: rail 1 cannot reach its peer at all. This is what the rules are for.
TEST_F(Rails, WithoutSourceRoutingASharedSubnetLeavesByOneRail) {
  for (int k = 0; k < 2; ++k) {
    ports_.push_back(make_ports());
  }
  pod_ = make_pod();
  peer_ = make_pod();
  for (int k = 0; k < 2; ++k) {
    json c = rail_conf(k, false);
    c["sourceRouting"] = false;
    auto add = cni("ADD", "trainer", pod_, c, ifname(k));
    ASSERT_EQ(add.exit_code, 0) << add.out;
    addr_.push_back(address_of(add));
    auto peer = cni("ADD", "peer", peer_, peer_conf(k, false), ifname(k));
    ASSERT_EQ(peer.exit_code, 0) << peer.out;
    peer_addr_.push_back(address_of(peer));
  }
  EXPECT_EQ(sh("ip -n " + pod_ + " rule show").find("lookup 1"), std::string::npos);
  std::string route = sh("ip -n " + pod_ + " route get " + peer_addr_[1] + " from " + addr_[1]);
  EXPECT_NE(route.find("dev net1"), std::string::npos) << route;
  std::string unreachable;
  ping_rails({1}, &unreachable);
  EXPECT_EQ(unreachable, "rail 1 unreachable\n");
  // The peer, with sourceRouting, picks the right rail for the same question.
  std::string back = sh("ip -n " + peer_ + " route get " + addr_[1] + " from " + peer_addr_[1]);
  EXPECT_NE(back.find("dev net2 table"), std::string::npos) << back;
}

// IPAM lists the rail's own subnet as a route, and another route twice: the rail's table
// takes them as the main table does (the connected route is already there; a route is
// one route), where ADD failed with "File exists" (102).
TEST_F(Rails, IpamRoutesOfTheOwnSubnetOrListedTwiceAreTakenAsTheMainTableTakesThem) {
  ports_.push_back(make_ports());
  pod_ = make_pod();
  json c = conf({{"device", ports_[0].first}});
  c["ipam"]["routes"] = {
      {{"dst", "10.123.0.0/24"}}, {{"dst", "10.124.0.0/16"}}, {{"dst", "10.124.0.0/16"}}};
  auto add = cni("ADD", "trainer", pod_, c);
  ASSERT_EQ(add.exit_code, 0) << add.out << add.err;
  std::string table = sh("ip -n " + pod_ + " route show table all");
  EXPECT_NE(table.find("10.124.0.0/16 via 10.123.0.1 dev net1 table"), std::string::npos) << table;
  EXPECT_NE(table.find("10.123.0.0/24 dev net1 table"), std::string::npos) << table;
  auto del = cni("DEL", "trainer", pod_, c);
  EXPECT_EQ(del.exit_code, 0) << del.out;
  EXPECT_EQ(sh("ip -n " + pod_ + " rule show").find("lookup 1"), std::string::npos);
  EXPECT_TRUE(state_files().empty());
}

}  // namespace
}  // namespace rdmanet::plugin::testing
