#include "netns/data_direct.h"

#include <cstdint>
#include <filesystem>
#include <optional>

#include "base/files.h"
#include "netns/sysfs.h"

namespace rdmanet::netns {
namespace {

constexpr uint8_t kVpdLargeTag = 0x80;
constexpr uint8_t kVpdReadOnly = 0x10;  // large resource 0x90: VPD-R
constexpr uint8_t kVpdEnd = 0x0f;       // small resource 0x78: end tag
constexpr size_t kVpdMaxSize = 32 << 10;

// The function that carries the card's VPD: a VF's PF, or the function itself.
std::string card_function(const std::string& sysfs_root, const std::string& pci) {
  std::error_code ec;
  const std::filesystem::path pf =
      std::filesystem::read_symlink(sysfs_root + "/bus/pci/devices/" + pci + "/physfn", ec);
  return ec ? pci : pf.filename().string();
}

std::string serial_of(const std::string& sysfs_root, const std::string& pci) {
  return vpd_keyword(read_attribute(sysfs_root + "/bus/pci/devices/" + pci + "/vpd", kVpdMaxSize),
                     "SN");
}

}  // namespace

std::string vpd_keyword(std::string_view vpd, std::string_view keyword) {
  auto byte = [&](size_t i) { return static_cast<uint8_t>(vpd[i]); };
  size_t i = 0;
  while (i < vpd.size()) {
    const uint8_t tag = byte(i);
    if (!(tag & kVpdLargeTag)) {
      if ((tag >> 3) == kVpdEnd) {
        break;
      }
      i += 1 + (tag & 0x07);
      continue;
    }
    if (i + 3 > vpd.size()) {
      break;
    }
    const size_t start = i + 3;
    const size_t end = start + (byte(i + 1) | (size_t{byte(i + 2)} << 8));
    if (end > vpd.size()) {
      break;
    }
    if ((tag & 0x7f) == kVpdReadOnly) {
      for (size_t k = start; k + 3 <= end;) {
        const size_t len = byte(k + 2);
        if (k + 3 + len > end) {
          break;
        }
        if (vpd.substr(k, 2) == keyword) {
          std::string value(vpd.substr(k + 3, len));
          while (!value.empty() && (value.back() == ' ' || value.back() == '\0')) {
            value.pop_back();
          }
          return value;
        }
        k += 3 + len;
      }
    }
    i = end;
  }
  return "";
}

std::string find_data_direct(const std::string& sysfs_root, const std::string& pci) {
  if (!is_pci_address(pci)) {
    return "";
  }
  auto bound = directory_entries(sysfs_root + "/bus/pci/drivers/" + kDataDirectDriver);
  if (!bound || bound->empty()) {
    return "";
  }
  std::string serial;
  std::string found;
  for (const std::string& dd : *bound) {
    if (!is_pci_address(dd) || dd == pci) {
      continue;  // bind, unbind, new_id, module, uevent ...
    }
    const std::string dir = sysfs_root + "/bus/pci/devices/" + dd;
    if (read_attribute(dir + "/vendor", 64) != kDataDirectVendor ||
        read_attribute(dir + "/device", 64) != kDataDirectDevice) {
      continue;
    }
    if (serial.empty()) {
      serial = serial_of(sysfs_root, card_function(sysfs_root, pci));
      if (serial.empty()) {
        return "";
      }
    }
    if (serial_of(sysfs_root, dd) == serial) {
      if (!found.empty()) {
        return "";  // two Data Direct functions claim one card: not ours to choose
      }
      found = dd;
    }
  }
  return found;
}

}  // namespace rdmanet::netns
