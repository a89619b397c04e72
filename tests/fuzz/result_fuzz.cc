// Fuzz target: a CNI result (prevResult, a delegated IPAM plugin's stdout), decoded as
// every spec version; what decodes is encoded again and decoded once more, which must work
// (a result rdmanet writes, it must be able to read).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "cni/result.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto doc =
      nlohmann::json::parse(std::string(reinterpret_cast<const char*>(data), size), nullptr, false);
  if (doc.is_discarded()) {
    return 0;
  }
  for (const char* version : {"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"}) {
    auto result = rdmanet::cni::decode_result(doc, version, "result");
    if (!result) {
      continue;
    }
    auto again = rdmanet::cni::decode_result(rdmanet::cni::encode_result(*result, version), version,
                                             "result");
    if (!again) {
      abort();  // rdmanet wrote a result it cannot read back
    }
  }
  return 0;
}
