#include "cni/log.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <vector>

namespace rdmanet::cni {

namespace {

std::string g_plugin = "rdmanet";

spdlog::level::level_enum to_spdlog(LogLevel level) {
  switch (level) {
    case LogLevel::kError:
      return spdlog::level::err;
    case LogLevel::kWarning:
      return spdlog::level::warn;
    case LogLevel::kInfo:
      return spdlog::level::info;
    case LogLevel::kDebug:
      return spdlog::level::debug;
    case LogLevel::kTrace:
      return spdlog::level::trace;
  }
  return spdlog::level::warn;
}

void install(std::vector<spdlog::sink_ptr> sinks, spdlog::level::level_enum level,
             const std::string& pattern) {
  auto logger = std::make_shared<spdlog::logger>(g_plugin, sinks.begin(), sinks.end());
  logger->set_level(level);
  logger->set_pattern(pattern);
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(std::move(logger));
}

}  // namespace

void init_logging(const std::string& plugin) {
  g_plugin = plugin;
  install({std::make_shared<spdlog::sinks::stderr_sink_st>()}, spdlog::level::warn,
          "%Y-%m-%dT%H:%M:%S.%e %l " + plugin + ": %v");
}

void configure_logging(const NetConf& conf, const std::string& context) {
  std::vector<spdlog::sink_ptr> sinks = {std::make_shared<spdlog::sinks::stderr_sink_st>()};
  std::string file_error;
  if (!conf.log_file.empty()) {
    try {
      sinks.push_back(std::make_shared<spdlog::sinks::basic_file_sink_st>(conf.log_file));
    } catch (const spdlog::spdlog_ex& e) {
      file_error = e.what();
    }
  }
  install(std::move(sinks), to_spdlog(conf.log_level),
          "%Y-%m-%dT%H:%M:%S.%e %l " + g_plugin + "[%P] " + context + ": %v");
  if (!file_error.empty()) {
    spdlog::warn("cannot open logFile {}: {}", conf.log_file, file_error);
  }
}

}  // namespace rdmanet::cni
