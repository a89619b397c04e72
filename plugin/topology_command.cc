#include "plugin/topology_command.h"

#include <algorithm>
#include <iomanip>
#include <nlohmann/json.hpp>

namespace rdmanet::plugin {

using netns::PciRelation;
using nlohmann::json;

namespace {

constexpr const char* kTopologyUsage = "usage: rdmanet topology [--json] [--sysfs-root DIR]\n";

// The GPUs at the closest relation any GPU has to the NIC's alignment place (PIX before PXB
// before PHB ...).
std::vector<std::pair<const netns::Gpu*, PciRelation>> nearest_gpus(
    const netns::RdmaNic& nic, const netns::PciTopology& topology) {
  std::vector<std::pair<const netns::Gpu*, PciRelation>> out;
  for (const auto& gpu : topology.gpus) {
    out.emplace_back(&gpu, netns::relation_between(nic.alignment(), gpu.place));
  }
  if (out.empty()) {
    return out;
  }
  const PciRelation best =
      std::min_element(out.begin(), out.end(), [](const auto& a, const auto& b) {
        return a.second < b.second;
      })->second;
  std::erase_if(out, [&](const auto& g) { return g.second != best; });
  return out;
}

std::string or_dash(const std::string& s) { return s.empty() ? "-" : s; }

// The switch a function hangs below: the bridge after its root port, if any.
std::string switch_of(const netns::PciPlace& place) {
  return place.bridges.size() >= 2 ? place.bridges[1] : "";
}
std::string root_port_of(const netns::PciPlace& place) {
  return place.bridges.empty() ? "" : place.bridges[0];
}
// The PCIe root to align GPUs with, as "<root complex>/<root port>".
std::string align_with(const netns::PciPlace& place) {
  return place.bridges.empty() ? place.root_complex
                               : place.root_complex + "/" + place.bridges.front();
}

}  // namespace

void print_topology_table(const netns::PciTopology& topology,
                          const netns::GpuDirectReadiness& gpudirect, std::ostream& out) {
  out << std::left << std::setw(14) << "NIC" << std::setw(16) << "NETDEV" << std::setw(10) << "RDMA"
      << std::setw(12) << "LINK" << std::setw(6) << "NUMA" << std::setw(14) << "ROOT PORT"
      << std::setw(14) << "SWITCH" << std::setw(14) << "DATA DIRECT" << std::setw(25)
      << "ALIGN WITH"
      << "NEAREST GPUS\n";
  for (const auto& nic : topology.nics) {
    std::string gpus;
    for (const auto& [gpu, relation] : nearest_gpus(nic, topology)) {
      gpus += (gpus.empty() ? "" : " ") + gpu->place.address + " (" +
              netns::relation_name(relation) + ")";
    }
    out << std::setw(14) << nic.place.address << std::setw(16) << or_dash(nic.netdev)
        << std::setw(10) << nic.rdma_device << std::setw(12) << or_dash(nic.link_layer)
        << std::setw(6)
        << (nic.place.numa_node >= 0 ? std::to_string(nic.place.numa_node) : std::string("-"))
        << std::setw(14) << or_dash(root_port_of(nic.place)) << std::setw(14)
        << or_dash(switch_of(nic.place)) << std::setw(14)
        << (nic.data_direct ? nic.data_direct->address : std::string("-")) << std::setw(25)
        << align_with(nic.alignment()) << or_dash(gpus) << "\n";
  }
  if (topology.gpus.empty()) {
    out << "(no GPUs found)\n";
  }
  out << "GPUDirect RDMA: " << netns::gpudirect_rdma_name(gpudirect.mode) << " ("
      << gpudirect.reason << ")\n";
  out << "relations (as nvidia-smi topo names them): PIX one PCIe switch, PXB bridges below one "
         "root port, PHB the root complex, NODE one NUMA node, SYS across sockets\n";
}

void print_topology_json(const netns::PciTopology& topology,
                         const netns::GpuDirectReadiness& gpudirect, std::ostream& out) {
  auto place_json = [](const netns::PciPlace& p) {
    return json{{"pciAddress", p.address},       {"numaNode", p.numa_node},
                {"rootComplex", p.root_complex}, {"rootPort", root_port_of(p)},
                {"switch", switch_of(p)},        {"bridges", p.bridges}};
  };
  json doc = {{"nics", json::array()}, {"gpus", json::array()}};
  for (const auto& nic : topology.nics) {
    json entry = place_json(nic.place);
    entry["rdmaDevice"] = nic.rdma_device;
    entry["netdev"] = nic.netdev;
    entry["linkLayer"] = nic.link_layer;
    entry["dataDirect"] = nic.data_direct ? place_json(*nic.data_direct) : json(nullptr);
    const netns::PciPlace& align = nic.alignment();
    entry["alignment"] = {{"pciAddress", align.address},
                          {"rootComplex", align.root_complex},
                          {"rootPort", root_port_of(align)},
                          {"pcieRoot", align.root()}};
    json gpus = json::array();
    for (const auto& gpu : topology.gpus) {
      gpus.push_back(
          {{"pciAddress", gpu.place.address},
           {"relation", netns::relation_name(netns::relation_between(align, gpu.place))}});
    }
    entry["gpus"] = gpus;
    doc["nics"].push_back(entry);
  }
  for (const auto& gpu : topology.gpus) {
    json entry = place_json(gpu.place);
    entry["vendor"] = gpu.vendor;
    doc["gpus"].push_back(entry);
  }
  doc["gpudirectRdma"] = {{"mode", netns::gpudirect_rdma_name(gpudirect.mode)},
                          {"reason", gpudirect.reason}};
  out << doc.dump(2) << "\n";
}

int topology_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  bool as_json = false;
  std::string sysfs_root = "/sys";
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--json") {
      as_json = true;
    } else if (args[i] == "--sysfs-root" && i + 1 < args.size()) {
      sysfs_root = args[++i];
    } else {
      err << kTopologyUsage;
      return 2;
    }
  }
  auto topology = netns::scan_pci_topology(sysfs_root);
  if (!topology) {
    err << "rdmanet: " << topology.error().msg() << "\n";
    return 1;
  }
  const netns::GpuDirectReadiness gpudirect =
      netns::gpudirect_rdma_readiness(sysfs_root, netns::running_kernel_release());
  if (as_json) {
    print_topology_json(*topology, gpudirect, out);
  } else {
    print_topology_table(*topology, gpudirect, out);
  }
  return 0;
}

}  // namespace rdmanet::plugin
