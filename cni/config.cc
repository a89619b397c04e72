#include "cni/config.h"

#include "base/json_fields.h"
#include "base/names.h"
#include "cni/env.h"
#include "cni/version.h"

namespace rdmanet::cni {

using nlohmann::json;

namespace {

constexpr Name<LogLevel> kLogLevelNames[] = {
    {LogLevel::kError, "error"}, {LogLevel::kWarning, "warning"}, {LogLevel::kWarning, "warn"},
    {LogLevel::kInfo, "info"},   {LogLevel::kDebug, "debug"},     {LogLevel::kTrace, "trace"},
};

Status parse_runtime_config(const json& doc, RuntimeConfig* rc) {
  json runtime;
  TRY(Fields(doc, "", ErrorKind::kInvalidConfig).object("runtimeConfig", &runtime).status());
  Fields f(runtime, "runtimeConfig", ErrorKind::kInvalidConfig);
  f.string("deviceID", &rc->device_id);
  f.string("mac", &rc->mac);
  f.string("infinibandGUID", &rc->infiniband_guid);
  f.string("CNIDeviceInfoFile", &rc->device_info_file);
  f.string_list("ips", &rc->ips);
  return f.status();
}

Status parse_valid_attachments(const json& doc, std::vector<AttachmentRef>* out) {
  std::vector<json> items;
  const std::string key = "cni.dev/valid-attachments";
  TRY(Fields(doc, "", ErrorKind::kInvalidConfig).object_list(key, &items).status());
  for (size_t n = 0; n < items.size(); ++n) {
    Fields f(items[n], key + "[" + std::to_string(n) + "]", ErrorKind::kInvalidConfig);
    AttachmentRef ref;
    f.required_string("containerID", &ref.container_id).required_string("ifname", &ref.ifname);
    TRY(f.status());
    out->push_back(std::move(ref));
  }
  return ok_status();
}

}  // namespace

std::string peek_cni_version(const std::string& text) {
  json doc = parse_json(text);
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
  if (json_nested_deeper_than(text)) {
    return Error(ErrorKind::kDecode,
                 "network config on stdin nests objects or arrays deeper than " +
                     std::to_string(kMaxJsonDepth) + " levels");
  }
  conf.raw = parse_json(text);
  if (conf.raw.is_discarded()) {
    return Error(ErrorKind::kDecode, "network config on stdin is not valid JSON");
  }
  if (!conf.raw.is_object()) {
    return Error(ErrorKind::kDecode, "network config on stdin must be a JSON object");
  }
  Fields f(conf.raw, "", ErrorKind::kInvalidConfig);

  TRY(f.string("name", &conf.name).status());
  if (conf.name.empty()) {
    return Error(ErrorKind::kInvalidConfig, "name: missing network name");
  }
  if (!validate_container_id(conf.name)) {
    return Error(ErrorKind::kInvalidConfig,
                 "name: invalid characters in network name \"" + conf.name + "\"");
  }
  TRY(f.string("cniVersion", &conf.cni_version).status());
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
  json args;
  f.string("type", &conf.type).object("args", &args);
  TRY(f.status());
  TRY(Fields(args, "args", ErrorKind::kInvalidConfig).object("cni", &conf.args_cni).status());
  TRY(parse_runtime_config(conf.raw, &conf.runtime));

  TRY(f.object("ipam", &conf.ipam).status());
  TRY(Fields(conf.ipam, "ipam", ErrorKind::kInvalidConfig)
          .string("type", &conf.ipam_type)
          .status());
  if (conf.ipam_type.find('/') != std::string::npos || conf.ipam_type == "." ||
      conf.ipam_type == "..") {
    return Error(ErrorKind::kInvalidConfig,
                 "ipam.type: \"" + conf.ipam_type + "\" is not a plugin name");
  }

  json dns;
  TRY(f.object("dns", &dns).status());
  if (!dns.is_null()) {
    auto decoded = decode_dns(dns, "dns");
    if (!decoded) {
      return Error(ErrorKind::kInvalidConfig, decoded.error().msg());
    }
    conf.dns = std::move(*decoded);
  }

  json prev;
  TRY(f.object("prevResult", &prev).status());
  if (!prev.is_null()) {
    TRY_ASSIGN(conf.prev_result, decode_result(prev, conf.cni_version, "prevResult"));
  }

  TRY(parse_valid_attachments(conf.raw, &conf.valid_attachments));
  f.string("logFile", &conf.log_file);
  f.name("logLevel", kLogLevelNames, &conf.log_level, ErrorKind::kUnsupportedField);
  TRY(f.status());
  return conf;
}

}  // namespace rdmanet::cni
