// End to end: the pod's files (podInfoDir/<uid>) are the pod's to tamper with. Nothing a
// pod plants there reaches the host, nothing it leaves there makes DEL fail (the device and
// the address come home all the same), and a bad UID or an untrusted podInfoDir is refused
// before ADD records or changes anything.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "netns/testing/test_util.h"
#include "plugin/testing/plugin_fixture.h"

namespace rdmanet::plugin::testing {
namespace {

namespace fs = std::filesystem;

class PodFiles : public Rdmanet {
 protected:
  void SetUp() override {
    Rdmanet::SetUp();
    std::tie(port_, peer_) = make_ports();
    pod_ = make_pod();
    config_ = conf({{"device", port_}});
  }
  Output add(const std::string& container = "evil") { return cni("ADD", container, pod_, config_); }
  Output del(const std::string& container = "evil") { return cni("DEL", container, pod_, config_); }
  std::string pod_dir(const std::string& container = "evil") const {
    return dir_ + "/pods/uid-" + container;
  }
  // A host directory a planted link points at, with a file that must survive.
  std::string host_dir() {
    std::string d = dir_ + "/host";
    fs::create_directories(d);
    std::ofstream(d + "/keep.json") << R"({"interface": "leak", "secret": "s3cr3t"})";
    return d;
  }
  // DEL answered 0 and brought everything home: device, lease, record.
  void expect_clean_del(const Output& del) {
    EXPECT_EQ(del.exit_code, 0) << del.out << del.err;
    EXPECT_TRUE(link_exists(port_)) << "the device is home";
    EXPECT_TRUE(leases().empty());
    EXPECT_TRUE(state_files().empty());
  }
  std::string port_, peer_, pod_;
  json config_;
};

TEST_F(PodFiles, ALinkPlantedAtRailsNeitherEmptiesAHostDirNorFailsDel) {
  ASSERT_EQ(add().exit_code, 0);
  const std::string host = host_dir();
  fs::rename(pod_dir() + "/rails", dir_ + "/moved-rails");
  fs::create_directory_symlink(host, pod_dir() + "/rails");
  auto out = del();
  expect_clean_del(out);
  EXPECT_TRUE(fs::exists(host + "/keep.json")) << "DEL removed a file through the link";
  EXPECT_NE(out.err.find("pod files: skipped " + pod_dir() + "/rails is not a directory"),
            std::string::npos)
      << "the problem is reported: " << out.err;
  EXPECT_EQ(del().exit_code, 0) << "and DEL stays idempotent";
}

TEST_F(PodFiles, ALinkPlantedAtTheUidBeforeTheFirstRailIsNotWrittenThrough) {
  const std::string host = host_dir();
  fs::create_directories(dir_ + "/pods");
  fs::create_directory_symlink(host, pod_dir());
  auto out = add();
  ASSERT_EQ(out.exit_code, 0) << out.out << out.err;
  EXPECT_FALSE(fs::is_symlink(pod_dir()));
  EXPECT_TRUE(fs::exists(pod_dir() + "/rdma.env"));
  for (const char* f : {"rails", "rails.json", "rdma.env"}) {
    EXPECT_FALSE(fs::exists(host + "/" + f)) << f << " written through the planted link";
  }
  expect_clean_del(del());
}

TEST_F(PodFiles, RootOnlyFilesReachedThroughLinksAreNotCopiedIntoRailsJson) {
  ASSERT_EQ(add().exit_code, 0);
  std::ofstream(dir_ + "/secret.json") << R"({"interface": "net9", "key": "s3cr3t"})";
  fs::permissions(dir_ + "/secret.json", fs::perms::owner_read | fs::perms::owner_write);
  fs::create_symlink(dir_ + "/secret.json", pod_dir() + "/rails/leak.json");
  fs::create_hard_link(dir_ + "/secret.json", pod_dir() + "/rails/hard.json");
  auto [port2, peer2] = make_ports();
  ASSERT_EQ(cni("ADD", "evil", pod_, conf({{"device", port2}}), "net2", "uid-evil").exit_code, 0);
  std::ifstream in(pod_dir() + "/rails.json");
  std::string doc(std::istreambuf_iterator<char>(in), {});
  EXPECT_EQ(doc.find("s3cr3t"), std::string::npos) << doc;
  EXPECT_NE(doc.find("net2"), std::string::npos) << doc;
  EXPECT_EQ(cni("DEL", "evil", pod_, conf({{"device", port2}}), "net2").exit_code, 0);
  expect_clean_del(del());
}

TEST_F(PodFiles, WhateverThePodLeavesNeverMakesDelFail) {
  const std::vector<std::string> plants = {"file", "dir", "fifo", "big", "rails-file", "uid-file"};
  for (const std::string& plant : plants) {
    SCOPED_TRACE(plant);
    ASSERT_EQ(add().exit_code, 0);
    const std::string rails = pod_dir() + "/rails";
    if (plant == "file") {
      std::ofstream(rails + "/stray") << "x";
    } else if (plant == "dir") {
      fs::create_directory(rails + "/stray.json");
    } else if (plant == "fifo") {
      ASSERT_EQ(::mkfifo((rails + "/stray.json").c_str(), 0644), 0);
    } else if (plant == "big") {
      std::ofstream(rails + "/stray.json") << std::string(17 << 20, ' ');
    } else if (plant == "rails-file") {
      fs::remove_all(rails);
      std::ofstream(rails) << "rails is a file now";
    } else {
      fs::remove_all(pod_dir());
      std::ofstream(pod_dir()) << "the pod's directory is a file now";
    }
    expect_clean_del(del());
    fs::remove_all(pod_dir());
  }
}

// A flock on <podInfoDir>/.lock (where the lock used to be, and where any pod sharing the
// hostPath can reach) held by someone else stops no ADD.
TEST_F(PodFiles, ALockThePodHoldsStopsNothing) {
  fs::create_directories(dir_ + "/pods");
  int fd = ::open((dir_ + "/pods/.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  auto out = add();
  ::close(fd);
  EXPECT_EQ(out.exit_code, 0) << out.out << out.err;
  expect_clean_del(del());
}

// Checked before anything is recorded or changed: ADD fails with the culprit named, the
// device stays in the host, and DEL has nothing to fail on.
TEST_F(PodFiles, ABadUidIsRefusedBeforeAnythingIsRecorded) {
  auto out = cni("ADD", "evil", pod_, config_, "net1", "../../etc");
  EXPECT_EQ(out.code(), 4) << out.out;
  EXPECT_NE(out.msg().find("K8S_POD_UID"), std::string::npos) << out.msg();
  EXPECT_EQ(out.msg().find("rollback"), std::string::npos) << out.msg();
  EXPECT_TRUE(link_exists(port_));
  EXPECT_TRUE(state_files().empty());
  expect_clean_del(cni("DEL", "evil", pod_, config_, "net1", "../../etc"));
}

TEST_F(PodFiles, AnUntrustedPodInfoDirIsRefusedBeforeAnythingIsRecorded) {
  fs::create_directories(dir_ + "/pods");
  fs::permissions(dir_ + "/pods", fs::perms::all);
  auto out = add();
  EXPECT_EQ(out.code(), 5) << out.out;
  EXPECT_NE(out.msg().find("podInfoDir"), std::string::npos) << out.msg();
  EXPECT_NE(out.msg().find(dir_ + "/pods"), std::string::npos) << out.msg();
  EXPECT_TRUE(link_exists(port_));
  EXPECT_TRUE(state_files().empty());
  expect_clean_del(del());
}

// Kubelet's attempt 0 of a pod died (its DEL comes late), attempt 1 has the pod's rail on
// another device: the late DEL of attempt 0 leaves attempt 1's entry in the files.
TEST_F(PodFiles, ALateDelOfAnEarlierSandboxLeavesTheLiveOnesRails) {
  ASSERT_EQ(cni("ADD", "attempt0", pod_, config_, "net1", "uid-shared").exit_code, 0);
  auto [port2, peer2] = make_ports();
  std::string pod2 = make_pod();
  json config2 = conf({{"device", port2}});
  ASSERT_EQ(cni("ADD", "attempt1", pod2, config2, "net1", "uid-shared").exit_code, 0);
  ASSERT_EQ(cni("DEL", "attempt0", pod_, config_, "net1", "uid-shared").exit_code, 0);
  std::ifstream in(dir_ + "/pods/uid-shared/rails.json");
  json doc = json::parse(in, nullptr, false);
  ASSERT_TRUE(doc.is_object()) << "the live sandbox's files are gone";
  ASSERT_EQ(doc["rails"].size(), 1u) << doc.dump();
  EXPECT_EQ(doc["rails"][0]["sandbox"], "attempt1");
  EXPECT_EQ(cni("DEL", "attempt1", pod2, config2, "net1", "uid-shared").exit_code, 0);
  EXPECT_FALSE(fs::exists(dir_ + "/pods/uid-shared"));
}

// A rail on a ConnectX-8 whose Data Direct function shares GPU 0's switch: its entry names
// that function and its root port (not the NIC function's), and the node's GPUDirect RDMA
// path; a device without a PCI function gets none of the PCI facts.
TEST_F(Rdmanet, ARailEntryNamesThePcieRootToAlignTheGpuWith) {
  auto [a, b] = make_ports();
  netns::testing::DataDirectNode node(dir_ + "/sys");
  const fs::path nic = fs::canonical(dir_ + "/sys/bus/pci/devices/" + node.nic(0));
  fs::remove_all(nic / "net");
  fs::create_directories(nic / "net" / a);
  fs::create_directories(dir_ + "/sys/bus/pci/drivers/mlx5_core");
  fs::create_symlink(fs::relative(dir_ + "/sys/bus/pci/drivers/mlx5_core", nic), nic / "driver");
  fs::create_directories(dir_ + "/sys/module/nvidia_peermem");
  json c = conf({{"sysfsRoot", dir_ + "/sys"}, {"runtimeConfig", {{"deviceID", node.nic(0)}}}});
  std::string pod = make_pod();
  auto add = cni("ADD", "gpu", pod, c);
  ASSERT_EQ(add.exit_code, 0) << add.out << add.err;
  std::ifstream in(dir_ + "/pods/uid-gpu/rails.json");
  json doc = json::parse(in, nullptr, false);
  ASSERT_TRUE(doc.is_object() && doc["rails"].size() == 1u) << doc.dump();
  const json& rail = doc["rails"][0];
  EXPECT_EQ(rail["pciAddress"], node.nic(0)) << rail.dump();
  EXPECT_EQ(rail["pcieRoot"], node.gpu_root_port(0)) << rail.dump();
  EXPECT_NE(rail["pcieRoot"], node.nic_root_port(0)) << "the Data Direct function's root";
  EXPECT_EQ(rail["dataDirectPci"], node.data_direct(0)) << rail.dump();
  EXPECT_EQ(rail["gpuDirectRdma"], "nvidia-peermem") << rail.dump();
  ASSERT_EQ(cni("DEL", "gpu", pod, c).exit_code, 0);

  auto plain = cni("ADD", "plain", pod, conf({{"device", b}}));
  ASSERT_EQ(plain.exit_code, 0) << plain.out << plain.err;
  std::ifstream in2(dir_ + "/pods/uid-plain/rails.json");
  json doc2 = json::parse(in2, nullptr, false);
  ASSERT_TRUE(doc2.is_object() && doc2["rails"].size() == 1u) << doc2.dump();
  for (const char* key : {"pciAddress", "pcieRoot", "dataDirectPci", "gpuDirectRdma"}) {
    EXPECT_FALSE(doc2["rails"][0].contains(key)) << key << ": " << doc2.dump();
  }
  ASSERT_EQ(cni("DEL", "plain", pod, conf({{"device", b}})).exit_code, 0);
}

}  // namespace
}  // namespace rdmanet::plugin::testing
