#include "cni/device_info.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>

#include "base/files.h"
#include "base/json_fields.h"

namespace rdmanet::cni {

using nlohmann::json;

namespace {

const std::string kField = "runtimeConfig.CNIDeviceInfoFile";
const std::string kVersion = "1.1.0";
using Version = std::array<int, 3>;
constexpr Version kVersionParts = {1, 1, 0};

Status check_path(const std::string& path) {
  if (path.empty() || path.front() != '/') {
    return Error(ErrorKind::kInvalidConfig,
                 kField + " must be an absolute path, not \"" + path + "\"");
  }
  if (path.find('\0') != std::string::npos) {
    return Error(ErrorKind::kInvalidConfig, kField + " contains a NUL byte");
  }
  if (path.back() == '/') {
    return Error(ErrorKind::kInvalidConfig, kField + " names a directory, not a file: " + path);
  }
  // The path comes from the runtime; DEL removes what it names. No way up and out.
  if (("/" + path + "/").find("/../") != std::string::npos) {
    return Error(ErrorKind::kInvalidConfig, kField + " must not contain \"..\": " + path);
  }
  return ok_status();
}

// "MAJOR.MINOR.PATCH" with decimal numbers; nullopt for anything else.
std::optional<Version> parse_device_info_version(const std::string& text) {
  Version v{};
  const char* p = text.data();
  const char* end = text.data() + text.size();
  for (size_t i = 0; i < v.size(); ++i) {
    if (i > 0) {
      if (p == end || *p != '.') {
        return std::nullopt;
      }
      ++p;
    }
    auto [next, ec] = std::from_chars(p, end, v[i]);
    if (ec != std::errc() || next == p) {
      return std::nullopt;
    }
    p = next;
  }
  if (p != end) {
    return std::nullopt;
  }
  return v;
}

// The file's content; nullopt when there is no file. A symlink or a FIFO there is refused.
Expected<std::optional<std::string>> read_existing(const std::string& path) {
  return read_file_at(AT_FDCWD, path, "device-info file " + path);
}

// Why an existing document cannot take our keys; empty when it can.
std::string unusable(const json& doc) {
  if (doc.is_discarded()) {
    return "not JSON";
  }
  if (!doc.is_object()) {
    return "not a JSON object";
  }
  if (doc.contains("type") && doc.at("type") != "pci") {
    return "type " + doc.at("type").dump() + ", not \"pci\"";
  }
  if (doc.contains("pci") && !doc.at("pci").is_object()) {
    return "\"pci\" is not an object";
  }
  if (doc.contains("version")) {
    const json& v = doc.at("version");
    auto version = v.is_string() ? parse_device_info_version(v.get<std::string>()) : std::nullopt;
    if (!version || (*version)[0] != kVersionParts[0]) {
      return "version " + v.dump() + ", not 1.x.y";
    }
  }
  return {};
}

// Sets our keys in `doc`, a document that unusable() accepted.
void merge(json& doc, const DeviceInfo& info, const std::string& path) {
  doc["type"] = "pci";
  // The keys we write need 1.1.0; a newer 1.x describes a superset, so it stays.
  auto version = doc.contains("version")
                     ? parse_device_info_version(doc["version"].get<std::string>())
                     : std::nullopt;
  if (!version || *version < kVersionParts) {
    doc["version"] = kVersion;
  }
  json& pci = doc["pci"];
  if (pci.is_null()) {
    pci = json::object();
  }
  if (pci.contains("pci-address") && pci["pci-address"] != info.pci_address) {
    spdlog::warn("device-info file {} has pci-address {}, the attached device is {}; correcting it",
                 path, pci["pci-address"].dump(), info.pci_address);
  }
  for (auto [key, value] : {std::pair{"pci-address", &info.pci_address},
                            std::pair{"pf-pci-address", &info.pf_pci_address},
                            std::pair{"rdma-device", &info.rdma_device},
                            std::pair{"representor-device", &info.representor_device}}) {
    if (!value->empty()) {
      pci[key] = *value;
    }
  }
}

}  // namespace

Status write_device_info(const std::string& path, const DeviceInfo& info) {
  TRY(check_path(path));
  if (info.pci_address.empty()) {
    return Error(ErrorKind::kInternal, "device-info for " + path + " without a PCI address");
  }
  TRY_ASSIGN(std::optional<std::string> text, read_existing(path));
  json doc = json::object();
  // An empty file is no document, not a broken one.
  if (text && text->find_first_not_of(" \t\r\n") != std::string::npos) {
    json existing = parse_json(*text);
    if (std::string why = unusable(existing); why.empty()) {
      doc = std::move(existing);
    } else {
      // Never replace what is not ours to replace: the path comes from the runtime.
      return Error(ErrorKind::kIo, "device-info file " + path +
                                       " exists and is not a device-info document (" + why +
                                       "); refusing to replace it");
    }
  }
  merge(doc, info, path);
  TRY(make_directories(parent_of(path), 0700).with_context("device-info file " + path));
  return write_file_atomically(path, doc.dump(-1, ' ', false, json::error_handler_t::replace), 0444,
                               Survives::kProcessCrash);
}

Status remove_device_info(const std::string& path, const std::string& pci_address) {
  TRY(check_path(path));
  // What DEL unlinks is named by state; it must still be the document ADD wrote, and a
  // file someone put there since (or a path pointed elsewhere) is left alone.
  TRY_ASSIGN(std::optional<std::string> text, read_existing(path));
  if (!text) {
    return ok_status();
  }
  json doc = parse_json(*text);
  std::string why = unusable(doc);
  if (why.empty() && doc.value("type", "") != "pci") {
    why = "no \"type\": \"pci\"";
  }
  if (why.empty() && !pci_address.empty() &&
      (!doc.contains("pci") || doc["pci"].value("pci-address", json()) != pci_address)) {
    why = "it does not name " + pci_address;
  }
  if (!why.empty()) {
    return Error(ErrorKind::kIo, "device-info file " + path + " is not the one written (" + why +
                                     "); left in place");
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return Error(ErrorKind::kIo, "remove device-info file " + path + ": " + std::strerror(errno));
  }
  return ok_status();
}

}  // namespace rdmanet::cni
