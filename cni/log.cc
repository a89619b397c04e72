#include "cni/log.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "base/files.h"

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

// Messages quote values a pod author controls (a MAC, an address, a GUID from
// annotations): control bytes in them are written as \xNN, so no value can
// forge a log line or send terminal escapes. Wraps the real sinks.
class EscapingSink final : public spdlog::sinks::sink {
 public:
  explicit EscapingSink(std::vector<spdlog::sink_ptr> inner) : inner_(std::move(inner)) {}

  void log(const spdlog::details::log_msg& msg) override {
    std::string escaped;
    const auto& text = msg.payload;
    for (size_t i = 0; i < text.size(); ++i) {
      auto c = static_cast<unsigned char>(text[i]);
      if (c < 0x20 || c == 0x7f) {
        if (escaped.empty()) {
          escaped.assign(text.data(), i);
        }
        char hex[5];
        std::snprintf(hex, sizeof hex, "\\x%02x", c);
        escaped += hex;
      } else if (!escaped.empty()) {
        escaped += static_cast<char>(c);
      }
    }
    spdlog::details::log_msg out = msg;
    if (!escaped.empty()) {
      out.payload = escaped;
    }
    for (auto& s : inner_) {
      if (s->should_log(out.level)) {
        s->log(out);
      }
    }
  }
  void flush() override {
    for (auto& s : inner_) {
      s->flush();
    }
  }
  void set_pattern(const std::string& pattern) override {
    for (auto& s : inner_) {
      s->set_pattern(pattern);
    }
  }
  void set_formatter(std::unique_ptr<spdlog::formatter> formatter) override {
    for (auto& s : inner_) {
      s->set_formatter(formatter->clone());
    }
  }

 private:
  std::vector<spdlog::sink_ptr> inner_;
};

void install(std::vector<spdlog::sink_ptr> inner, spdlog::level::level_enum level,
             const std::string& pattern) {
  std::vector<spdlog::sink_ptr> sinks = {std::make_shared<EscapingSink>(std::move(inner))};
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
    // Missing parents 0700 (spdlog would make them 0755). A failure here shows
    // as spdlog's, when it opens the file.
    if (size_t slash = conf.log_file.rfind('/'); slash != 0 && slash != std::string::npos) {
      (void)make_directories(conf.log_file.substr(0, slash), 0700);
    }
    try {
      // Private: the log names pods, netns paths and addresses.
      spdlog::file_event_handlers private_file;
      private_file.after_open = [](const spdlog::filename_t&, std::FILE* f) {
        (void)::fchmod(fileno(f), 0600);
      };
      sinks.push_back(
          std::make_shared<spdlog::sinks::basic_file_sink_st>(conf.log_file, false, private_file));
    } catch (const spdlog::spdlog_ex& e) {
      file_error = e.what();
    }
  }
  // The context comes from the call (network, container, ifname): a '%' in it must stay a
  // character, not become a pattern flag.
  std::string literal;
  for (char c : context) {
    literal += c == '%' ? std::string("%%") : std::string(1, c);
  }
  install(std::move(sinks), to_spdlog(conf.log_level),
          "%Y-%m-%dT%H:%M:%S.%e %l " + g_plugin + "[%P] " + literal + ": %v");
  if (!file_error.empty()) {
    spdlog::warn("cannot open logFile {}: {}", conf.log_file, file_error);
  }
}

}  // namespace rdmanet::cni
