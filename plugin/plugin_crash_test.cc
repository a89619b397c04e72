// End to end: what a machine crash leaves in the state directory. Records and holds are
// written and renamed into place but not synced (plugin/store.h): a crash of the machine can
// keep a file's name without its content, or keep a record and lose its device's hold.
// The reboot itself cannot run here; what it does is done by hand (the pod netns deleted,
// a device returned to the host), and a process "started after the reboot" runs in a time
// namespace whose CLOCK_BOOTTIME says the machine booted a second ago.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "plugin/testing/plugin_fixture.h"

namespace rdmanet::plugin::testing {
namespace {

namespace fs = std::filesystem;

class MachineCrash : public Rdmanet {
 protected:
  // cni(), run by a process of a boot that began one second ago.
  Output cni_after_a_reboot(const std::string& command, const std::string& container,
                            const std::string& pod, const json& config) {
    timespec up{};
    ::clock_gettime(CLOCK_BOOTTIME, &up);
    std::string out_file = dir_ + "/reboot-" + std::to_string(calls_) + ".out";
    std::string cmd = "unshare --time --fork --boottime " + std::to_string(-(up.tv_sec - 1)) +
                      " env " + cni_shell(command, container, pod, config) + " >" + out_file;
    std::string err_file = cmd.substr(cmd.rfind(" 2>") + 3);
    err_file = err_file.substr(0, err_file.find(' '));
    int status = std::system(cmd.c_str());
    Output o;
    o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::ifstream out(out_file);
    o.out.assign(std::istreambuf_iterator<char>(out), {});
    std::ifstream err(err_file);
    o.err.assign(std::istreambuf_iterator<char>(err), {});
    return o;
  }

  std::string file_in(const std::string& sub) {
    for (const auto& f : state_files()) {
      if (f.find(sub) != std::string::npos) {
        return f;
      }
    }
    return "";
  }
};

// The crash kept the record's name but not its content. Read in the boot that wrote it, an
// empty record is damage (107, naming it); read after a reboot, it is a write the crash cut
// short, of an attachment whose netns went with that boot: DEL removes it and releases the
// address through the call's IPAM config.
TEST_F(MachineCrash, ARecordCutShortBeforeTheBootIsTakenAsAbsent) {
  auto [port, peer] = make_ports();
  std::string pod = make_pod();
  json c = conf({{"device", port}});
  ASSERT_EQ(cni("ADD", "torn", pod, c).exit_code, 0);
  ASSERT_EQ(leases().size(), 1U);
  std::string record = file_in("/rail0/");
  ASSERT_FALSE(record.empty());

  sh("ip netns del " + pod);  // the reboot took the pod netns (and the veth with it)
  std::ofstream(record, std::ios::trunc).close();
  // File and boot times are whole seconds (up to a second off each): the file is four
  // seconds old when the simulated boot, one second ago, happens.
  ::sleep(4);

  auto same_boot = cni("DEL", "torn", pod, c);
  EXPECT_EQ(same_boot.code(), 107) << same_boot.out;
  EXPECT_NE(same_boot.msg().find(record), std::string::npos) << same_boot.msg();
  EXPECT_TRUE(fs::exists(record));

  auto after = cni_after_a_reboot("DEL", "torn", pod, c);
  EXPECT_EQ(after.exit_code, 0) << after.out << after.err;
  EXPECT_NE(after.err.find("cut short by a machine crash"), std::string::npos) << after.err;
  EXPECT_FALSE(fs::exists(record));
  EXPECT_TRUE(leases().empty()) << "released through the IPAM config of the call";
}

// The crash kept the old pod's record but lost its device's hold, and after the reboot a
// new pod took the device. The old sandbox's DEL must leave the device to its new holder,
// and still release the old address.
TEST_F(MachineCrash, ARecordThatLostItsHoldLeavesTheDeviceToItsNewHolder) {
  auto [port, peer] = make_ports();
  std::string old_pod = make_pod();
  std::string new_pod = make_pod();
  json c = conf({{"device", port}});
  ASSERT_EQ(cni("ADD", "before", old_pod, c).exit_code, 0);
  std::string hold = file_in("/holds/");
  ASSERT_FALSE(hold.empty());

  // What the reboot does: a physical NIC comes home by itself when its netns goes (a veth
  // would die with it, so it is moved home here); the hold never reached the disk.
  sh("ip -n " + old_pod + " link set net1 netns 1 name " + port);
  sh("ip netns del " + old_pod);
  fs::remove(hold);

  auto add = cni("ADD", "after", new_pod, c);
  ASSERT_EQ(add.exit_code, 0) << add.out << add.err;
  ASSERT_EQ(leases().size(), 2U);

  auto del = cni("DEL", "before", old_pod, c);
  EXPECT_EQ(del.exit_code, 0) << del.out << del.err;
  EXPECT_NE(del.err.find("held by another attachment"), std::string::npos) << del.err;
  EXPECT_TRUE(link_exists("net1", new_pod)) << "the new pod keeps its device";
  EXPECT_FALSE(link_exists(port));
  EXPECT_EQ(leases().size(), 1U) << "the old address is released";

  auto del_new = cni("DEL", "after", new_pod, c);
  EXPECT_EQ(del_new.exit_code, 0) << del_new.out << del_new.err;
  EXPECT_TRUE(link_exists(port));
  EXPECT_TRUE(leases().empty());
  EXPECT_TRUE(state_files().empty());
}

}  // namespace
}  // namespace rdmanet::plugin::testing
