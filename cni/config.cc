#include "cni/config.h"

#include "cni/env.h"
#include "cni/json_fields.h"
#include "cni/version.h"

namespace rdmanet::cni {

using nlohmann::json;

namespace {

Expected<LogLevel> parse_log_level(const std::string& text) {
  static const std::pair<const char*, LogLevel> levels[] = {
      {"error", LogLevel::kError}, {"warning", LogLevel::kWarning}, {"warn", LogLevel::kWarning},
      {"info", LogLevel::kInfo},   {"debug", LogLevel::kDebug},     {"trace", LogLevel::kTrace},
  };
  for (const auto& [name, level] : levels) {
    if (text == name) {
      return level;
    }
  }
  return Error(ErrorKind::kUnsupportedField, "logLevel: unsupported value \"" + text +
                                                 "\" (use error, warning, info, debug or trace)");
}

Status parse_runtime_config(const json& doc, RuntimeConfig* rc) {
  json runtime;
  Fields top(doc, "", ErrorKind::kInvalidConfig);
  if (auto s = top.object("runtimeConfig", &runtime); !s) {
    return s;
  }
  Fields f(runtime, "runtimeConfig", ErrorKind::kInvalidConfig);
  for (auto [key, out] : {std::pair{"deviceID", &rc->device_id}, std::pair{"mac", &rc->mac},
                          std::pair{"infinibandGUID", &rc->infiniband_guid},
                          std::pair{"CNIDeviceInfoFile", &rc->device_info_file}}) {
    if (auto s = f.string(key, out); !s) {
      return s;
    }
  }
  return f.string_list("ips", &rc->ips);
}

Status parse_valid_attachments(const json& doc, std::vector<AttachmentRef>* out) {
  Fields top(doc, "", ErrorKind::kInvalidConfig);
  std::vector<json> items;
  const std::string key = "cni.dev/valid-attachments";
  if (auto s = top.object_list(key, &items); !s) {
    return s;
  }
  for (size_t n = 0; n < items.size(); ++n) {
    Fields f(items[n], key + "[" + std::to_string(n) + "]", ErrorKind::kInvalidConfig);
    AttachmentRef ref;
    if (auto s = f.required_string("containerID", &ref.container_id); !s) {
      return s;
    }
    if (auto s = f.required_string("ifname", &ref.ifname); !s) {
      return s;
    }
    out->push_back(std::move(ref));
  }
  return ok_status();
}

}  // namespace

std::string peek_cni_version(const std::string& text) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_object() && doc.contains("cniVersion") && doc["cniVersion"].is_string()) {
    std::string v = doc["cniVersion"].get<std::string>();
    if (is_supported(v)) {
      return v;
    }
  }
  return {};
}

Expected<NetConf> parse_netconf(const std::string& text) {
  NetConf conf;
  conf.raw = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (conf.raw.is_discarded()) {
    return Error(ErrorKind::kDecode, "network config on stdin is not valid JSON");
  }
  if (!conf.raw.is_object()) {
    return Error(ErrorKind::kDecode, "network config on stdin must be a JSON object");
  }
  Fields f(conf.raw, "", ErrorKind::kInvalidConfig);

  if (auto s = f.string("name", &conf.name); !s) {
    return std::move(s).error();
  }
  if (conf.name.empty()) {
    return Error(ErrorKind::kInvalidConfig, "name: missing network name");
  }
  if (!validate_container_id(conf.name)) {
    return Error(ErrorKind::kInvalidConfig,
                 "name: invalid characters in network name \"" + conf.name + "\"");
  }
  if (auto s = f.string("cniVersion", &conf.cni_version); !s) {
    return std::move(s).error();
  }
  if (conf.cni_version.empty()) {
    return Error(ErrorKind::kIncompatibleVersion,
                 "incompatible CNI versions: config has no cniVersion (0.1.0 is implied)");
  }
  if (!is_supported(conf.cni_version)) {
    std::string supported;
    for (auto v : kSupportedVersions) {
      supported += (supported.empty() ? "" : ", ") + std::string(v);
    }
    return Error(ErrorKind::kIncompatibleVersion,
                 "incompatible CNI versions: cniVersion \"" + conf.cni_version +
                     "\" is not supported (supported: " + supported + ")");
  }
  if (auto s = f.string("type", &conf.type); !s) {
    return std::move(s).error();
  }

  json args;
  if (auto s = f.object("args", &args); !s) {
    return std::move(s).error();
  }
  if (auto s = Fields(args, "args", ErrorKind::kInvalidConfig).object("cni", &conf.args_cni); !s) {
    return std::move(s).error();
  }
  if (auto s = parse_runtime_config(conf.raw, &conf.runtime); !s) {
    return std::move(s).error();
  }

  if (auto s = f.object("ipam", &conf.ipam); !s) {
    return std::move(s).error();
  }
  if (auto s = Fields(conf.ipam, "ipam", ErrorKind::kInvalidConfig).string("type", &conf.ipam_type);
      !s) {
    return std::move(s).error();
  }
  if (conf.ipam_type.find('/') != std::string::npos || conf.ipam_type == "." ||
      conf.ipam_type == "..") {
    return Error(ErrorKind::kInvalidConfig,
                 "ipam.type: \"" + conf.ipam_type + "\" is not a plugin name");
  }

  json dns;
  if (auto s = f.object("dns", &dns); !s) {
    return std::move(s).error();
  }
  if (!dns.is_null()) {
    auto decoded = decode_dns(dns, "dns");
    if (!decoded) {
      return Error(ErrorKind::kInvalidConfig, decoded.error().msg());
    }
    conf.dns = std::move(*decoded);
  }

  json prev;
  if (auto s = f.object("prevResult", &prev); !s) {
    return std::move(s).error();
  }
  if (!prev.is_null()) {
    auto decoded = decode_result(prev, conf.cni_version, "prevResult");
    if (!decoded) {
      return std::move(decoded).error();
    }
    conf.prev_result = std::move(*decoded);
  }

  if (auto s = parse_valid_attachments(conf.raw, &conf.valid_attachments); !s) {
    return std::move(s).error();
  }

  if (auto s = f.string("logFile", &conf.log_file); !s) {
    return std::move(s).error();
  }
  std::string level;
  if (auto s = f.string("logLevel", &level); !s) {
    return std::move(s).error();
  }
  if (!level.empty()) {
    auto parsed = parse_log_level(level);
    if (!parsed) {
      return std::move(parsed).error();
    }
    conf.log_level = *parsed;
  }
  return conf;
}

}  // namespace rdmanet::cni
