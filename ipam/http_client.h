// HTTP/1.0 POST over TCP or TLS, with one deadline for everything: name
// resolution, connect, TLS handshake, request and answer. It is what the etcd
// client (etcd.h) speaks to the members' JSON gateway: one connection per
// request, which the server closes after its answer.
//
// OpenSSL is linked statically (ipam/CMakeLists.txt): the node binary depends
// on glibc alone (tests/binary/elf_deps.sh).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "base/error.h"

struct ssl_ctx_st;  // OpenSSL's SSL_CTX

namespace rdmanet::ipam {

using Clock = std::chrono::steady_clock;

struct Endpoint {
  bool tls = false;
  std::string host;  // name or address, without brackets
  uint16_t port = 0;
  std::string url;  // as configured, for messages
};

// "http://127.0.0.1:2379", "https://etcd-0.example:2379", "https://[fd00::1]:2379";
// kInvalidConfig naming the URL otherwise.
Expected<Endpoint> parse_endpoint(const std::string& url);

struct TlsFiles {
  std::string ca;    // PEM file of the CA that signed the servers' certificates
  std::string cert;  // client certificate (PEM), for servers that ask for one
  std::string key;   // its private key (PEM)
  bool operator==(const TlsFiles&) const = default;
};

// What a TLS client verifies servers with, and shows them: the CA and the
// client certificate. Servers are checked against the endpoint's name or address.
class TlsContext {
 public:
  // Loads `files`; without `files.ca`, the node's distribution CA bundle.
  // kInvalidConfig naming the file that failed and `peer` ("the etcd CA ...").
  static Expected<TlsContext> load(const TlsFiles& files, const std::string& peer);

  ssl_ctx_st* native() const { return ctx_.get(); }

 private:
  struct Free {
    void operator()(ssl_ctx_st* ctx) const;
  };
  explicit TlsContext(ssl_ctx_st* ctx) : ctx_(ctx) {}
  std::unique_ptr<ssl_ctx_st, Free> ctx_;
};

struct HttpAnswer {
  int status = 0;  // 200, 503, ...
  std::string body;
};

// POSTs the JSON `body` to `path` on a new connection to `endpoint` (TLS with
// `tls` for https, which must then be set) and reads the whole answer, all by
// `deadline`. The name's resolution stops waiting at `resolve_by`; each of
// its addresses gets a share of the time left.
// Errors: kTryAgainLater for what another server may well not fail at (DNS,
// connect, TLS, a timeout, an answer that is cut short or not HTTP), with the
// step in the message ("connect: Connection refused"); kIo for an answer of
// more than 16 MiB, which no server this client talks to sends.
Expected<HttpAnswer> http_post(const Endpoint& endpoint, const TlsContext* tls,
                               const std::string& path, const std::string& body,
                               Clock::time_point deadline, Clock::time_point resolve_by);

// The deadline of one of `parts` attempts that share the time left until `deadline`.
Clock::time_point share_of(Clock::time_point deadline, size_t parts);

}  // namespace rdmanet::ipam
