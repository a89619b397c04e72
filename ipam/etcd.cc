#include "ipam/etcd.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/fd.h"
#include "base/hex.h"

namespace rdmanet::ipam {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

namespace {

// An etcd answer is a few KB (one key per address block); anything near this
// is not etcd.
constexpr size_t kMaxResponse = 16 << 20;

std::string openssl_error() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    std::array<char, 256> buf{};
    ERR_error_string_n(e, buf.data(), buf.size());
    out += out.empty() ? "" : "; ";
    out += buf.data();
  }
  return out.empty() ? "unknown TLS error" : out;
}

int remaining_ms(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() > 0 ? static_cast<int>(left.count()) : 0;
}

// The deadline for one of `parts` attempts that share the time left until `deadline`.
Clock::time_point share_of(Clock::time_point deadline, size_t parts) {
  auto now = Clock::now();
  return deadline <= now ? deadline : now + (deadline - now) / static_cast<long>(parts);
}

// Waits until `fd` is readable (or writable); false on timeout or error.
bool wait_fd(int fd, bool for_write, Clock::time_point deadline) {
  pollfd p{fd, static_cast<short>(for_write ? POLLOUT : POLLIN), 0};
  for (;;) {
    int n = poll(&p, 1, remaining_ms(deadline));
    if (n > 0) {
      return true;
    }
    if (n == 0 || errno != EINTR) {
      return false;
    }
  }
}

// A failed step of one attempt: `transient` failures move on to the next
// endpoint; the others end the call (a request etcd refuses is refused by every member).
struct Failure {
  std::string what;
  bool transient = true;
};

Expected<int64_t> to_int64(const json& v, const char* what) {
  int64_t n = 0;
  if (v.is_number_integer()) {
    return v.get<int64_t>();
  }
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    if (ec == std::errc() && p == s.data() + s.size()) {
      return n;
    }
  }
  return Error(ErrorKind::kIo, std::string("etcd answered a malformed ") + what);
}

}  // namespace

// The client's TLS context (CA, certificate and key), loaded once per client.
struct EtcdClient::Tls {
  SSL_CTX* ctx = nullptr;
  ~Tls() { SSL_CTX_free(ctx); }
};

Expected<EtcdEndpoint> parse_endpoint(const std::string& url) {
  EtcdEndpoint e;
  e.url = url;
  std::string rest;
  if (url.rfind("https://", 0) == 0) {
    e.tls = true;
    rest = url.substr(8);
  } else if (url.rfind("http://", 0) == 0) {
    rest = url.substr(7);
  } else {
    return Error(ErrorKind::kInvalidConfig, "\"" + url + "\" is not an http:// or https:// URL");
  }
  if (!rest.empty() && rest.back() == '/') {
    rest.pop_back();
  }
  size_t colon = rest.rfind(':');
  if (!rest.empty() && rest.front() == '[') {
    size_t close = rest.find(']');
    if (close == std::string::npos) {
      return Error(ErrorKind::kInvalidConfig, "\"" + url + "\" has an unclosed [");
    }
    e.host = rest.substr(1, close - 1);
    colon = close + 1 < rest.size() && rest[close + 1] == ':' ? close + 1 : std::string::npos;
  } else {
    e.host = rest.substr(0, colon);
  }
  if (colon == std::string::npos || rest.find('/') != std::string::npos || e.host.empty()) {
    return Error(ErrorKind::kInvalidConfig,
                 "\"" + url + "\" must be scheme://host:port with no path");
  }
  unsigned port = 0;
  auto digits = rest.substr(colon + 1);
  auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
  if (ec != std::errc() || p != digits.data() + digits.size() || port == 0 || port > 65535) {
    return Error(ErrorKind::kInvalidConfig, "\"" + url + "\" has no valid port");
  }
  e.port = static_cast<uint16_t>(port);
  return e;
}

EtcdClient::EtcdClient(std::vector<EtcdEndpoint> endpoints, EtcdTls tls,
                       std::chrono::milliseconds timeout)
    : endpoints_(std::move(endpoints)), tls_files_(std::move(tls)), timeout_(timeout) {
  // Spread the first attempts of many nodes over the members.
  if (!endpoints_.empty()) {
    next_ = static_cast<size_t>(getpid()) % endpoints_.size();
  }
}
EtcdClient::~EtcdClient() = default;
EtcdClient::EtcdClient(EtcdClient&&) noexcept = default;
EtcdClient& EtcdClient::operator=(EtcdClient&&) noexcept = default;

namespace {

// The addresses of an endpoint, owned; filled by a resolver thread.
struct Resolution {
  std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;
  int rc = 0;
  addrinfo* list = nullptr;
  Resolution() = default;
  Resolution(const Resolution&) = delete;
  Resolution& operator=(const Resolution&) = delete;
  ~Resolution() {
    if (list != nullptr) {
      freeaddrinfo(list);
    }
  }
};

// Resolves the endpoint by the deadline. getaddrinfo has no timeout of its own
// (a resolver that does not answer costs resolv.conf's timeout x attempts x
// servers, 10 s and more by default), so a name is resolved on a thread of its
// own and the call stops waiting at the deadline, leaving that thread to end by
// itself (the plugin process is short-lived). Address literals need no thread.
std::pair<std::shared_ptr<Resolution>, std::optional<Failure>> resolve(const EtcdEndpoint& e,
                                                                       Clock::time_point deadline) {
  auto r = std::make_shared<Resolution>();
  auto run = [r, host = e.host, port = std::to_string(e.port)](int flags) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV | flags;
    addrinfo* list = nullptr;
    int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &list);
    std::lock_guard lock(r->mutex);
    r->rc = rc;
    r->list = list;
    r->done = true;
    r->done_cv.notify_one();
  };
  run(AI_NUMERICHOST);
  if (r->rc == EAI_NONAME) {
    r->done = false;
    std::thread(run, 0).detach();
    std::unique_lock lock(r->mutex);
    if (!r->done_cv.wait_until(lock, deadline, [&] { return r->done; })) {
      return {nullptr, Failure{"cannot resolve: timed out"}};
    }
  }
  if (r->rc != 0) {
    return {nullptr, Failure{std::string("cannot resolve: ") + gai_strerror(r->rc)}};
  }
  return {r, std::nullopt};
}

// One HTTP/1.0 request over one connection: the server closes it after the answer,
// so the answer is everything read until EOF (or Content-Length).
class Connection {
 public:
  // `resolve_by`: when to stop waiting for the name's addresses (a share of the
  // call's time, so one name whose DNS does not answer leaves time for the others).
  Connection(const EtcdEndpoint& e, SSL_CTX* ctx, Clock::time_point deadline,
             Clock::time_point resolve_by)
      : e_(e), ctx_(ctx), deadline_(deadline), resolve_by_(resolve_by) {}
  ~Connection() {
    if (ssl_ != nullptr) {
      SSL_free(ssl_);
    }
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  std::optional<Failure> open() {
    auto [resolved, failed] = resolve(e_, resolve_by_);
    if (failed) {
      return failed;
    }
    size_t left = 0;
    for (addrinfo* ai = resolved->list; ai != nullptr; ai = ai->ai_next) {
      ++left;
    }
    std::string last = "no address";
    for (addrinfo* ai = resolved->list; ai != nullptr; ai = ai->ai_next, --left) {
      // Each address gets its share of the time left: an unreachable first one
      // (an AAAA record without a route) must not use it all.
      Clock::time_point until = share_of(deadline_, left);
      Fd fd(socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
      if (!fd.valid()) {
        last = std::strerror(errno);
        continue;
      }
      int one = 1;
      setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      if (connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
        last = std::string("connect: ") + std::strerror(errno);
        continue;
      }
      if (!wait_fd(fd.get(), true, until)) {
        last = "connect: timed out";
        continue;
      }
      int err = 0;
      socklen_t len = sizeof err;
      getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) {
        last = std::string("connect: ") + std::strerror(err);
        continue;
      }
      fd_ = std::move(fd);
      break;
    }
    if (!fd_.valid()) {
      return Failure{last};
    }
    return e_.tls ? handshake() : std::nullopt;
  }

  std::optional<Failure> write_all(const std::string& data) {
    size_t done = 0;
    while (done < data.size()) {
      ssize_t n = 0;
      if (ssl_ != nullptr) {
        ERR_clear_error();
        int rc = SSL_write(ssl_, data.data() + done, static_cast<int>(data.size() - done));
        if (rc <= 0) {
          if (auto f = tls_wait(rc, "write")) {
            return f;
          }
          continue;
        }
        n = rc;
      } else {
        n = send(fd_.get(), data.data() + done, data.size() - done, MSG_NOSIGNAL);
        if (n < 0) {
          if ((errno == EAGAIN || errno == EINTR) && wait_fd(fd_.get(), true, deadline_)) {
            continue;
          }
          return Failure{std::string("send: ") + (errno == EAGAIN ? "timed out" : strerror(errno))};
        }
      }
      done += static_cast<size_t>(n);
    }
    return std::nullopt;
  }

  // Reads until the peer closes; false with *failure set on errors.
  std::optional<Failure> read_all(std::string* out) {
    std::array<char, 16384> buf{};
    for (;;) {
      ssize_t n = 0;
      if (ssl_ != nullptr) {
        ERR_clear_error();
        errno = 0;
        int rc = SSL_read(ssl_, buf.data(), static_cast<int>(buf.size()));
        if (rc <= 0) {
          int err = SSL_get_error(ssl_, rc);
          // close_notify, or a plain close after the answer (not a reset: errno set).
          if (err == SSL_ERROR_ZERO_RETURN ||
              (err == SSL_ERROR_SYSCALL && ERR_peek_error() == 0 && errno == 0)) {
            return std::nullopt;
          }
          if (auto f = tls_wait(rc, "read")) {
            return f;
          }
          continue;
        }
        n = rc;
      } else {
        n = recv(fd_.get(), buf.data(), buf.size(), 0);
        if (n == 0) {
          return std::nullopt;
        }
        if (n < 0) {
          if ((errno == EAGAIN || errno == EINTR) && wait_fd(fd_.get(), false, deadline_)) {
            continue;
          }
          return Failure{std::string("recv: ") + (errno == EAGAIN ? "timed out" : strerror(errno))};
        }
      }
      out->append(buf.data(), static_cast<size_t>(n));
      if (out->size() > kMaxResponse) {
        return Failure{"answer larger than 16 MiB", false};
      }
    }
  }

 private:
  std::optional<Failure> handshake() {
    ssl_ = SSL_new(ctx_);
    if (ssl_ == nullptr || SSL_set_fd(ssl_, fd_.get()) != 1) {
      return Failure{"TLS: " + openssl_error()};
    }
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl_);
    in6_addr any{};
    bool is_ip = inet_pton(AF_INET, e_.host.c_str(), &any) == 1 ||
                 inet_pton(AF_INET6, e_.host.c_str(), &any) == 1;
    // Without the name or address to check, any certificate of the CA would do.
    if (is_ip ? X509_VERIFY_PARAM_set1_ip_asc(param, e_.host.c_str()) != 1
              : SSL_set_tlsext_host_name(ssl_, e_.host.c_str()) != 1 ||
                    X509_VERIFY_PARAM_set1_host(param, e_.host.c_str(), 0) != 1) {
      return Failure{"TLS: cannot set the name to verify: " + openssl_error()};
    }
    for (;;) {
      ERR_clear_error();
      int rc = SSL_connect(ssl_);
      if (rc == 1) {
        return std::nullopt;
      }
      if (SSL_get_verify_result(ssl_) != X509_V_OK) {
        return Failure{std::string("TLS: server certificate rejected: ") +
                       X509_verify_cert_error_string(SSL_get_verify_result(ssl_))};
      }
      if (auto f = tls_wait(rc, "handshake")) {
        return f;
      }
    }
  }

  // After an SSL call returned rc <= 0: waits for the socket when OpenSSL asks
  // to; otherwise (or on timeout) the failure.
  std::optional<Failure> tls_wait(int rc, const char* step) {
    int err = SSL_get_error(ssl_, rc);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
      if (wait_fd(fd_.get(), err == SSL_ERROR_WANT_WRITE, deadline_)) {
        return std::nullopt;
      }
      return Failure{std::string("TLS ") + step + ": timed out"};
    }
    if (err == SSL_ERROR_SYSCALL && errno != 0) {
      return Failure{std::string("TLS ") + step + ": " + std::strerror(errno)};
    }
    return Failure{std::string("TLS ") + step + ": " + openssl_error()};
  }

  const EtcdEndpoint& e_;
  SSL_CTX* ctx_;
  Clock::time_point deadline_;
  Clock::time_point resolve_by_;
  Fd fd_;
  SSL* ssl_ = nullptr;
};

// SIGPIPE (a member closing the connection mid-write) is blocked for the call
// and a pending one discarded, instead of ignoring it process-wide.
class BlockSigpipe {
 public:
  BlockSigpipe() {
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe, &old_);
  }
  ~BlockSigpipe() {
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    timespec zero{};
    while (sigtimedwait(&pipe, nullptr, &zero) > 0) {
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  BlockSigpipe(const BlockSigpipe&) = delete;
  BlockSigpipe& operator=(const BlockSigpipe&) = delete;

 private:
  sigset_t old_{};
};

// The CA bundle of the node's distribution, when the config names none. Not
// OpenSSL's built-in default: that is the build machine's OPENSSLDIR (Debian's
// /usr/lib/ssl), which other distributions do not have.
std::string system_ca_bundle() {
  for (const char* path : {"/etc/ssl/certs/ca-certificates.crt",  // Debian, Ubuntu, Arch, Gentoo
                           "/etc/pki/tls/certs/ca-bundle.crt",    // RHEL, Fedora, Amazon Linux
                           "/etc/ssl/ca-bundle.pem",              // SUSE
                           "/etc/ssl/cert.pem"}) {                // Alpine, Flatcar
    if (access(path, R_OK) == 0) {
      return path;
    }
  }
  return "";
}

// Splits "HTTP/1.0 200 OK\r\n...\r\n\r\nbody".
std::optional<Failure> parse_http(const std::string& raw, int* status, std::string* body) {
  size_t end = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/1.", 0) != 0 || end == std::string::npos || raw.size() < 12) {
    return Failure{"not an HTTP answer"};
  }
  auto [p, ec] = std::from_chars(raw.data() + 9, raw.data() + 12, *status);
  if (ec != std::errc()) {
    return Failure{"not an HTTP answer"};
  }
  *body = raw.substr(end + 4);
  // Without a Content-Length the answer ends with the connection; with one, a
  // shorter body is an answer cut short (a member dying mid-answer): retried.
  std::string head = raw.substr(0, end);
  std::transform(head.begin(), head.end(), head.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (size_t at = head.find("\r\ncontent-length:"); at != std::string::npos) {
    size_t from = head.find_first_not_of(' ', at + 17);
    size_t length = 0;
    auto [p2, ec2] = std::from_chars(head.data() + std::min(from, head.size()),
                                     head.data() + head.size(), length);
    if (ec2 != std::errc() || body->size() != length) {
      return Failure{"answer cut short (" + std::to_string(body->size()) + " of " +
                     std::to_string(length) + " bytes)"};
    }
  }
  return std::nullopt;
}

}  // namespace

Expected<std::string> EtcdClient::call(const std::string& path, const std::string& body) {
  if (endpoints_.empty()) {
    return Error(ErrorKind::kInvalidConfig, "no etcd endpoints configured");
  }
  auto deadline = Clock::now() + timeout_;
  BlockSigpipe no_sigpipe;
  std::vector<std::string> last(endpoints_.size());
  for (int round = 0;; ++round) {
    for (size_t i = 0; i < endpoints_.size(); ++i) {
      size_t at = (next_ + i) % endpoints_.size();
      const EtcdEndpoint& e = endpoints_[at];
      if (e.tls && !tls_) {
        OPENSSL_init_ssl(OPENSSL_INIT_NO_LOAD_CONFIG, nullptr);
        auto tls = std::make_unique<Tls>();
        tls->ctx = SSL_CTX_new(TLS_client_method());
        if (tls->ctx == nullptr) {
          return Error(ErrorKind::kIo, "TLS: " + openssl_error());
        }
        SSL_CTX_set_min_proto_version(tls->ctx, TLS1_2_VERSION);
        SSL_CTX_set_verify(tls->ctx, SSL_VERIFY_PEER, nullptr);
        std::string ca = tls_files_.ca.empty() ? system_ca_bundle() : tls_files_.ca;
        bool ca_ok = ca.empty() ? SSL_CTX_set_default_verify_paths(tls->ctx) == 1
                                : SSL_CTX_load_verify_locations(tls->ctx, ca.c_str(), nullptr) == 1;
        if (!ca_ok) {
          return Error(ErrorKind::kInvalidConfig, "cannot load the etcd CA " +
                                                      (ca.empty() ? "(OpenSSL's defaults)" : ca) +
                                                      ": " + openssl_error());
        }
        if (!tls_files_.cert.empty()) {
          if (SSL_CTX_use_certificate_chain_file(tls->ctx, tls_files_.cert.c_str()) != 1) {
            return Error(ErrorKind::kInvalidConfig, "cannot load the etcd client certificate " +
                                                        tls_files_.cert + ": " + openssl_error());
          }
          if (SSL_CTX_use_PrivateKey_file(tls->ctx, tls_files_.key.c_str(), SSL_FILETYPE_PEM) !=
                  1 ||
              SSL_CTX_check_private_key(tls->ctx) != 1) {
            return Error(ErrorKind::kInvalidConfig, "cannot load the etcd client key " +
                                                        tls_files_.key + ": " + openssl_error());
          }
        }
        tls_ = std::move(tls);
      }
      Connection conn(e, e.tls ? tls_->ctx : nullptr, deadline,
                      share_of(deadline, endpoints_.size() - i));
      std::string request =
          "POST " + path + " HTTP/1.0\r\nHost: " + e.host +
          "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
          "\r\n\r\n" + body;
      std::string raw;
      int status = 0;
      std::string answer;
      std::optional<Failure> failed = conn.open();
      if (!failed) {
        failed = conn.write_all(request);
      }
      if (!failed) {
        failed = conn.read_all(&raw);
      }
      if (!failed) {
        failed = parse_http(raw, &status, &answer);
      }
      if (!failed && status == 200) {
        next_ = at;  // a member that answers is asked first next time
        return answer;
      }
      if (!failed) {
        // grpc-gateway: {"error": ..., "message": ..., "code": <grpc code>}; 5xx is
        // unavailable / deadline exceeded / internal (no leader, leader changed).
        json doc = json::parse(answer, nullptr, false);
        std::string message =
            doc.is_object() && doc.contains("message") && doc["message"].is_string()
                ? doc["message"].get<std::string>()
                : answer.substr(0, 200);
        failed = Failure{"HTTP " + std::to_string(status) + ": " + message, status >= 500};
      }
      last[at] = failed->what;
      spdlog::debug("etcd {} {}: {}", e.url, path, failed->what);
      if (!failed->transient) {
        return Error(ErrorKind::kIo, "etcd " + e.url + " refused " + path + ": " + failed->what);
      }
      if (remaining_ms(deadline) == 0) {
        std::string all;
        for (size_t k = 0; k < endpoints_.size(); ++k) {
          all += (k ? "; " : "") + endpoints_[k].url + ": " +
                 (last[k].empty() ? "not tried" : last[k]);
        }
        return Error(
            ErrorKind::kTryAgainLater,
            "etcd unreachable for " + std::to_string(timeout_.count()) + " ms (" + all + ")");
      }
    }
    // Every member failed this round (an election takes ~1 s at most): back off a
    // little, never past the deadline.
    std::this_thread::sleep_for(std::chrono::milliseconds(
        std::min<long long>(std::min(50 * (round + 1), 250), remaining_ms(deadline))));
  }
}

namespace {

json compare_json(const Compare& c) {
  json out = {{"key", base64_encode(c.key)}, {"result", "EQUAL"}};
  if (c.target == Compare::Target::kCreateRevision) {
    out["target"] = "CREATE";
    out["create_revision"] = std::to_string(c.revision);
  } else {
    out["target"] = "MOD";
    out["mod_revision"] = std::to_string(c.revision);
  }
  return out;
}

json op_json(const Op& op) {
  if (op.put_value) {
    return {
        {"request_put", {{"key", base64_encode(op.key)}, {"value", base64_encode(*op.put_value)}}}};
  }
  return {{"request_delete_range", {{"key", base64_encode(op.key)}}}};
}

}  // namespace

Expected<std::vector<KeyValue>> EtcdClient::range(const std::string& key,
                                                  const std::string& range_end) {
  json req = {{"key", base64_encode(key)}};
  if (!range_end.empty()) {
    req["range_end"] = base64_encode(range_end);
  }
  auto body = call("/v3/kv/range", req.dump());
  if (!body) {
    return std::move(body).error();
  }
  return decode_range_response(*body);
}

Expected<TxnResult> EtcdClient::txn(const std::vector<Compare>& compare,
                                    const std::vector<Op>& success) {
  json req = {{"compare", json::array()}, {"success", json::array()}};
  for (const auto& c : compare) {
    req["compare"].push_back(compare_json(c));
  }
  for (const auto& op : success) {
    req["success"].push_back(op_json(op));
  }
  auto body = call("/v3/kv/txn", req.dump());
  if (!body) {
    return std::move(body).error();
  }
  return decode_txn_response(*body);
}

std::string EtcdClient::prefix_end(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    auto& last = end.back();
    if (static_cast<unsigned char>(last) < 0xff) {
      ++last;
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

namespace {

Expected<int64_t> header_revision(const json& doc) {
  if (!doc.contains("header") || !doc["header"].is_object() ||
      !doc["header"].contains("revision")) {
    return Error(ErrorKind::kIo, "etcd answered without a header revision");
  }
  return to_int64(doc["header"]["revision"], "header revision");
}

}  // namespace

Expected<std::vector<KeyValue>> decode_range_response(const std::string& body) {
  json doc = json::parse(body, nullptr, false);
  if (!doc.is_object()) {
    return Error(ErrorKind::kIo, "etcd answered a range with something that is not JSON");
  }
  if (auto rev = header_revision(doc); !rev) {
    return std::move(rev).error();
  }
  std::vector<KeyValue> out;
  if (!doc.contains("kvs")) {
    return out;  // no key: the gateway omits the empty list
  }
  if (!doc["kvs"].is_array()) {
    return Error(ErrorKind::kIo, "etcd answered a range whose kvs is not a list");
  }
  for (const auto& item : doc["kvs"]) {
    if (!item.is_object() || !item.contains("key") || !item["key"].is_string()) {
      return Error(ErrorKind::kIo, "etcd answered a range entry without a key");
    }
    KeyValue kv;
    auto key = base64_decode(item["key"].get<std::string>());
    std::optional<std::string> value = std::string();
    if (item.contains("value")) {
      value = item["value"].is_string() ? base64_decode(item["value"].get<std::string>())
                                        : std::nullopt;
    }
    if (!key || !value) {
      return Error(ErrorKind::kIo, "etcd answered a range entry that is not base64");
    }
    kv.key = std::move(*key);
    kv.value = std::move(*value);
    for (auto [field, dest] : {std::pair{"create_revision", &kv.create_revision},
                               std::pair{"mod_revision", &kv.mod_revision}}) {
      if (item.contains(field)) {
        auto n = to_int64(item[field], field);
        if (!n) {
          return std::move(n).error();
        }
        *dest = *n;
      }
    }
    out.push_back(std::move(kv));
  }
  return out;
}

Expected<TxnResult> decode_txn_response(const std::string& body) {
  json doc = json::parse(body, nullptr, false);
  if (!doc.is_object()) {
    return Error(ErrorKind::kIo, "etcd answered a txn with something that is not JSON");
  }
  auto rev = header_revision(doc);
  if (!rev) {
    return std::move(rev).error();
  }
  TxnResult out;
  out.revision = *rev;
  if (doc.contains("succeeded")) {
    if (!doc["succeeded"].is_boolean()) {
      return Error(ErrorKind::kIo, "etcd answered a txn whose succeeded is not a boolean");
    }
    out.succeeded = doc["succeeded"].get<bool>();
  }
  return out;
}

namespace {}

}  // namespace rdmanet::ipam
