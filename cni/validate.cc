#include "cni/validate.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>

#include "base/json_fields.h"
#include "cni/error_code.h"

namespace rdmanet::cni {

using nlohmann::json;

namespace {

// The plugin configs in a document, as the plugin would receive them.
Expected<std::vector<json>> plugin_configs(const json& doc) {
  if (!doc.is_object()) {
    return Error(ErrorKind::kDecode, "not a JSON object");
  }
  if (!doc.contains("plugins")) {
    return std::vector<json>{doc};
  }
  if (!doc["plugins"].is_array()) {
    return Error(ErrorKind::kInvalidConfig, "plugins must be an array");
  }
  std::vector<json> out;
  for (json plugin : doc["plugins"]) {
    if (!plugin.is_object()) {
      return Error(ErrorKind::kInvalidConfig, "plugins must hold objects");
    }
    for (const char* key : {"cniVersion", "name"}) {
      if (doc.contains(key)) {
        plugin[key] = doc[key];
      }
    }
    out.push_back(std::move(plugin));
  }
  return out;
}

bool selected(const Validator& v, const json& conf) {
  if (v.what == ValidateWhat::kPluginType) {
    return conf.value("type", json()) == v.type;
  }
  return conf.contains("ipam") && conf["ipam"].is_object() &&
         conf["ipam"].value("type", json()) == v.type;
}

Status validate_file(const Validator& v, const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return Error(ErrorKind::kIo, "cannot read");
  }
  std::stringstream ss;
  ss << in.rdbuf();
  json doc = parse_json(ss.str());
  if (doc.is_discarded()) {
    return Error(ErrorKind::kDecode, "not valid JSON");
  }
  TRY_ASSIGN(std::vector<json> configs, plugin_configs(doc));
  int checked = 0;
  for (const auto& conf : configs) {
    if (!selected(v, conf)) {
      continue;
    }
    TRY_ASSIGN(NetConf parsed, parse_netconf(conf.dump()));
    TRY(v.check(parsed));
    ++checked;
  }
  if (checked == 0) {
    return Error(ErrorKind::kInvalidConfig, "no " + v.type + " entry found");
  }
  return ok_status();
}

}  // namespace

int validate_main(const Validator& validator, const std::vector<std::string>& files,
                  std::ostream& out) {
  if (files.empty()) {
    out << "usage: " << validator.type << " validate FILE...\n";
    return 2;
  }
  int failed = 0;
  for (const auto& file : files) {
    auto s = validate_file(validator, file);
    if (s) {
      out << file << ": ok\n";
    } else {
      out << file << ": error " << error_code(s.error()) << ": " << s.error().msg() << "\n";
      ++failed;
    }
  }
  return failed == 0 ? 0 : 1;
}

}  // namespace rdmanet::cni
