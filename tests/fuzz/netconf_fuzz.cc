// Fuzz target: a network config on stdin, through every parser that reads it (the shared
// NetConf, rdmanet's keys, rdmanet-ipam's section). Anything but a crash, a sanitizer
// report or a hang is fine: malformed input must come back as an error.
#include <cstddef>
#include <cstdint>
#include <string>

#include "cni/config.h"
#include "ipam/config.h"
#include "plugin/conf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto net = rdmanet::cni::parse_netconf(std::string(reinterpret_cast<const char*>(data), size));
  if (!net) {
    return 0;
  }
  (void)rdmanet::plugin::load_conf(*net, {});
  (void)rdmanet::ipam::parse_ipam_config(net->ipam);
  return 0;
}
