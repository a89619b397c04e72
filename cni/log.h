// Logging: spdlog to stderr, plus the config's logFile. Never stdout: stdout
// carries the CNI result.
#pragma once

#include <string>

#include "cni/config.h"

namespace rdmanet::cni {

// Before the config is read: stderr only, warnings and errors.
void init_logging(const std::string& plugin);

// After the config is read: level from logLevel, and logFile when given. A
// log file that cannot be opened is reported on stderr and otherwise ignored:
// logging must never fail an attachment.
void configure_logging(const NetConf& conf, const std::string& context);

}  // namespace rdmanet::cni
