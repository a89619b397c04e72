#include "cni/log.h"

#include <fcntl.h>
#include <spdlog/details/null_mutex.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/fd.h"
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

// Appends each line to a file descriptor with one write(2), as O_APPEND makes atomic.
class FdSink final : public spdlog::sinks::base_sink<spdlog::details::null_mutex> {
 public:
  explicit FdSink(Fd fd) : fd_(std::move(fd)) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t line;
    formatter_->format(msg, line);
    (void)!::write(fd_.get(), line.data(), line.size());  // a log line lost is no failure
  }
  void flush_() override {}

 private:
  Fd fd_;
};

// The logFile, opened for appending without following a symlink at the path and without
// blocking on a FIFO; only a file made here is set to 0600 (an existing regular file is
// appended to as it is: root must not change the mode of a file someone else put there).
Expected<Fd> open_log_file(const std::string& path) {
  Fd fd(::open(path.c_str(),
               O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600));
  bool created = fd.valid();
  if (!created && errno == EEXIST) {
    fd.reset(::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  }
  if (!fd.valid()) {
    return Error(ErrorKind::kIo, "open " + path + ": " + std::strerror(errno) +
                                     (errno == ELOOP ? " (a symlink is refused)" : ""));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return Error(ErrorKind::kIo, path + " is not a regular file");
  }
  if (created) {
    (void)::fchmod(fd.get(), 0600);  // exactly, whatever the umask
  }
  int flags = ::fcntl(fd.get(), F_GETFL);
  (void)::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

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
    // Missing parents 0700. A failure here shows when the file is opened, next.
    if (size_t slash = conf.log_file.rfind('/'); slash != 0 && slash != std::string::npos) {
      (void)make_directories(conf.log_file.substr(0, slash), 0700);
    }
    // Private: the log names pods, netns paths and addresses.
    if (auto fd = open_log_file(conf.log_file); fd) {
      sinks.push_back(std::make_shared<FdSink>(std::move(*fd)));
    } else {
      file_error = fd.error().msg();
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
