#include "ipam/http_client.h"

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
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>

#include "base/fd.h"

namespace rdmanet::ipam {

namespace {

// An etcd answer is a few KB (one key per address block); anything near this
// is not etcd.
constexpr size_t kMaxAnswer = 16 << 20;

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

// A failed step of one request: `transient` failures are worth trying on another
// server; the others are not.
struct Failure {
  std::string what;
  bool transient = true;
};

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
std::pair<std::shared_ptr<Resolution>, std::optional<Failure>> resolve(const Endpoint& e,
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
  Connection(const Endpoint& e, SSL_CTX* ctx, Clock::time_point deadline,
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

  // Reads the whole answer: until the peer closes the connection.
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
      if (out->size() > kMaxAnswer) {
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

  const Endpoint& e_;
  SSL_CTX* ctx_;
  Clock::time_point deadline_;
  Clock::time_point resolve_by_;
  Fd fd_;
  SSL* ssl_ = nullptr;
};

// SIGPIPE (a server closing the connection mid-write) is blocked for the request
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
  // shorter body is an answer cut short (a server dying mid-answer): a failure.
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

Clock::time_point share_of(Clock::time_point deadline, size_t parts) {
  auto now = Clock::now();
  return deadline <= now ? deadline : now + (deadline - now) / static_cast<long>(parts);
}

Expected<Endpoint> parse_endpoint(const std::string& url) {
  Endpoint e;
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

void TlsContext::Free::operator()(ssl_ctx_st* ctx) const { SSL_CTX_free(ctx); }

Expected<TlsContext> TlsContext::load(const TlsFiles& files, const std::string& peer) {
  OPENSSL_init_ssl(OPENSSL_INIT_NO_LOAD_CONFIG, nullptr);
  SSL_CTX* raw = SSL_CTX_new(TLS_client_method());
  if (raw == nullptr) {
    return Error(ErrorKind::kIo, "TLS: " + openssl_error());
  }
  TlsContext tls(raw);
  SSL_CTX_set_min_proto_version(raw, TLS1_2_VERSION);
  SSL_CTX_set_verify(raw, SSL_VERIFY_PEER, nullptr);
  std::string ca = files.ca.empty() ? system_ca_bundle() : files.ca;
  bool ca_ok = ca.empty() ? SSL_CTX_set_default_verify_paths(raw) == 1
                          : SSL_CTX_load_verify_locations(raw, ca.c_str(), nullptr) == 1;
  if (!ca_ok) {
    return Error(ErrorKind::kInvalidConfig, "cannot load the " + peer + " CA " +
                                                (ca.empty() ? "(OpenSSL's defaults)" : ca) + ": " +
                                                openssl_error());
  }
  if (!files.cert.empty()) {
    if (SSL_CTX_use_certificate_chain_file(raw, files.cert.c_str()) != 1) {
      return Error(ErrorKind::kInvalidConfig, "cannot load the " + peer + " client certificate " +
                                                  files.cert + ": " + openssl_error());
    }
    if (SSL_CTX_use_PrivateKey_file(raw, files.key.c_str(), SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(raw) != 1) {
      return Error(ErrorKind::kInvalidConfig,
                   "cannot load the " + peer + " client key " + files.key + ": " + openssl_error());
    }
  }
  return tls;
}

Expected<HttpAnswer> http_post(const Endpoint& endpoint, const TlsContext* tls,
                               const std::string& path, const std::string& body,
                               Clock::time_point deadline, Clock::time_point resolve_by) {
  if (endpoint.tls && tls == nullptr) {
    return Error(ErrorKind::kInternal, "https endpoint " + endpoint.url + " without a TLS context");
  }
  BlockSigpipe no_sigpipe;
  Connection conn(endpoint, endpoint.tls ? tls->native() : nullptr, deadline, resolve_by);
  std::string request =
      "POST " + path + " HTTP/1.0\r\nHost: " + endpoint.host +
      "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\n\r\n" + body;
  std::string raw;
  HttpAnswer answer;
  std::optional<Failure> failed = conn.open();
  if (!failed) {
    failed = conn.write_all(request);
  }
  if (!failed) {
    failed = conn.read_all(&raw);
  }
  if (!failed) {
    failed = parse_http(raw, &answer.status, &answer.body);
  }
  if (failed) {
    return Error(failed->transient ? ErrorKind::kTryAgainLater : ErrorKind::kIo, failed->what);
  }
  return answer;
}

}  // namespace rdmanet::ipam
