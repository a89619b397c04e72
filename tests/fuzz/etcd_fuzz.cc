// Fuzz target: what an etcd member (or anything answering on its port) sends
// back to rdmanet-ipam: the JSON gateway's range and txn answers, the base64
// inside them, and endpoint URLs from the config.
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/hex.h"
#include "ipam/etcd.h"
#include "ipam/http_client.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  (void)rdmanet::ipam::decode_range_response(text);
  (void)rdmanet::ipam::decode_txn_response(text);
  if (auto bytes = rdmanet::base64_decode(text)) {
    if (rdmanet::base64_encode(*bytes) != text) {
      __builtin_trap();  // decode then encode must give the text back
    }
  }
  (void)rdmanet::ipam::parse_endpoint(text);
  return 0;
}
