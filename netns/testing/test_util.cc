#include "netns/testing/test_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>

namespace rdmanet::netns::testing {

std::string sh(const std::string& cmd) {
  std::string out;
  FILE* pipe = popen((cmd + " 2>&1").c_str(), "r");
  if (pipe == nullptr) {
    ADD_FAILURE() << "popen " << cmd;
    return out;
  }
  char buf[4096];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) {
    out.append(buf, n);
  }
  int status = pclose(pipe);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << cmd << " failed:\n" << out;
  return out;
}

std::vector<uint8_t> from_hex(const std::string& text) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < text.size(); i += 2) {
    out.push_back(static_cast<uint8_t>(std::stoi(text.substr(i, 2), nullptr, 16)));
  }
  return out;
}

TestNetns::TestNetns() {
  static std::atomic<int> counter{0};
  name_ = "rdmanet-t-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
  sh("ip netns add " + name_);
  ns_ = std::make_unique<Netns>(must(Netns::open(path())));
}

TestNetns::~TestNetns() {
  ns_.reset();
  // Deleting the namespace destroys its links, and so the veth peers elsewhere.
  sh("ip netns del " + name_);
}

Rtnl TestNetns::rtnl() const {
  return must(in_netns(*ns_, [] { return Rtnl::open(); }));
}

std::string TestNetns::ip(const std::string& args) const {
  return sh("ip -n " + name_ + " " + args);
}

namespace {

// A test binary that crashed (or was killed) could not run its destructors; its namespaces
// are recognisable by the dead pid in their name.
void remove_namespaces_of_dead_runs() {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/run/netns", ec)) {
    std::string name = entry.path().filename().string();
    int pid = 0;
    int n = 0;
    if (std::sscanf(name.c_str(), "rdmanet-t-%d-%d", &pid, &n) == 2 && pid > 0 &&
        kill(pid, 0) != 0 && errno == ESRCH) {
      sh("ip netns del " + name);
    }
  }
}

}  // namespace

void KernelTest::SetUp() {
  ASSERT_EQ(geteuid(), 0u) << "netns_test needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN): it "
                              "creates network namespaces and links. Run it as root.";
  static bool swept = false;
  if (!swept) {
    swept = true;
    remove_namespaces_of_dead_runs();
  }
}

TestNetns& KernelTest::make_netns() {
  namespaces_.push_back(std::make_unique<TestNetns>());
  return *namespaces_.back();
}

void KernelTest::make_veth(TestNetns& a, const std::string& name_a, TestNetns& b,
                           const std::string& name_b) {
  a.ip("link add " + name_a + " type veth peer name " + name_b + " netns " + b.name());
}

void FakeSysfs::pci(const std::string& addr, const std::string& driver,
                    const std::vector<std::string>& netdevs) {
  namespace fs = std::filesystem;
  std::string dev = root_ + "/devices/pci0000:3a/" + addr;
  fs::create_directories(dev);
  for (const auto& name : netdevs) {
    fs::create_directories(fs::path(dev) / "net" / name);
  }
  if (!driver.empty()) {
    fs::create_directories(root_ + "/bus/pci/drivers/" + driver);
    for (const char* attribute : {"bind", "unbind"}) {
      std::ofstream(root_ + "/bus/pci/drivers/" + driver + "/" + attribute, std::ios::app);
    }
    fs::create_directory_symlink("../../../bus/pci/drivers/" + driver, dev + "/driver");
  }
  fs::create_directories(root_ + "/bus/pci/devices");
  fs::create_directory_symlink("../../../devices/pci0000:3a/" + addr,
                               root_ + "/bus/pci/devices/" + addr);
}

void FakeSysfs::vf(const std::string& pf, int index, const std::string& vf_addr) {
  namespace fs = std::filesystem;
  std::string dir = root_ + "/devices/pci0000:3a/";
  fs::create_directory_symlink("../" + vf_addr, dir + pf + "/virtfn" + std::to_string(index));
  fs::create_directory_symlink("../" + pf, dir + vf_addr + "/physfn");
}

void FakeSysfs::aux(const std::string& parent, const std::string& id,
                    const std::vector<std::string>& netdevs) {
  namespace fs = std::filesystem;
  std::string rel = "devices/pci0000:3a/" + parent + "/" + id;
  fs::create_directories(root_ + "/" + rel);
  for (const auto& name : netdevs) {
    fs::create_directories(fs::path(root_) / rel / "net" / name);
  }
  fs::create_directories(root_ + "/bus/auxiliary/devices");
  fs::create_directory_symlink("../../../" + rel, root_ + "/bus/auxiliary/devices/" + id);
}

namespace {

namespace fs = std::filesystem;

std::string hex2(int v) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%02x", v);
  return buf;
}

}  // namespace

EightGpuNode::EightGpuNode(std::string root) : root_(std::move(root)) {
  for (int k = 0; k < 8; ++k) {
    const int socket = k / 4;
    const std::string domain = socket == 0 ? "00" : "80";
    const int base = (socket == 0 ? 0x10 : 0x90) + (k % 4) * 0x10;
    const std::string rc = "pci0000:" + domain;
    const std::string rp = "0000:" + domain + ":0" + std::to_string(k % 4 + 1) + ".0";
    const std::string up = "0000:" + hex2(base) + ":00.0";
    const std::string down_gpu = "0000:" + hex2(base + 1) + ":00.0";
    const std::string down_nic = "0000:" + hex2(base + 1) + ":01.0";
    gpu_[k] = "0000:" + hex2(base + 2) + ":00.0";
    nic_[k] = "0000:" + hex2(base + 3) + ":00.0";
    const std::string sw = rc + "/" + rp + "/" + up;
    function(sw + "/" + down_gpu + "/" + gpu_[k], "0x10de", "0x030200", socket);
    function(sw + "/" + down_nic + "/" + nic_[k], "0x15b3", "0x020000", socket);
    for (const std::string& bridge :
         {rc + "/" + rp, sw, sw + "/" + down_gpu, sw + "/" + down_nic}) {
      function(bridge, "0x1000", "0x060400", socket);
    }
    const std::string nic_dir = root_ + "/devices/" + sw + "/" + down_nic + "/" + nic_[k];
    fs::create_directories(nic_dir + "/net/ens" + std::to_string(k) + "np0");
    const std::string ib = root_ + "/class/infiniband/mlx5_" + std::to_string(k);
    fs::create_directories(ib + "/ports/1");
    std::ofstream(ib + "/ports/1/link_layer") << (k == 7 ? "InfiniBand\n" : "Ethernet\n");
    fs::create_directory_symlink(fs::relative(nic_dir, ib), ib + "/device");
  }
  // A soft-RoCE device: no PCI function, not a NIC of this list.
  fs::create_directories(root_ + "/class/infiniband/rxe0/ports/1");
}

void EightGpuNode::function(const std::string& path, const std::string& vendor,
                            const std::string& cls, int numa) {
  const std::string dir = root_ + "/devices/" + path;
  fs::create_directories(dir);
  std::ofstream(dir + "/vendor") << vendor << "\n";
  std::ofstream(dir + "/class") << cls << "\n";
  std::ofstream(dir + "/numa_node") << numa << "\n";
  const std::string addr = fs::path(path).filename().string();
  fs::create_directories(root_ + "/bus/pci/devices");
  if (!fs::exists(root_ + "/bus/pci/devices/" + addr)) {
    fs::create_directory_symlink("../../../devices/" + path, root_ + "/bus/pci/devices/" + addr);
  }
}

std::string vpd_image(const std::string& product,
                      const std::vector<std::pair<std::string, std::string>>& keywords) {
  auto large = [](uint8_t tag, const std::string& data) {
    std::string out(1, static_cast<char>(tag));
    out += static_cast<char>(data.size() & 0xff);
    out += static_cast<char>(data.size() >> 8);
    return out + data;
  };
  std::string ro;
  for (const auto& [key, value] : keywords) {
    ro += key + static_cast<char>(value.size()) + value;
  }
  ro += "RV" + std::string(1, '\x01') + std::string(1, '\0');  // checksum byte, unchecked
  return large(0x82, product) + large(0x90, ro) + std::string(1, '\x78');
}

namespace {

// A PCI function (or bridge) at `path` below <root>/devices, with its bus/pci/devices link.
void pci_function(const std::string& root, const std::string& path, const std::string& vendor,
                  const std::string& device, const std::string& cls) {
  const std::string dir = root + "/devices/" + path;
  fs::create_directories(dir);
  std::ofstream(dir + "/vendor") << vendor << "\n";
  std::ofstream(dir + "/device") << device << "\n";
  std::ofstream(dir + "/class") << cls << "\n";
  std::ofstream(dir + "/numa_node") << "0\n";
  fs::create_directories(root + "/bus/pci/devices");
  fs::create_directory_symlink("../../../devices/" + path,
                               root + "/bus/pci/devices/" + fs::path(path).filename().string());
}

}  // namespace

DataDirectNode::DataDirectNode(std::string root) : root_(std::move(root)) {
  const std::string rc = "pci0000:00";
  const std::string drv = root_ + "/bus/pci/drivers/mlx5_ib";
  fs::create_directories(drv);
  for (const char* file : {"bind", "unbind", "new_id", "remove_id", "uevent"}) {
    std::ofstream(drv + "/" + file);
  }
  for (int k = 0; k < 2; ++k) {
    const std::string serial = "MT2450X0000" + std::to_string(k);
    // NIC k: its physical function right below its own root port.
    nic_rp_[k] = "0000:00:0" + std::to_string(1 + k) + ".0";
    nic_[k] = "0000:0" + std::to_string(1 + k) + ":00.0";
    pci_function(root_, rc + "/" + nic_rp_[k], "0x8086", "0x1bbe", "0x060400");
    const std::string nic_path = rc + "/" + nic_rp_[k] + "/" + nic_[k];
    pci_function(root_, nic_path, "0x15b3", "0x1023", "0x020700");
    std::ofstream(root_ + "/devices/" + nic_path + "/vpd", std::ios::binary)
        << vpd_image("NVIDIA ConnectX-8 SuperNIC", {{"PN", "900-9X81Q-00CN-ST0"}, {"SN", serial}});
    fs::create_directories(root_ + "/devices/" + nic_path + "/net/ens" + std::to_string(k) + "np0");
    const std::string ib = root_ + "/class/infiniband/mlx5_" + std::to_string(k);
    fs::create_directories(ib + "/ports/1");
    std::ofstream(ib + "/ports/1/link_layer") << "InfiniBand\n";
    fs::create_directory_symlink(fs::relative(root_ + "/devices/" + nic_path, ib), ib + "/device");
  }
  for (int s = 0; s < 2; ++s) {
    // Switch s below root port 00:03.0 / 00:04.0: GPU s and card (1 - s)'s Data Direct
    // function. So card k's GPU-side tree is switch 1 - k, and GPU k sits there too.
    const int k = 1 - s;
    const int bus = 0x10 * (s + 1);
    gpu_rp_[k] = "0000:00:0" + std::to_string(3 + s) + ".0";
    const std::string up = "0000:" + hex2(bus) + ":00.0";
    const std::string down_gpu = "0000:" + hex2(bus + 1) + ":00.0";
    const std::string down_dd = "0000:" + hex2(bus + 1) + ":01.0";
    gpu_[k] = "0000:" + hex2(bus + 2) + ":00.0";
    dd_[k] = "0000:" + hex2(bus + 3) + ":00.0";
    const std::string sw = rc + "/" + gpu_rp_[k] + "/" + up;
    for (const std::string& bridge :
         {rc + "/" + gpu_rp_[k], sw, sw + "/" + down_gpu, sw + "/" + down_dd}) {
      pci_function(root_, bridge, "0x15b3", "0x197b", "0x060400");
    }
    pci_function(root_, sw + "/" + down_gpu + "/" + gpu_[k], "0x10de", "0x2901", "0x030200");
    const std::string dd_path = sw + "/" + down_dd + "/" + dd_[k];
    pci_function(root_, dd_path, "0x15b3", "0x2100", "0x020000");
    std::ofstream(root_ + "/devices/" + dd_path + "/vpd", std::ios::binary)
        << vpd_image("NVIDIA ConnectX-8 Data Direct",
                     {{"SN", "MT2450X0000" + std::to_string(k)}, {"VU", "VUID-" + dd_[k]}});
    fs::create_directory_symlink("../../../../devices/" + dd_path, drv + "/" + dd_[k]);
  }
}

void DataDirectNode::unbind(int k) const {
  fs::remove(root_ + "/bus/pci/drivers/mlx5_ib/" + dd_[k]);
}

}  // namespace rdmanet::netns::testing
