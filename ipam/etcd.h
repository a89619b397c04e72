// A small etcd v3 client for cluster-mode IPAM (see cluster.h): the KV range
// and txn calls of etcd's HTTP/JSON gateway (POST /v3/kv/range, /v3/kv/txn;
// keys and values base64, 64-bit numbers as strings), over the HTTP client of
// http_client.h.
//
// Why the JSON gateway and not gRPC: rdmanet-ipam is a short-lived CNI binary
// that makes one or two calls when its node needs a new address block, and it
// must depend on nothing but glibc (tests/binary/elf_deps.sh). The gateway needs an
// HTTP/1.0 request and OpenSSL, which links statically; gRPC would bring
// protobuf, abseil and c-ares for the same two calls.
//
// Every call has one deadline for everything (DNS, connect, TLS handshake,
// request, answer) across all endpoints. A member that refuses, times out,
// answers 5xx or "unavailable" (no leader during an election) is skipped for
// the next one, round after round, until the deadline: then the call fails
// with kTryAgainLater naming every endpoint and its last error.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "ipam/http_client.h"
#include "ipam/kv_store.h"

namespace rdmanet::ipam {

class EtcdClient final : public KvStore {
 public:
  EtcdClient(std::vector<Endpoint> endpoints, TlsFiles tls, std::chrono::milliseconds timeout);

  Expected<std::vector<KeyValue>> range(const std::string& key,
                                        const std::string& range_end) override;
  Expected<TxnResult> txn(const std::vector<Compare>& compare,
                          const std::vector<Op>& success) override;
  // A lease of `ttl_seconds` (POST /v3/lease/grant): its ID.
  Expected<int64_t> lease_grant(int ttl_seconds);
  // Puts key = value attached to `lease` (POST /v3/kv/put); the key goes when the lease
  // expires.
  Status put_with_lease(const std::string& key, const std::string& value, int64_t lease);

 private:
  // POSTs `body` to `path` on the members in turn until one answers 200; its body.
  Expected<std::string> call(const std::string& path, const std::string& body);

  std::vector<Endpoint> endpoints_;
  TlsFiles tls_files_;
  std::chrono::milliseconds timeout_;
  std::optional<TlsContext> tls_;  // loaded on first use over https
  size_t next_ = 0;                // the endpoint to try first
};

// Decoders of the gateway's answers (exposed for tests and the fuzzer).
Expected<std::vector<KeyValue>> decode_range_response(const std::string& body);
Expected<TxnResult> decode_txn_response(const std::string& body);

}  // namespace rdmanet::ipam
