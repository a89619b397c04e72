#include "agent/metrics_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace rdmanet::agent {

namespace {

using Clock = std::chrono::steady_clock;

Expected<Fd> listen_on(const std::string& where, int* port) {
  size_t colon = where.rfind(':');
  std::string host = colon == std::string::npos ? "" : where.substr(0, colon);
  std::string text = colon == std::string::npos ? where : where.substr(colon + 1);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  char* end = nullptr;
  long p = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || p < 0 || p > 65535 ||
      (!host.empty() && ::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1)) {
    return Error(ErrorKind::kInvalidConfig,
                 "--listen wants IPv4-ADDRESS:PORT or :PORT, not \"" + where + "\"");
  }
  addr.sin_port = htons(static_cast<uint16_t>(p));
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  socklen_t len = sizeof(addr);
  if (fd.get() < 0 || ::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(fd.get(), 64) != 0 ||
      ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return Error(ErrorKind::kIo, "cannot listen on " + where + ": " + std::strerror(errno));
  }
  *port = ntohs(addr.sin_port);
  return fd;
}

// The answer to a request line: GET /metrics, GET /healthz, anything else 404.
std::string response_to(const std::string& line, const AgentStatus& status) {
  std::string code = "404 Not Found";
  std::string type = "text/plain; charset=utf-8";
  std::string body = "not found\n";
  if (line.rfind("GET /metrics ", 0) == 0) {
    code = "200 OK";
    type = "text/plain; version=0.0.4; charset=utf-8";
    body = status.metrics;
  } else if (line.rfind("GET /healthz ", 0) == 0) {
    code = status.healthy ? "200 OK" : "503 Service Unavailable";
    body = status.healthy ? "ok\n" : "no round finished in the last three intervals\n";
  }
  return "HTTP/1.1 " + code + "\r\nContent-Type: " + type +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" +
         body;
}

struct Connection {
  Fd fd;
  std::string request;
  Clock::time_point deadline;
};

// Sends what the socket takes within a moment (answers are small: the socket buffer holds
// them); a client that reads nothing loses its answer, never the server's time.
void answer(Connection& c, const std::string& response) {
  size_t sent = 0;
  const auto until = Clock::now() + std::chrono::milliseconds(200);
  while (sent < response.size() && Clock::now() < until) {
    ssize_t n = ::send(c.fd.get(), response.data() + sent, response.size() - sent,
                       MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else if (n < 0 && errno == EAGAIN) {
      pollfd p{c.fd.get(), POLLOUT, 0};
      ::poll(&p, 1, 50);
    } else {
      return;
    }
  }
}

}  // namespace

Expected<std::unique_ptr<MetricsServer>> MetricsServer::start(const std::string& where,
                                                              std::function<AgentStatus()> status) {
  int port = 0;
  TRY_ASSIGN(Fd listen, listen_on(where, &port));
  Fd stop(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!stop.valid()) {
    return Error(ErrorKind::kIo, std::string("eventfd: ") + std::strerror(errno));
  }
  return std::unique_ptr<MetricsServer>(
      new MetricsServer(std::move(listen), std::move(stop), port, std::move(status)));
}

MetricsServer::MetricsServer(Fd listen, Fd stop, int port, std::function<AgentStatus()> status)
    : listen_(std::move(listen)), stop_(std::move(stop)), port_(port), status_(std::move(status)) {
  thread_ = std::thread([this] { run(); });
}

MetricsServer::~MetricsServer() {
  uint64_t one = 1;
  if (::write(stop_.get(), &one, sizeof(one)) < 0) {
    // The thread then ends at its next wake-up (it polls at least every kRequestTime).
  }
  thread_.join();
}

void MetricsServer::run() {
  std::vector<Connection> conns;
  std::vector<pollfd> fds;
  for (;;) {
    fds.assign({{stop_.get(), POLLIN, 0}, {listen_.get(), POLLIN, 0}});
    auto next = Clock::now() + kRequestTime;
    for (const auto& c : conns) {
      fds.push_back({c.fd.get(), POLLIN, 0});
      next = std::min(next, c.deadline);
    }
    auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now());
    if (::poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(1, wait.count()))) < 0 &&
        errno != EINTR) {
      return;
    }
    if (fds[0].revents != 0) {
      return;
    }
    // Requests that arrived: answered and closed; closed or late ones dropped.
    const auto now = Clock::now();
    std::vector<Connection> kept;
    for (size_t i = 0; i < conns.size(); ++i) {
      Connection& c = conns[i];
      bool done = false;
      if (fds[i + 2].revents != 0) {
        char buf[2048];
        ssize_t n = ::recv(c.fd.get(), buf, sizeof(buf), MSG_DONTWAIT);
        if (n > 0) {
          c.request.append(buf, static_cast<size_t>(n));
        }
        done = n == 0 || (n < 0 && errno != EAGAIN);
        if (c.request.find("\r\n\r\n") != std::string::npos || c.request.size() >= 8192) {
          answer(c, response_to(c.request.substr(0, c.request.find("\r\n")), status_()));
          done = true;
        }
      }
      if (!done && now < c.deadline) {
        kept.push_back(std::move(c));
      }
    }
    conns = std::move(kept);
    // New clients; beyond the limit the oldest goes.
    if (fds[1].revents != 0) {
      for (;;) {
        Fd fd(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
        if (!fd.valid()) {
          break;
        }
        if (conns.size() >= kMaxConnections) {
          conns.erase(conns.begin());
        }
        conns.push_back({std::move(fd), "", Clock::now() + kRequestTime});
      }
    }
  }
}

}  // namespace rdmanet::agent
