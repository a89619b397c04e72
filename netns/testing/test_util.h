// Test helpers: throwaway network namespaces with real links, removed even when a test fails.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "netns/link.h"
#include "netns/netns.h"
#include "netns/rtnl.h"

namespace rdmanet::netns::testing {

// Runs a shell command (for setting up and observing only) and returns its stdout; fails
// the test when it exits non-zero.
std::string sh(const std::string& cmd);

// Bytes from hex text ("1c001600..."), for comparing requests with captured ones.
std::vector<uint8_t> from_hex(const std::string& text);

// A named network namespace ("ip netns add"), deleted with everything in it on destruction.
class TestNetns {
 public:
  TestNetns();
  ~TestNetns();
  TestNetns(const TestNetns&) = delete;
  TestNetns& operator=(const TestNetns&) = delete;

  const std::string& name() const { return name_; }
  std::string path() const { return "/run/netns/" + name_; }
  const Netns& ns() const { return *ns_; }
  // An rtnetlink socket talking to this namespace.
  Rtnl rtnl() const;
  // `ip -n <name> <args>`.
  std::string ip(const std::string& args) const;

 private:
  std::string name_;
  std::unique_ptr<Netns> ns_;
};

// Fixture for tests against the real kernel: fails (never skips) without root.
class KernelTest : public ::testing::Test {
 protected:
  void SetUp() override;
  TestNetns& make_netns();
  // A veth pair with one end in each namespace (they may be the same).
  void make_veth(TestNetns& a, const std::string& name_a, TestNetns& b, const std::string& name_b);

 private:
  std::vector<std::unique_ptr<TestNetns>> namespaces_;
};

// A fake /sys under `root`, laid out like the real one: devices under <root>/devices, the
// symlinks to them from <root>/bus/*/devices, driver and physfn/virtfn symlinks between
// them. A test double: the build machines have no PCI NICs, VFs or auxiliary devices.
class FakeSysfs {
 public:
  explicit FakeSysfs(std::string root) : root_(std::move(root)) {}
  const std::string& root() const { return root_; }

  // PCI function `addr` bound to `driver` (none when empty) with these netdevs.
  void pci(const std::string& addr, const std::string& driver,
           const std::vector<std::string>& netdevs);
  // Makes `vf_addr` VF number `index` of PF `pf` (both made with pci()).
  void vf(const std::string& pf, int index, const std::string& vf_addr);
  // Auxiliary device `id` (a scalable function) of PCI function `parent`, with these netdevs.
  void aux(const std::string& parent, const std::string& id,
           const std::vector<std::string>& netdevs);

 private:
  std::string root_;
};

// Unwraps an Expected in a test, failing with its message.
#define ASSERT_OK(expr)                                                   \
  do {                                                                    \
    auto&& assert_ok_result = (expr);                                     \
    ASSERT_TRUE(assert_ok_result.ok()) << assert_ok_result.error().msg(); \
  } while (0)

template <class T>
T must(Expected<T> value) {
  if (!value.ok()) {
    ADD_FAILURE() << value.error().msg();
    throw std::runtime_error(value.error().msg());
  }
  return std::move(value).value();
}

// A test double: the sysfs of a 2-socket node with 8 GPUs and 8 RDMA NICs, GPU k and NIC k
// below PCIe switch k (four switches per socket, each on a root port of the socket's root
// complex), NIC k's RDMA device mlx5_k with netdev ens<k>np0 (mlx5_7 InfiniBand, the others
// Ethernet), plus a soft-RoCE device without a PCI function. The build machines have no
// such hardware; the layout is that of /sys/devices on HGX-class servers.
class EightGpuNode {
 public:
  explicit EightGpuNode(std::string root);
  std::string gpu(int k) const { return gpu_[k]; }
  std::string nic(int k) const { return nic_[k]; }

 private:
  void function(const std::string& path, const std::string& vendor, const std::string& cls,
                int numa);

  std::string root_;
  std::string gpu_[8];
  std::string nic_[8];
};

// A test double: two ConnectX-8 rails laid out as NVIDIA documents for Blackwell with CX8
// ("GPUDirect RDMA with Data Direct": the Data Direct function sits under a different PCIe
// tree than the NIC's physical function). On root complex pci0000:00, NIC k's function
// (mlx5_k, netdev ens<k>np0) hangs from its own root port, while GPU k and a Data Direct
// function (15b3:2100, bound to mlx5_ib) share a PCIe switch on another root port. Each
// function has VPD with the card's serial number; the cards are crossed (card k's Data
// Direct function is below GPU k's switch, whose bus numbers follow the other NIC's), so a
// pairing by address order would be wrong.
class DataDirectNode {
 public:
  explicit DataDirectNode(std::string root);
  std::string nic(int k) const { return nic_[k]; }
  std::string nic_root_port(int k) const { return nic_rp_[k]; }
  std::string gpu(int k) const { return gpu_[k]; }
  std::string data_direct(int k) const { return dd_[k]; }
  std::string gpu_root_port(int k) const { return gpu_rp_[k]; }
  // Takes the Data Direct function of card k off mlx5_ib (as `unbind` would).
  void unbind(int k) const;

 private:
  std::string root_;
  std::string nic_[2], nic_rp_[2], gpu_[2], dd_[2], gpu_rp_[2];
};

// PCI Vital Product Data holding a product name and the read-only keywords given.
std::string vpd_image(const std::string& product,
                      const std::vector<std::pair<std::string, std::string>>& keywords);

}  // namespace rdmanet::netns::testing
