// The part of a network configuration that every CNI plugin shares: the
// spec's well-known keys, the capability arguments Multus passes under
// runtimeConfig, args.cni, prevResult and rdmanet's logging keys. Plugins
// parse their own keys from `raw`, with Fields.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "cni/result.h"

namespace rdmanet::cni {

// Capability arguments (runtimeConfig), named as Multus and the device plugins name them.
struct RuntimeConfig {
  std::string device_id;         // deviceID
  std::vector<std::string> ips;  // ips
  std::string mac;               // mac
  std::string infiniband_guid;   // infinibandGUID
  std::string device_info_file;  // CNIDeviceInfoFile
};

// One entry of cni.dev/valid-attachments (GC).
struct AttachmentRef {
  std::string container_id;
  std::string ifname;
  bool operator==(const AttachmentRef&) const = default;
};

enum class LogLevel { kError, kWarning, kInfo, kDebug, kTrace };

struct NetConf {
  std::string cni_version;
  std::string name;
  std::string type;
  nlohmann::json raw;                                  // the whole document
  nlohmann::json args_cni = nlohmann::json::object();  // args.cni
  RuntimeConfig runtime;
  std::optional<Result> prev_result;
  nlohmann::json ipam = nlohmann::json::object();
  std::string ipam_type;  // ipam.type, empty when there is no IPAM
  Dns dns;
  std::vector<AttachmentRef> valid_attachments;  // cni.dev/valid-attachments
  std::string log_file;
  LogLevel log_level = LogLevel::kWarning;
};

// Parses stdin. Malformed JSON is a decode error (6); a missing or invalid
// name, or a field of the wrong type, is an invalid config (7) naming the
// field; an unsupported cniVersion is error 1. Unknown keys are ignored.
Expected<NetConf> parse_netconf(const std::string& text);

// Best effort: the cniVersion of a document, for error replies; empty when unknown.
std::string peek_cni_version(const std::string& text);

}  // namespace rdmanet::cni
