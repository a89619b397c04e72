#include "rdma/gid.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <thread>

#include "base/json_fields.h"
#include "netns/netns_sysfs.h"
#include "rdma/nldev.h"

namespace rdmanet::rdma {

namespace fs = std::filesystem;
using netns::IpAddress;

namespace {

// sysfs files hold one line; a missing or unreadable file (the kernel answers EINVAL for
// the type of an empty entry) is an empty string.
// Not base read_file: ADD's GID wait reads every slot of the table (gids/<i>, and the type
// and netdev of each populated one) each 50 ms, and this costs one open and one read per
// file, where read_file adds an fstat and a read to see the end. gid_test asserts the count.
std::string read_line(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// "0000:0000:0000:0000:0000:ffff:0a38:0002" -> 16 bytes.
bool parse_sysfs_gid(const std::string& text, std::array<uint8_t, 16>* out) {
  if (text.size() != 39) {
    return false;
  }
  for (size_t group = 0; group < 8; ++group) {
    size_t at = group * 5;
    if (group < 7 && text[at + 4] != ':') {
      return false;
    }
    unsigned value = 0;
    for (size_t i = 0; i < 4; ++i) {
      char c = text[at + i];
      int digit = (c >= '0' && c <= '9')   ? c - '0'
                  : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                  : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                           : -1;
      if (digit < 0) {
        return false;
      }
      value = value * 16 + static_cast<unsigned>(digit);
    }
    (*out)[group * 2] = static_cast<uint8_t>(value >> 8);
    (*out)[group * 2 + 1] = static_cast<uint8_t>(value & 0xff);
  }
  return true;
}

}  // namespace

IpAddress roce_gid_of(const IpAddress& addr) {
  if (!addr.is_v4()) {
    return addr;
  }
  std::array<uint8_t, 16> bytes{};
  bytes[10] = 0xff;
  bytes[11] = 0xff;
  std::copy(addr.data(), addr.data() + 4, bytes.begin() + 12);
  return IpAddress::from_bytes(bytes.data(), bytes.size());
}

Expected<std::vector<Gid>> read_gids(const std::string& sysfs_root, const std::string& device,
                                     uint32_t port) {
  if (!is_safe_device_name(device)) {
    return Error(ErrorKind::kInvalidConfig, "invalid RDMA device name \"" + device + "\"");
  }
  fs::path dir =
      fs::path(sysfs_root) / "class/infiniband" / device / "ports" / std::to_string(port);
  std::error_code ec;
  if (!fs::is_directory(dir / "gids", ec)) {
    return Error(ErrorKind::kDeviceNotFound, "RDMA device " + device + " port " +
                                                 std::to_string(port) + ": no " +
                                                 (dir / "gids").string() + " in this netns");
  }
  std::vector<Gid> out;
  for (fs::directory_iterator it(dir / "gids", ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    const std::string name = it->path().filename();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos ||
        name.size() > 6) {
      continue;
    }
    std::array<uint8_t, 16> bytes{};
    if (!parse_sysfs_gid(read_line(it->path()), &bytes) ||
        std::all_of(bytes.begin(), bytes.end(), [](uint8_t b) { return b == 0; })) {
      continue;
    }
    Gid gid;
    gid.index = static_cast<uint32_t>(std::stoul(name));
    gid.gid = IpAddress::from_bytes(bytes.data(), bytes.size());
    gid.type = read_line(dir / "gid_attrs/types" / name);
    gid.netdev = read_line(dir / "gid_attrs/ndevs" / name);
    out.push_back(std::move(gid));
  }
  if (ec) {
    return Error(ErrorKind::kIo, "read " + (dir / "gids").string() + ": " + ec.message());
  }
  std::sort(out.begin(), out.end(), [](const Gid& a, const Gid& b) { return a.index < b.index; });
  return out;
}

bool GidReport::complete() const {
  return std::all_of(addresses.begin(), addresses.end(),
                     [](const Entry& e) { return e.index >= 0; });
}

int GidReport::v2_index() const {
  for (bool v4 : {true, false}) {
    for (const auto& e : addresses) {
      if (e.address.is_v4() == v4 && e.index >= 0) {
        return e.index;
      }
    }
  }
  return -1;
}

std::string GidReport::summary() const {
  std::string out = device + " port " + std::to_string(port) + ":";
  for (const auto& e : addresses) {
    out += " " + e.address.str() +
           (e.index >= 0 ? " -> GID index " + std::to_string(e.index) + " (" +
                               roce_gid_of(e.address).str() + ")"
                         : " -> no RoCE v2 GID");
  }
  if (!complete()) {
    out += "; the table holds";
    if (table.empty()) {
      out += " nothing";
    }
    for (const auto& gid : table) {
      out += " [" + std::to_string(gid.index) + "] " + gid.gid.str() + " " + gid.type +
             (gid.netdev.empty() ? "" : " " + gid.netdev);
    }
  }
  return out;
}

nlohmann::json GidReport::to_json() const {
  nlohmann::json doc = {{"device", device}, {"port", port}};
  doc["table"] = nlohmann::json::array();
  for (const auto& gid : table) {
    doc["table"].push_back(
        {{"index", gid.index}, {"gid", gid.gid.str()}, {"type", gid.type}, {"netdev", gid.netdev}});
  }
  doc["addresses"] = nlohmann::json::array();
  for (const auto& e : addresses) {
    doc["addresses"].push_back({{"address", e.address.str()}, {"index", e.index}});
  }
  return doc;
}

Expected<GidReport> GidReport::from_json(const nlohmann::json& doc) {
  try {
    GidReport report;
    report.device = doc.at("device").get<std::string>();
    report.port = doc.at("port").get<uint32_t>();
    for (const auto& item : doc.at("table")) {
      TRY_ASSIGN(IpAddress gid, IpAddress::parse(item.at("gid").get<std::string>()));
      report.table.push_back({item.at("index").get<uint32_t>(), gid,
                              item.at("type").get<std::string>(),
                              item.at("netdev").get<std::string>()});
    }
    for (const auto& item : doc.at("addresses")) {
      TRY_ASSIGN(IpAddress addr, IpAddress::parse(item.at("address").get<std::string>()));
      report.addresses.push_back({addr, item.at("index").get<int>()});
    }
    return report;
  } catch (const nlohmann::json::exception& e) {
    return Error(ErrorKind::kInternal, std::string("GID report: ") + e.what());
  }
}

void match_addresses(GidReport* report, const std::vector<IpAddress>& addresses) {
  report->addresses.clear();
  for (const auto& addr : addresses) {
    GidReport::Entry entry{addr, -1};
    IpAddress want = roce_gid_of(addr);
    for (const auto& gid : report->table) {
      if (gid.roce_v2() && gid.gid == want) {
        entry.index = static_cast<int>(gid.index);
        break;
      }
    }
    report->addresses.push_back(entry);
  }
}

namespace {

// Reads the port's table as seen from ns until every address has its RoCE v2 GID or
// `timeout` has passed (a single look for 0), and returns what it saw.
Expected<GidReport> look_for_roce_gids(const netns::Netns& ns, const std::string& device,
                                       uint32_t port, const std::vector<IpAddress>& addresses,
                                       std::chrono::milliseconds timeout,
                                       const std::string& sysfs_root) {
  auto reader = [&]() -> Expected<std::string> {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    GidReport report;
    report.device = device;
    report.port = port;
    for (;;) {
      TRY_ASSIGN(report.table, read_gids(sysfs_root, device, port));
      match_addresses(&report, addresses);
      if (report.complete() || std::chrono::steady_clock::now() >= deadline) {
        return report.to_json().dump();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  };
  TRY_ASSIGN(std::string text,
             netns::in_netns_sysfs(ns, reader, timeout + std::chrono::seconds(10)));
  return GidReport::from_json(parse_json(text));
}

}  // namespace

Expected<GidReport> wait_for_roce_gids(const netns::Netns& ns, const std::string& device,
                                       uint32_t port, const std::vector<IpAddress>& addresses,
                                       std::chrono::milliseconds timeout,
                                       const std::string& sysfs_root) {
  TRY_ASSIGN(GidReport report,
             look_for_roce_gids(ns, device, port, addresses, timeout, sysfs_root));
  if (!report.complete()) {
    return Error(
        ErrorKind::kGidTimeout,
        "no RoCE v2 GID within " + std::to_string(timeout.count()) + " ms: " + report.summary());
  }
  return report;
}

Expected<GidReport> read_roce_gids(const netns::Netns& ns, const std::string& device, uint32_t port,
                                   const std::vector<IpAddress>& addresses,
                                   const std::string& sysfs_root) {
  return look_for_roce_gids(ns, device, port, addresses, std::chrono::milliseconds(0), sysfs_root);
}

}  // namespace rdmanet::rdma
