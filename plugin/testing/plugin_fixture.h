// The fixture of rdmanet's end-to-end tests (plugin/plugin_*_test.cc): the real binary,
// driven through the CNI protocol, against the real kernel in throwaway network namespaces
// with real veth and macvlan links; Debian's reference host-local (and tuning) as peers. A
// fake sysfs tree maps PCI and auxiliary device ids to the veth links, because this machine
// has no PCI NICs to spare.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "base/testing/temp_dir.h"

namespace rdmanet::plugin::testing {

using nlohmann::json;

// What one run of the binary printed and how it exited.
struct Output {
  int exit_code = -1;
  std::string out;
  std::string err;
  json doc() const { return json::parse(out, nullptr, false); }
  // The CNI error code of an error reply, 0 otherwise.
  int code() const;
  // The msg of an error reply, empty otherwise.
  std::string msg() const;
};

// Runs a shell command to set up or observe; returns stdout (and stderr).
std::string sh(const std::string& cmd, bool must_succeed = true);

bool link_exists(const std::string& name, const std::string& netns = "");

// Each test gets a directory with a CNI_PATH (rdmanet, rdmanet-ipam, host-local, tuning
// and a broken garbage-ipam), a state dir and an IPAM data dir, and removes the namespaces
// and links it made, also when it fails. Names carry a per-test tag, so tests may run in parallel.
class Rdmanet : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // A pod network namespace; returns its name (path /run/netns/<name>).
  std::string make_pod();

  // A veth pair in the host standing in for two cabled NIC ports, both up; returns the names.
  std::pair<std::string, std::string> make_ports();

  // A network config for network rail0 with host-local IPAM, extended by `extra`.
  json conf(const json& extra, const std::string& version = "1.0.0");

  // Runs the binary as a runtime would: command, container id, pod netns (a name under
  // /run/netns or a path; empty for none), config and ifname; K8S_POD_UID is `pod_uid`, or
  // uid-<container> when that is empty.
  Output cni(const std::string& command, const std::string& container, const std::string& pod,
             const json& config, const std::string& ifname = "net1",
             const std::string& pod_uid = "");

  // The shell command cni() runs (stdin from a file it writes, stderr to a file beside it).
  std::string cni_shell(const std::string& command, const std::string& container,
                        const std::string& pod, const json& config,
                        const std::string& ifname = "net1", const std::string& pod_uid = "");

  // Runs the binary with exactly this environment and stdin.
  Output run_raw(const std::map<std::string, std::string>& env, const std::string& stdin_text);

  // Files left in the state dir, other than lock files.
  std::vector<std::string> state_files();

  // The addresses host-local or rdmanet-ipam holds for network rail0.
  std::vector<std::string> leases();

  // A field of `ip -j link show` for the link, as JSON text; empty when absent.
  std::string link_field(const std::string& name, const std::string& field,
                         const std::string& netns = "");

  // A PCI function in the fake sysfs tree under dir_/sys, bound to driver, with netdev as
  // its netdev (none when empty).
  void fake_pci(const std::string& pci, const std::string& netdev, const std::string& driver);

  std::string tag_;
  rdmanet::testutil::TempDir tmp_{"rdmanet-plugin-test"};
  std::string dir_;
  std::vector<std::string> netns_;
  std::vector<std::string> links_;
  int calls_ = 0;
};

}  // namespace rdmanet::plugin::testing
