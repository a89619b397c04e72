// End to end: the pod holds CAP_NET_ADMIN in its own netns and uses it. Everything in the
// pod netns (names, MACs, new links, nested namespaces) is the attacker's; DEL must bring
// the device home by what the pod cannot forge, never move a link that is not the device,
// and keep its record while it cannot.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "plugin/testing/plugin_fixture.h"

namespace rdmanet::plugin::testing {
namespace {

class Hostile : public Rdmanet {
 protected:
  // The ports' host peer, the pod, a config, and an ADD that worked.
  void attach(const json& extra = json::object()) {
    std::tie(port_, peer_) = make_ports();
    mac_ = link_field(port_, "address");
    mtu_ = link_field(port_, "mtu");
    pod_ = make_pod();
    config_ = conf({{"device", port_}});
    config_.update(extra);
    auto add = cni("ADD", "evil", pod_, config_);
    ASSERT_EQ(add.exit_code, 0) << add.out << add.err;
  }

  Output del() { return cni("DEL", "evil", pod_, config_); }

  // The attachment's record file, and a way to change what it says.
  std::string record_file() const { return dir_ + "/state/rail0/evil.6e657431.json"; }
  json read_record() const {
    std::ifstream in(record_file());
    return json::parse(in, nullptr, false);
  }
  void write_record(const json& doc) const { std::ofstream(record_file()) << doc.dump(2); }
  // Sets `key` of the record's first step of kind `step` to `value`.
  void forge(const std::string& step, const std::string& key, const json& value) {
    json doc = read_record();
    for (auto& s : doc["steps"]) {
      if (s["step"] == step) {
        s[key] = value;
        write_record(doc);
        return;
      }
    }
    FAIL() << "no step " << step << " in " << doc.dump();
  }

  // `rdmanet state ...` on the test's state dir: exit code and stdout.
  std::pair<int, std::string> state(const std::string& args) {
    std::string out = dir_ + "/state-command.out";
    int rc = std::system(
        (dir_ + "/bin/rdmanet state --state-dir " + dir_ + "/state " + args + " >" + out + " 2>&1")
            .c_str());
    std::ifstream in(out);
    return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1,
            std::string(std::istreambuf_iterator<char>(in), {})};
  }

  // `ip -n <pod> ...` as the pod would run it.
  void in_pod(const std::string& cmd) { sh("ip -n " + pod_ + " " + cmd); }

  // As attach(), with a NIC that is a veth whose peer sits in a third netns the pod cannot
  // reach (a switch netns, as the CRI tier's NICs have it): nothing of the device in the
  // pod (name, MAC, ifindex) is out of the pod's reach, only its peer is.
  void attach_far(const json& extra = json::object()) {
    far_ = make_pod();
    port_ = "rt" + tag_ + "far";
    sh("ip link add " + port_ + " type veth peer name farpeer netns " + far_ + " && ip -n " + far_ +
       " link set farpeer up");
    links_.push_back(port_);
    mac_ = link_field(port_, "address");
    mtu_ = link_field(port_, "mtu");
    pod_ = make_pod();
    config_ = conf({{"device", port_}});
    config_.update(extra);
    auto add = cni("ADD", "evil", pod_, config_);
    ASSERT_EQ(add.exit_code, 0) << add.out << add.err;
  }

  // The pod's netns without its pin, alive as long as a process holds it: `ip netns del`
  // unmounts and removes the pin; a sleep started in the netns before keeps it.
  void unpin_pod_held_by_a_process() {
    holder_ = std::stoi(sh("ip netns exec " + pod_ + " sleep 600 >/dev/null 2>&1 & echo $!"));
    for (int i = 0; i < 100 && sh("readlink /proc/" + std::to_string(holder_) + "/ns/net") ==
                                   sh("readlink /proc/self/ns/net");
         ++i) {
      usleep(10000);  // until ip netns exec has entered the netns
    }
    sh("ip netns del " + pod_);
  }
  // The holder exits: the netns dies with it.
  void release_pod_netns() {
    if (holder_ <= 0) {
      return;
    }
    kill(holder_, SIGKILL);
    // Not our child (the shell's): wait until it has left its namespaces (an exited
    // process's ns links are gone, zombie or reaped).
    std::string ns = "/proc/" + std::to_string(holder_) + "/ns/net";
    std::error_code ec;
    for (int i = 0; i < 500 && !ec; ++i) {
      (void)std::filesystem::read_symlink(ns, ec);
      if (!ec) {
        usleep(10000);
      }
    }
    holder_ = 0;
  }
  void TearDown() override {
    release_pod_netns();
    Rdmanet::TearDown();
  }

  // rdmanet-ipam in place of host-local, which predates GC (CNI 1.1).
  json with_gc_capable_ipam() {
    json ipam = conf(json::object())["ipam"];
    ipam["type"] = "rdmanet-ipam";
    return {{"ipam", ipam}};
  }

  // DEL could not prove the device home or gone: 11 naming it, record and address kept.
  void expect_del_holds_on(const Output& d) {
    EXPECT_EQ(d.code(), 11) << d.out << d.err;
    EXPECT_NE(d.msg().find(port_), std::string::npos) << d.msg();
    EXPECT_FALSE(state_files().empty()) << "the record was dropped with the device away";
    EXPECT_EQ(leases().size(), 1U) << "the address was released while the pod still has it";
  }
  // DEL finished: nothing recorded or leased is left.
  void expect_del_finished(const Output& d) {
    EXPECT_EQ(d.exit_code, 0) << d.out << d.err;
    EXPECT_TRUE(state_files().empty());
    EXPECT_TRUE(leases().empty());
  }

  std::string port_, peer_, mac_, mtu_, pod_, far_;
  pid_t holder_ = 0;

  json config_;
};

// The pod renames net1 and puts a veth of its own in its place with the device's MAC: DEL
// brings the real device home and leaves the pod's veth where it is.
TEST_F(Hostile, AnImpostorNamedLikeThePodInterfaceIsNotMoved) {
  attach({{"mtu", 1400}});
  in_pod("link set net1 name stolen");
  in_pod("link add net1 address " + mac_ + " type veth peer name fake1");
  in_pod("link set net1 up");
  auto d = del();
  EXPECT_EQ(d.exit_code, 0) << d.out << d.err;
  EXPECT_TRUE(link_exists(port_)) << "the real device is not home";
  EXPECT_EQ(link_field(port_, "mtu"), mtu_);
  EXPECT_EQ(link_field(peer_, "link"), "\"" + port_ + "\"") << "home is the port of this peer";
  EXPECT_TRUE(link_exists("net1", pod_)) << "the pod's own veth was taken";
  EXPECT_FALSE(link_exists("stolen", pod_));
  EXPECT_TRUE(state_files().empty());
}

// Renamed only: found under its new name.
TEST_F(Hostile, ARenamedDeviceStillComesHome) {
  attach();
  in_pod("link set net1 name whatever0");
  EXPECT_EQ(del().exit_code, 0);
  EXPECT_TRUE(link_exists(port_));
  EXPECT_FALSE(link_exists("whatever0", pod_));
  EXPECT_TRUE(state_files().empty());
}

// Hidden in a netns of the pod's own: DEL cannot bring it home, says so (11, naming the
// device), keeps the record and changes nothing; once it is back in the pod, DEL finishes.
TEST_F(Hostile, ADeviceHiddenInANestedNetnsKeepsTheRecordUntilItCanComeHome) {
  attach();
  std::string nested = make_pod();
  in_pod("link set net1 netns " + nested);
  auto d = del();
  EXPECT_EQ(d.exit_code, 1) << d.out;
  expect_del_holds_on(d);
  EXPECT_TRUE(link_exists("net1", nested));

  sh("ip -n " + nested + " link set net1 netns " + pod_);
  expect_del_finished(del());
  EXPECT_TRUE(link_exists(port_));
}

// The pod deletes its end of the veth (its host peer goes with it): nothing is left to
// bring home, and DEL can tell, because the peer in the host is gone too.
TEST_F(Hostile, ADeviceThePodDeletedIsGoneAndDelSaysDone) {
  attach();
  in_pod("link del net1");
  EXPECT_EQ(del().exit_code, 0);
  EXPECT_TRUE(state_files().empty());
}

// Back in the host under another name, as the kernel hands back a device of a destroyed
// netns when its name is taken (dev<ifindex>), with what the pod set: found by identity,
// renamed back, its MTU and MAC restored.
TEST_F(Hostile, ADeviceBackAsDevIfindexIsRestored) {
  attach();
  in_pod("link set net1 mtu 1280 address 02:00:00:00:06:66");
  const std::string dev = "dev" + tag_;  // unique: parallel tests share the host
  in_pod("link set net1 netns 1 name " + dev);
  auto d = del();
  EXPECT_EQ(d.exit_code, 0) << d.out << d.err;
  EXPECT_TRUE(link_exists(port_)) << sh("ip -br link", false);
  EXPECT_FALSE(link_exists(dev));
  EXPECT_EQ(link_field(port_, "mtu"), mtu_);
  EXPECT_EQ(link_field(port_, "address"), mac_);
  EXPECT_TRUE(state_files().empty());
}

// macvlan mode: the pod renames our child and makes a veth named net1; DEL deletes the
// child (known by its parent in the host) and not the pod's veth.
TEST_F(Hostile, MacvlanDelDeletesOurChildNotTheImpostor) {
  attach({{"mode", "macvlan"}});
  in_pod("link set net1 name ours");
  in_pod("link add net1 type veth peer name fake1");
  auto d = del();
  EXPECT_EQ(d.exit_code, 0) << d.out << d.err;
  EXPECT_FALSE(link_exists("ours", pod_));
  EXPECT_TRUE(link_exists("net1", pod_)) << "the pod's own link was deleted";
  EXPECT_TRUE(link_exists(port_)) << "the parent stays in the host";
  EXPECT_TRUE(state_files().empty());
}

// Tampered state: the record names what is not the attachment's. DEL refuses (107, naming
// the field), changes nothing the forged field names and keeps the record; the operator
// sees it in `rdmanet state list` and drops it with `rdmanet state forget`.
TEST_F(Hostile, AForgedHoldKeyIsRefusedAndTheOperatorCanForgetTheRecord) {
  attach();
  // Another attachment's hold, which DEL must not release.
  std::string other = dir_ + "/state/holds/someone-else";
  std::ofstream(other) << R"({"network":"rail0","containerID":"other","ifname":"net1"})";
  forge("hold-device", "key", "someone-else");
  auto d = del();
  EXPECT_EQ(d.code(), 107) << d.out;
  EXPECT_NE(d.msg().find("hold-device.key"), std::string::npos) << d.msg();
  EXPECT_TRUE(std::filesystem::exists(other)) << "another attachment's hold was released";
  EXPECT_TRUE(std::filesystem::exists(record_file())) << "the record went with a step undone";
  EXPECT_TRUE(link_exists(port_)) << "the steps before the forged one are undone";

  auto [list_rc, listing] = state("list");
  EXPECT_EQ(list_rc, 0) << listing;
  EXPECT_NE(listing.find("container evil ifname net1"), std::string::npos) << listing;
  EXPECT_NE(listing.find("steps hold-device"), std::string::npos) << listing;
  // Its pod netns still exists: DEL may yet finish it, so forget wants --force.
  auto [live_rc, live] = state("forget " + record_file());
  EXPECT_EQ(live_rc, 1) << live;
  EXPECT_NE(live.find("still exists"), std::string::npos) << live;
  EXPECT_TRUE(std::filesystem::exists(record_file()));
  auto [rc, out] = state("forget --force " + record_file());
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("\"someone-else\""), std::string::npos) << "the record is shown: " << out;
  EXPECT_FALSE(std::filesystem::exists(record_file()));
  EXPECT_TRUE(std::filesystem::exists(other)) << "forget released someone else's hold";
  EXPECT_EQ(state_files(), std::vector<std::string>{other}) << "our hold is not released";
  EXPECT_EQ(del().exit_code, 0);
}

// A record that no longer parses: DEL says so (107, naming the file), GC goes on past it,
// `state list` names it as unreadable, `state forget` drops it and the hold naming it.
TEST_F(Hostile, AnUnreadableRecordIsListedAndForgotten) {
  attach();
  std::ofstream(record_file()) << R"({"version": 2, "steps": [)";
  auto d = del();
  EXPECT_EQ(d.code(), 107) << d.out;
  EXPECT_NE(d.msg().find(record_file()), std::string::npos) << d.msg();
  auto [list_rc, listing] = state("list");
  EXPECT_EQ(list_rc, 0) << listing;
  EXPECT_NE(listing.find("unreadable " + record_file()), std::string::npos) << listing;
  auto [rc, out] = state("forget " + record_file());
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("released the hold"), std::string::npos) << out;
  EXPECT_TRUE(state_files().empty()) << "the record or its hold is left";
  EXPECT_EQ(del().exit_code, 0);
}

// `state forget` drops only record files of the state dir it was given.
TEST_F(Hostile, StateForgetTouchesNothingButRecordFiles) {
  attach();
  for (const std::string& path :
       {dir_ + "/elsewhere.json", dir_ + "/state/holds/x.json", dir_ + "/state/rail0/../x.json",
        dir_ + "/state/rail0/sub/dir.json", std::string("relative.json")}) {
    if (path.front() == '/') {
      std::ofstream(path) << "{}";  // some of these cannot be created; that is fine
    }
    auto [rc, out] = state("forget " + path);
    EXPECT_EQ(rc, 1) << path << ": " << out;
  }
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/elsewhere.json"));
  EXPECT_TRUE(std::filesystem::exists(record_file()));
  EXPECT_EQ(state("bogus").first, 2);
  EXPECT_EQ(state("--state-dir relative list").first, 2);
}

// Forged names and paths in the steps: each is refused before anything acts on it.
TEST_F(Hostile, ForgedNamesInTheRecordAreRefused) {
  attach();
  forge("netdev-move", "hostName", "../../x");
  auto d = del();
  EXPECT_EQ(d.code(), 107) << d.out;
  EXPECT_NE(d.msg().find("netdev-move.hostName"), std::string::npos) << d.msg();
  EXPECT_TRUE(link_exists("net1", pod_)) << "the device moved under a forged name";
}

// A device-info path pointed at a file that is not the device-info document ADD wrote
// (another file, or another device's document): DEL leaves that file alone.
TEST_F(Hostile, ADeviceInfoPathPointedElsewhereIsNotRemoved) {
  std::tie(port_, peer_) = make_ports();
  fake_pci("0000:3b:00.2", port_, "mlx5_core");
  pod_ = make_pod();
  config_ = conf({{"sysfsRoot", dir_ + "/sys"},
                  {"runtimeConfig",
                   {{"deviceID", "0000:3b:00.2"}, {"CNIDeviceInfoFile", dir_ + "/devinfo"}}}});
  std::string precious = dir_ + "/precious";
  std::ofstream(precious) << "not a device-info document\n";
  std::string other_device = dir_ + "/other-devinfo";
  std::ofstream(other_device) << R"({"type":"pci","pci":{"pci-address":"0000:3b:00.9"}})";
  for (const std::string& target : {precious, other_device}) {
    auto add = cni("ADD", "evil", pod_, config_);
    ASSERT_EQ(add.exit_code, 0) << add.out << add.err;
    forge("device-info", "path", target);
    EXPECT_EQ(del().exit_code, 0) << "Multus removes the file too; DEL warns and goes on";
    EXPECT_TRUE(std::filesystem::exists(target)) << target << " was removed";
  }
}

// --- a NIC whose veth peer is in a third netns ------------------------------------------

// The pod renames the device, sets another MAC and puts an impostor with the old name and
// MAC in its place: the peer, out of the pod's reach, still names the device, which comes
// home with its own name and MAC; the impostor stays.
TEST_F(Hostile, AFarPeeredVethRenamedAndReaddressedStillComesHome) {
  attach_far();
  in_pod("link set net1 down");
  in_pod("link set net1 name stolen address 02:00:00:00:07:77");
  in_pod("link add net1 address " + mac_ + " type veth peer name fake1");
  expect_del_finished(del());
  EXPECT_TRUE(link_exists(port_)) << "the device is not home: " << sh("ip -br link", false);
  EXPECT_EQ(link_field(port_, "address"), mac_);
  EXPECT_FALSE(link_exists("stolen", pod_));
  EXPECT_TRUE(link_exists("net1", pod_)) << "the pod's own veth was taken";
}

// Hidden in a netns of the pod's own: 11 naming the device, the record and the address
// kept; back in the pod, DEL finishes.
TEST_F(Hostile, AFarPeeredVethHiddenInANestedNetnsKeepsItsAddress) {
  attach_far();
  std::string nested = make_pod();
  in_pod("link set net1 name hidden");
  in_pod("link set hidden netns " + nested);
  expect_del_holds_on(del());

  sh("ip -n " + nested + " link set hidden netns " + pod_);
  expect_del_finished(del());
  EXPECT_TRUE(link_exists(port_));
}

// The pod deletes it: its peer went with it, which DEL can tell.
TEST_F(Hostile, AFarPeeredVethThePodDeletedIsGone) {
  attach_far();
  in_pod("link del net1");
  expect_del_finished(del());
}

// Two ports of one wire, each given to a pod: pod A can move its port, which is pod B's
// device's peer, into a netns of its own. Pod B's device has lost its peer's trail but not
// its pair: B's DEL answers 11 and keeps the address until the trail is back.
TEST_F(Hostile, APeerTheOtherPodHidesDoesNotMakeTheDeviceGone) {
  auto [port_a, port_b] = make_ports();
  std::string pod_a = make_pod();
  std::string pod_b = make_pod();
  std::string nested = make_pod();
  json a = conf({{"device", port_a}});
  json b = conf({{"device", port_b}});
  ASSERT_EQ(cni("ADD", "wire-a", pod_a, a).exit_code, 0);
  ASSERT_EQ(cni("ADD", "wire-b", pod_b, b).exit_code, 0);
  sh("ip -n " + pod_a + " link set net1 netns " + nested);

  auto d = cni("DEL", "wire-b", pod_b, b);
  EXPECT_EQ(d.code(), 11) << d.out << d.err;
  EXPECT_NE(d.msg().find(port_b), std::string::npos) << d.msg();
  EXPECT_TRUE(link_exists("net1", pod_b)) << "pod B's device left its pod";
  EXPECT_EQ(leases().size(), 2U) << "pod B's address was released with its device in the pod";

  sh("ip -n " + nested + " link set net1 netns " + pod_a);
  auto again = cni("DEL", "wire-b", pod_b, b);
  EXPECT_EQ(again.exit_code, 0) << again.out << again.err;
  EXPECT_TRUE(link_exists(port_b));
  EXPECT_EQ(cni("DEL", "wire-a", pod_a, a).exit_code, 0);
  EXPECT_TRUE(link_exists(port_a));
  EXPECT_TRUE(leases().empty());
}

// A record of rdmanet 0.1 gives a device no identity out of the pod's reach. Renamed and
// readdressed, it is not provably the device: DEL answers 11 naming it rather than 0 with
// the device still in the pod, and finishes once the netns is gone.
TEST_F(Hostile, WithoutAnIdentityDelNeverReportsARenamedDeviceGone) {
  attach_far();
  json doc = read_record();
  for (auto& s : doc["steps"]) {
    s.erase("identity");
  }
  write_record(doc);
  in_pod("link set net1 down");
  in_pod("link set net1 name other0 address 02:00:00:00:08:88");
  expect_del_holds_on(del());
  EXPECT_TRUE(link_exists("other0", pod_));
  sh("ip netns del " + pod_);  // the veth dies with it
  expect_del_finished(cni("DEL", "evil", "", config_));
}

// A record GC cannot read may be the record of any lease: the IPAM plugin's GC, which
// releases every lease the runtime's list does not name, is not run.
TEST_F(Hostile, GcReleasesNoLeaseWhileARecordIsUnreadable) {
  attach(with_gc_capable_ipam());
  std::ofstream(record_file()) << "{torn";
  json gc = config_;
  gc["cniVersion"] = "1.1.0";
  gc["cni.dev/valid-attachments"] = json::array();
  auto out = cni("GC", "", "", gc, "");
  EXPECT_EQ(out.exit_code, 1) << out.out;
  EXPECT_NE(out.msg().find("IPAM GC not run"), std::string::npos) << out.msg();
  EXPECT_EQ(leases().size(), 1U) << "a lease went while its record could not be read";
}

// --- a pod netns alive without its pin ----------------------------------------------------

// The pin is gone (the runtime's DEL comes without a netns, as containerd's does), but a
// process still holds the netns, and with it the device and its address. DEL answers 11
// and releases nothing; once the process is gone, so is the netns, and DEL finishes.
class Unpinned : public Hostile, public ::testing::WithParamInterface<const char*> {
 public:
  // The kind as a test name ("far-veth" -> "farveth").
  static std::string kind_name(const ::testing::TestParamInfo<const char*>& info) {
    std::string name = info.param;
    name.erase(std::remove(name.begin(), name.end(), '-'), name.end());
    return name;
  }

 protected:
  void attach_kind(json extra = json::object()) {
    const std::string kind = GetParam();
    if (kind == "far-veth") {
      attach_far(extra);
    } else if (kind == "macvlan") {
      extra["mode"] = "macvlan";
      attach(extra);
    } else {
      attach(extra);
    }
  }
};

TEST_P(Unpinned, NothingIsReleasedWhileAProcessHoldsThePodNetns) {
  attach_kind();
  unpin_pod_held_by_a_process();
  auto d = cni("DEL", "evil", "", config_);
  expect_del_holds_on(d);
  EXPECT_NE(d.msg().find("outlived its pin"), std::string::npos) << d.msg();
  EXPECT_FALSE(std::filesystem::is_empty(dir_ + "/pods")) << "pod files went first";

  release_pod_netns();
  expect_del_finished(cni("DEL", "evil", "", config_));
}

// GC (the runtime's list says the attachment is gone) cannot undo it either, and passes
// the attachment to the IPAM plugin's GC as valid: the lease stays with the device.
TEST_P(Unpinned, GcKeepsTheLeaseOfWhatItCouldNotUndo) {
  attach_kind(with_gc_capable_ipam());
  unpin_pod_held_by_a_process();
  json gc = config_;
  gc["cniVersion"] = "1.1.0";
  gc["cni.dev/valid-attachments"] = json::array();
  expect_del_holds_on(cni("GC", "", "", gc, ""));

  release_pod_netns();
  expect_del_finished(cni("GC", "", "", gc, ""));
}

INSTANTIATE_TEST_SUITE_P(Devices, Unpinned, ::testing::Values("host-veth", "far-veth", "macvlan"),
                         Unpinned::kind_name);

// A new pod's ADD of the same device would reclaim it from the old pod, whose pin is
// gone: not while a process holds the old netns (a macvlan parent is shared: nothing to
// reclaim). Once the netns is gone, the reclaim releases the old address; these veths
// died with it, so the ADD then finds no device (a physical NIC comes back: the PCI lab
// tier).
class UnpinnedNetdev : public Unpinned {};

TEST_P(UnpinnedNetdev, AddReclaimsNothingWhileAProcessHoldsTheOldPodNetns) {
  attach_kind();
  unpin_pod_held_by_a_process();
  std::string next_pod = make_pod();
  auto add = cni("ADD", "next", next_pod, config_);
  EXPECT_EQ(add.code(), 11) << add.out << add.err;
  EXPECT_NE(add.msg().find("outlived its pin"), std::string::npos) << add.msg();
  EXPECT_EQ(leases().size(), 1U) << "the old pod's address was released";
  EXPECT_FALSE(state_files().empty()) << "the old pod's record was dropped";

  release_pod_netns();
  auto again = cni("ADD", "next", next_pod, config_);
  EXPECT_EQ(again.code(), 100) << again.out << again.err;
  EXPECT_NE(again.msg().find(port_), std::string::npos) << again.msg();
  EXPECT_TRUE(leases().empty()) << "the reclaim kept the old pod's address";
  EXPECT_TRUE(state_files().empty());
}

INSTANTIATE_TEST_SUITE_P(Devices, UnpinnedNetdev, ::testing::Values("host-veth", "far-veth"),
                         Unpinned::kind_name);

}  // namespace
}  // namespace rdmanet::plugin::testing
