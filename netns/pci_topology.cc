#include "netns/pci_topology.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "netns/data_direct.h"
#include "netns/sysfs.h"

namespace rdmanet::netns {
namespace fs = std::filesystem;
namespace {

// The numa_node attribute of the PCI function whose sysfs directory is `dev`.
std::optional<int> numa_node_of(const fs::path& dev) {
  std::string text = read_attribute(dev / "numa_node");
  try {
    return text.empty() ? std::nullopt : std::optional<int>(std::stoi(text));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// The place of the PCI function whose sysfs directory is `dev` (any path that resolves to
// <root>/devices/pci<domain>:<bus>/<bridge>/.../<function>).
Expected<PciPlace> place_of(const fs::path& devices, const fs::path& dev) {
  std::error_code ec;
  fs::path real = fs::canonical(dev, ec);
  if (ec) {
    return Error(ErrorKind::kIo, "resolve " + dev.string() + ": " + ec.message());
  }
  fs::path rel = real.lexically_relative(devices);
  std::vector<std::string> parts;
  for (const auto& part : rel) {
    parts.push_back(part.string());
  }
  if (parts.size() < 2 || parts.front().rfind("pci", 0) != 0 || parts.front() == "..") {
    return Error(ErrorKind::kKernel,
                 dev.string() + " is not under a PCI root complex (" + real.string() + ")");
  }
  PciPlace place;
  place.root_complex = parts.front();
  place.address = parts.back();
  for (size_t i = 1; i + 1 < parts.size(); ++i) {
    if (is_pci_address(parts[i])) {
      place.bridges.push_back(parts[i]);
    }
  }
  place.numa_node = numa_node_of(real).value_or(-1);
  return place;
}

bool is_gpu(const std::string& vendor, const std::string& pci_class) {
  // Display controllers (class 0x03xxxx) of NVIDIA, AMD and Intel.
  const bool display = pci_class.rfind("0x03", 0) == 0;
  return display && (vendor == "0x10de" || vendor == "0x1002" || vendor == "0x8086");
}

template <class T>
void sort_by_address(std::vector<T>* items) {
  std::sort(items->begin(), items->end(),
            [](const T& a, const T& b) { return a.place.address < b.place.address; });
}

}  // namespace

const char* relation_name(PciRelation relation) {
  switch (relation) {
    case PciRelation::kPix:
      return "PIX";
    case PciRelation::kPxb:
      return "PXB";
    case PciRelation::kPhb:
      return "PHB";
    case PciRelation::kNode:
      return "NODE";
    case PciRelation::kSys:
      return "SYS";
  }
  return "SYS";
}

PciRelation relation_between(const PciPlace& a, const PciPlace& b) {
  if (a.root_complex != b.root_complex) {
    return a.numa_node >= 0 && a.numa_node == b.numa_node ? PciRelation::kNode : PciRelation::kSys;
  }
  size_t common = 0;
  while (common < a.bridges.size() && common < b.bridges.size() &&
         a.bridges[common] == b.bridges[common]) {
    ++common;
  }
  if (common >= 2) {
    return PciRelation::kPix;  // below one switch under the root port
  }
  return common == 1 ? PciRelation::kPxb : PciRelation::kPhb;
}

Expected<PciTopology> scan_pci_topology(const std::string& sysfs_root) {
  const fs::path root(sysfs_root);
  std::error_code ec;
  const fs::path devices = fs::canonical(root / "devices", ec);
  if (ec) {
    return Error(ErrorKind::kIo, "resolve " + (root / "devices").string() + ": " + ec.message());
  }
  PciTopology topology;
  for (fs::directory_iterator it(root / "class" / "infiniband", ec), end; !ec && it != end;
       it.increment(ec)) {
    const fs::path dev = it->path();
    if (!fs::exists(dev / "device")) {
      continue;  // a software device (soft-RoCE): no PCI function
    }
    auto place = place_of(devices, dev / "device");
    if (!place) {
      continue;  // on another bus (an auxiliary device's parent is found through it)
    }
    RdmaNic nic;
    nic.place = std::move(*place);
    nic.rdma_device = dev.filename().string();
    nic.link_layer = read_attribute(dev / "ports" / "1" / "link_layer");
    if (const std::string dd = find_data_direct(sysfs_root, nic.place.address); !dd.empty()) {
      auto dd_place = place_of(devices, root / "bus" / "pci" / "devices" / dd);
      if (dd_place) {
        nic.data_direct = std::move(*dd_place);
      }
    }
    std::error_code net_ec;
    for (fs::directory_iterator net(dev / "device" / "net", net_ec), net_end;
         !net_ec && net != net_end; net.increment(net_ec)) {
      nic.netdev = net->path().filename().string();
      break;
    }
    topology.nics.push_back(std::move(nic));
  }
  if (ec && ec != std::errc::no_such_file_or_directory) {
    return Error(ErrorKind::kIo,
                 "read " + (root / "class/infiniband").string() + ": " + ec.message());
  }
  ec.clear();
  for (fs::directory_iterator it(root / "bus" / "pci" / "devices", ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string vendor = read_attribute(it->path() / "vendor");
    if (!is_gpu(vendor, read_attribute(it->path() / "class"))) {
      continue;
    }
    auto place = place_of(devices, it->path());
    if (!place) {
      return std::move(place).error();
    }
    topology.gpus.push_back({std::move(*place), vendor});
  }
  if (ec && ec != std::errc::no_such_file_or_directory) {
    return Error(ErrorKind::kIo,
                 "read " + (root / "bus/pci/devices").string() + ": " + ec.message());
  }
  sort_by_address(&topology.nics);
  sort_by_address(&topology.gpus);
  return topology;
}

std::optional<int> pci_numa_node(const std::string& sysfs_root, const std::string& pci) {
  if (!is_pci_address(pci)) {
    return std::nullopt;
  }
  return numa_node_of(fs::path(sysfs_root) / "bus/pci/devices" / pci);
}

Expected<PciPlace> pci_place(const std::string& sysfs_root, const std::string& pci) {
  if (!is_pci_address(pci)) {
    return Error(ErrorKind::kKernel, in_quotes(pci) + " is not a PCI address");
  }
  const fs::path root(sysfs_root);
  std::error_code ec;
  const fs::path devices = fs::canonical(root / "devices", ec);
  if (ec) {
    return Error(ErrorKind::kIo, "resolve " + (root / "devices").string() + ": " + ec.message());
  }
  return place_of(devices, root / "bus" / "pci" / "devices" / pci);
}

RailGpuFacts rail_gpu_facts(const std::string& sysfs_root, const std::string& pci,
                            const std::string& kernel_release) {
  RailGpuFacts facts;
  facts.gpudirect = gpudirect_rdma_readiness(sysfs_root, kernel_release);
  facts.data_direct_pci = find_data_direct(sysfs_root, pci);
  auto place = pci_place(sysfs_root, facts.data_direct_pci.empty() ? pci : facts.data_direct_pci);
  if (!place && !facts.data_direct_pci.empty()) {
    place = pci_place(sysfs_root, pci);
  }
  if (place) {
    facts.pcie_root = place->root();
  }
  return facts;
}

}  // namespace rdmanet::netns
