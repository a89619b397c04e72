#include "agent/options.h"

#include <algorithm>
#include <cstdlib>

#include "base/files.h"
#include "base/json_fields.h"

namespace rdmanet::agent {

using nlohmann::json;

namespace {

constexpr const char* kAgentUsage =
    "usage: rdmanet node-agent [--config FILE] [--state-dir DIR]... [--networks-dir DIR]\n"
    "                          [--cni-path PATH] [--interval SECONDS] [--grace SECONDS]\n"
    "                          [--listen HOST:PORT] [--once]\n";

Error bad(const std::string& why) {
  return Error(ErrorKind::kInvalidConfig, why + "\n" + kAgentUsage);
}

Status seconds_in(const std::string& what, long long value, std::chrono::seconds* out) {
  if (value < 0 || value > 86400) {
    return Error(ErrorKind::kInvalidConfig,
                 what + " must be 0..86400 seconds, not " + std::to_string(value));
  }
  *out = std::chrono::seconds(value);
  return ok_status();
}

Status read_config_file(const std::string& path, AgentConfig* config) {
  TRY_ASSIGN(auto text, read_file(path));
  if (!text) {
    return Error(ErrorKind::kInvalidConfig, "agent config " + path + " does not exist");
  }
  json doc = parse_json(*text);
  if (!doc.is_object()) {
    return Error(ErrorKind::kInvalidConfig, "agent config " + path + " is not a JSON object");
  }
  Fields f(doc, path, ErrorKind::kInvalidConfig);
  std::vector<std::string> dirs;
  long long interval = config->interval.count();
  long long grace = config->grace.count();
  f.string_list("stateDirs", &dirs).string("networksDir", &config->networks_dir);
  f.string("cniPath", &config->cni_path).string("listen", &config->listen);
  f.integer64("intervalSeconds", &interval).integer64("graceSeconds", &grace);
  TRY(f.status());
  if (!dirs.empty()) {
    config->state_dirs = dirs;
  }
  TRY(seconds_in(path + ": intervalSeconds", interval, &config->interval));
  return seconds_in(path + ": graceSeconds", grace, &config->grace);
}

// One flag's value into the config (--config was read first).
Status apply_flag(const std::string& flag, const std::string& value, AgentConfig* config,
                  std::vector<std::string>* dirs) {
  if (flag == "--state-dir") {
    dirs->push_back(value);
  } else if (flag == "--networks-dir") {
    config->networks_dir = value;
  } else if (flag == "--cni-path") {
    config->cni_path = value;
  } else if (flag == "--listen") {
    config->listen = value;
  } else if (flag == "--interval" || flag == "--grace") {
    char* end = nullptr;
    long long n = std::strtoll(value.c_str(), &end, 10);
    if (value.empty() || *end != '\0') {
      return bad(flag + " takes whole seconds, not \"" + value + "\"");
    }
    TRY(seconds_in(flag, n, flag == "--interval" ? &config->interval : &config->grace));
  }
  return ok_status();
}

}  // namespace

Expected<AgentConfig> parse_agent_args(const std::vector<std::string>& args) {
  AgentConfig config;
  // The config file first, so that flags override it wherever they stand.
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == "--config") {
      TRY(read_config_file(args[i + 1], &config));
    }
  }
  std::vector<std::string> dirs;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (flag == "--once") {
      config.once = true;
      continue;
    }
    static const char* const kTakesValue[] = {"--config",   "--state-dir", "--networks-dir",
                                              "--cni-path", "--listen",    "--interval",
                                              "--grace"};
    if (std::find(std::begin(kTakesValue), std::end(kTakesValue), flag) == std::end(kTakesValue)) {
      return bad("unknown option " + flag);
    }
    if (i + 1 >= args.size()) {
      return bad(flag + " needs a value");
    }
    TRY(apply_flag(flag, args[++i], &config, &dirs));
  }
  if (!dirs.empty()) {
    config.state_dirs = dirs;
  }
  for (const auto& dir : config.state_dirs) {
    TRY(check_absolute_path(dir, "state dir", ErrorKind::kInvalidConfig));
  }
  if (config.interval.count() == 0 && !config.once) {
    return bad("--interval must be at least 1 second");
  }
  return config;
}

}  // namespace rdmanet::agent
