#include "plugin/testing/plugin_fixture.h"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/testing/process.h"

namespace rdmanet::plugin::testing {

namespace {

namespace fs = std::filesystem;

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

int Output::code() const {
  json d = doc();
  return d.is_object() && d.contains("code") ? d["code"].get<int>() : 0;
}

std::string Output::msg() const {
  json d = doc();
  return d.is_object() && d.contains("msg") ? d["msg"].get<std::string>() : "";
}

std::string sh(const std::string& cmd, bool must_succeed) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) {
    out.append(buf, n);
  }
  int status = pclose(p);
  if (must_succeed && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
    ADD_FAILURE() << "command failed: " << cmd << "\n" << out;
  }
  return out;
}

bool link_exists(const std::string& name, const std::string& netns) {
  std::string cmd =
      (netns.empty() ? "ip" : "ip -n " + netns) + " link show dev " + name + " >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

void Rdmanet::SetUp() {
  ASSERT_EQ(geteuid(), 0u) << "rdmanet integration tests need root (CAP_NET_ADMIN, "
                              "CAP_SYS_ADMIN): run them as root, they do not skip";
  static std::atomic<int> counter{0};
  tag_ = std::to_string(getpid() % 100000) + "x" + std::to_string(counter++);
  ASSERT_FALSE(tmp_.path().empty()) << "cannot create a temporary directory";
  dir_ = tmp_.path();
  fs::create_directories(dir_ + "/bin");
  fs::create_symlink(RDMANET_BINARY, dir_ + "/bin/rdmanet");
  fs::create_symlink(RDMANET_IPAM_BINARY, dir_ + "/bin/rdmanet-ipam");
  for (const char* p : {"host-local", "tuning"}) {
    fs::create_symlink(std::string("/usr/lib/cni/") + p, dir_ + "/bin/" + p);
  }
  // A plugin that fails like a broken IPAM plugin would.
  std::ofstream(dir_ + "/bin/garbage-ipam") << "#!/bin/sh\necho 'not json'\n";
  fs::permissions(dir_ + "/bin/garbage-ipam", fs::perms::owner_all);
}

void Rdmanet::TearDown() {
  for (const auto& ns : netns_) {
    sh("ip netns del " + ns, false);
  }
  for (const auto& link : links_) {
    sh("ip link del " + link + " >/dev/null 2>&1", false);
  }
}

std::string Rdmanet::make_pod() {
  std::string name = "rdmt-" + tag_ + "-" + std::to_string(netns_.size());
  sh("ip netns add " + name);
  netns_.push_back(name);
  return name;
}

std::pair<std::string, std::string> Rdmanet::make_ports() {
  std::string a = "rt" + tag_ + "p" + std::to_string(links_.size());
  std::string b = a + "b";
  a += "a";
  // Both up, as a node's cabled NICs are: either end has carrier wherever it is brought up
  // while the other is up (ADD waits for carrier, portTimeout), and a macvlan child of
  // either has its parent's.
  sh("ip link add " + a + " type veth peer name " + b + " && ip link set " + a +
     " up && ip link set " + b + " up");
  links_.push_back(a);
  links_.push_back(b);
  return {a, b};
}

json Rdmanet::conf(const json& extra, const std::string& version) {
  json c = {{"cniVersion", version},
            {"name", "rail0"},
            {"type", "rdmanet"},
            {"stateDir", dir_ + "/state"},
            {"podInfoDir", dir_ + "/pods"},
            {"ipam",
             {{"type", "host-local"},
              {"dataDir", dir_ + "/ipam"},
              {"ranges", {{{{"subnet", "10.123.0.0/24"}}}}},
              {"routes", {{{"dst", "10.124.0.0/16"}}}}}}};
  c.update(extra);
  return c;
}

std::string Rdmanet::cni_shell(const std::string& command, const std::string& container,
                               const std::string& pod, const json& config,
                               const std::string& ifname, const std::string& pod_uid) {
  std::string input = dir_ + "/stdin-" + std::to_string(calls_++) + ".json";
  std::ofstream(input) << config.dump();
  std::string netns = pod.empty() ? "" : (pod[0] == '/' ? pod : "/run/netns/" + pod);
  return "CNI_COMMAND=" + command + " CNI_CONTAINERID='" + container + "' CNI_NETNS='" + netns +
         "' CNI_IFNAME='" + ifname + "' CNI_PATH='" + dir_ +
         "/bin' CNI_ARGS='IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=pod-" + container +
         ";K8S_POD_UID=" + (pod_uid.empty() ? "uid-" + container : pod_uid) + "' " + dir_ +
         "/bin/rdmanet < " + input + " 2>" + input + ".err";
}

Output Rdmanet::cni(const std::string& command, const std::string& container,
                    const std::string& pod, const json& config, const std::string& ifname,
                    const std::string& pod_uid) {
  std::string cmd = cni_shell(command, container, pod, config, ifname, pod_uid);
  std::string err_file = cmd.substr(cmd.rfind(" 2>") + 3);
  FILE* p = popen(cmd.c_str(), "r");
  Output o;
  char buf[4096];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) {
    o.out.append(buf, n);
  }
  int status = pclose(p);
  o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  o.err = read_all(err_file);
  return o;
}

Output Rdmanet::run_raw(const std::map<std::string, std::string>& env,
                        const std::string& stdin_text) {
  auto run = rdmanet::testutil::run(dir_ + "/bin/rdmanet", env, stdin_text, dir_);
  Output o;
  o.exit_code = run.status;
  o.out = std::move(run.out);
  return o;
}

std::vector<std::string> Rdmanet::state_files() {
  std::vector<std::string> out;
  if (!fs::exists(dir_ + "/state")) {
    return out;
  }
  for (const auto& e : fs::recursive_directory_iterator(dir_ + "/state")) {
    if (e.is_regular_file() && e.path().extension() != ".lock") {
      out.push_back(e.path().string());
    }
  }
  return out;
}

std::vector<std::string> Rdmanet::leases() {
  std::vector<std::string> out;
  if (!fs::exists(dir_ + "/ipam/rail0")) {
    return out;
  }
  // host-local: a file per address; rdmanet-ipam: the same under leases/.
  for (const auto& dir : {dir_ + "/ipam/rail0", dir_ + "/ipam/rail0/leases"}) {
    if (!fs::is_directory(dir)) {
      continue;
    }
    for (const auto& e : fs::directory_iterator(dir)) {
      std::string name = e.path().filename();
      if (name.rfind("10.", 0) == 0) {
        out.push_back(name);
      }
    }
  }
  return out;
}

std::string Rdmanet::link_field(const std::string& name, const std::string& field,
                                const std::string& netns) {
  json j = json::parse(sh((netns.empty() ? "ip" : "ip -n " + netns) + " -j link show dev " + name));
  return j[0].contains(field) ? j[0][field].dump() : "";
}

void Rdmanet::fake_pci(const std::string& pci, const std::string& netdev,
                       const std::string& driver) {
  std::string dev = dir_ + "/sys/bus/pci/devices/" + pci;
  fs::create_directories(dev);
  fs::create_directories(dir_ + "/sys/bus/pci/drivers/" + driver);
  for (const char* attribute : {"bind", "unbind"}) {
    std::ofstream(dir_ + "/sys/bus/pci/drivers/" + driver + "/" + attribute, std::ios::app);
  }
  fs::create_symlink("../../drivers/" + driver, dev + "/driver");
  if (!netdev.empty()) {
    fs::create_directories(dev + "/net/" + netdev);
  }
}

}  // namespace rdmanet::plugin::testing
