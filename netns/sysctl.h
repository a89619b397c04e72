// Per-interface sysctls through /proc/sys. /proc/sys/net shows the network namespace of the
// thread that opens the file, so call these inside the interface's namespace (in_netns).
#pragma once

#include <string>

#include "base/error.h"

namespace rdmanet::netns {

// "net/ipv4/conf/<ifname>/<setting>" (or ipv6), after checking both are plain names so the
// key cannot leave /proc/sys/net.
Expected<std::string> ipv4_conf_key(const std::string& ifname, const std::string& setting);
Expected<std::string> ipv6_conf_key(const std::string& ifname, const std::string& setting);

// The value of /proc/sys/<key>, without the trailing newline.
Expected<std::string> read_sysctl(const std::string& key);
// Writes value to /proc/sys/<key> and returns the value it replaced, for the undo.
Expected<std::string> write_sysctl(const std::string& key, const std::string& value);

}  // namespace rdmanet::netns
