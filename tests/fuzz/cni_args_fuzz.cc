// Fuzz target: CNI_ARGS ("K=V;K=V"), as the runtime passes it in the environment.
#include <cstddef>
#include <cstdint>
#include <string>

#include "cni/env.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  (void)rdmanet::cni::parse_cni_args(text, {"MAC", "IP"});
  return 0;
}
