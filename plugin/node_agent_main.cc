// The node agent's process: rounds every interval, /metrics and /healthz between them on
// one listening socket, SIGTERM/SIGINT through a signalfd. Single-threaded: a scrape
// waits for a round in progress, and a round never runs twice at once.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>

#include "base/fd.h"
#include "cni/log.h"
#include "plugin/node_agent.h"

namespace rdmanet::plugin {

namespace {

using Clock = std::chrono::steady_clock;

Expected<Fd> listen_on(const std::string& where) {
  size_t colon = where.rfind(':');
  std::string host = colon == std::string::npos ? "" : where.substr(0, colon);
  std::string port = colon == std::string::npos ? where : where.substr(colon + 1);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  char* end = nullptr;
  long p = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || p < 1 || p > 65535 ||
      (!host.empty() && ::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1)) {
    return Error(ErrorKind::kInvalidConfig,
                 "--listen wants IPv4-ADDRESS:PORT or :PORT, not \"" + where + "\"");
  }
  addr.sin_port = htons(static_cast<uint16_t>(p));
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (fd.get() < 0 || ::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(fd.get(), 16) != 0) {
    return Error(ErrorKind::kIo, "cannot listen on " + where + ": " + std::strerror(errno));
  }
  return fd;
}

// One request, answered and closed. Reads the request line within a second; anything but
// GET /metrics or GET /healthz is 404.
void serve(int listen_fd, const NodeAgent& agent) {
  Fd conn(::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC));
  if (conn.get() < 0) {
    return;
  }
  std::string request;
  auto deadline = Clock::now() + std::chrono::seconds(1);
  while (request.find("\r\n\r\n") == std::string::npos && request.size() < 8192) {
    pollfd p{conn.get(), POLLIN, 0};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) {
      return;
    }
    char buf[2048];
    ssize_t n = ::read(conn.get(), buf, sizeof(buf));
    if (n <= 0) {
      break;
    }
    request.append(buf, static_cast<size_t>(n));
  }
  std::string line = request.substr(0, request.find("\r\n"));
  std::string status = "404 Not Found";
  std::string type = "text/plain; charset=utf-8";
  std::string body = "not found\n";
  if (line.rfind("GET /metrics ", 0) == 0) {
    status = "200 OK";
    type = "text/plain; version=0.0.4; charset=utf-8";
    body = agent.metrics();
  } else if (line.rfind("GET /healthz ", 0) == 0) {
    bool ok = agent.healthy(Clock::now());
    status = ok ? "200 OK" : "503 Service Unavailable";
    body = ok ? "ok\n" : "no round finished in the last three intervals\n";
  }
  std::string response = "HTTP/1.1 " + status + "\r\nContent-Type: " + type +
                         "\r\nContent-Length: " + std::to_string(body.size()) +
                         "\r\nConnection: close\r\n\r\n" + body;
  size_t sent = 0;
  while (sent < response.size()) {
    ssize_t n = ::send(conn.get(), response.data() + sent, response.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) {
      return;
    }
    sent += static_cast<size_t>(n);
  }
}

}  // namespace

int node_agent_main(const std::vector<std::string>& args) {
  cni::init_logging("rdmanet node-agent");
  spdlog::set_level(spdlog::level::info);  // its teardowns are worth a line each
  auto config = parse_agent_args(args);
  if (!config) {
    std::cerr << "rdmanet node-agent: " << config.error().msg() << "\n";
    return 2;
  }
  NodeAgent agent(*config);
  if (config->once) {
    return agent.round().messages.empty() ? 0 : 1;
  }
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  ::sigprocmask(SIG_BLOCK, &stop, nullptr);
  Fd signals(::signalfd(-1, &stop, SFD_CLOEXEC));
  Fd http;
  if (!config->listen.empty()) {
    auto fd = listen_on(config->listen);
    if (!fd) {
      std::cerr << "rdmanet node-agent: " << fd.error().msg() << "\n";
      return 1;
    }
    http = std::move(*fd);
  }
  std::cerr << "rdmanet node-agent: every " << config->interval.count() << " s, grace "
            << config->grace.count() << " s"
            << (config->listen.empty() ? "" : ", metrics on " + config->listen) << "\n";
  auto next = Clock::now();
  for (;;) {
    if (Clock::now() >= next) {
      agent.round();
      next = Clock::now() + config->interval;
    }
    pollfd fds[2] = {{signals.get(), POLLIN, 0}, {http.get(), POLLIN, 0}};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now());
    int n =
        ::poll(fds, http.get() >= 0 ? 2 : 1, static_cast<int>(std::max<int64_t>(0, left.count())));
    if (n < 0 && errno != EINTR) {
      std::cerr << "rdmanet node-agent: poll: " << std::strerror(errno) << "\n";
      return 1;
    }
    if (fds[0].revents != 0) {
      std::cerr << "rdmanet node-agent: stopping\n";
      return 0;
    }
    if (http.get() >= 0 && fds[1].revents != 0) {
      serve(http.get(), agent);
    }
  }
}

}  // namespace rdmanet::plugin
