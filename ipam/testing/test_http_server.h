// For tests: an HTTP server on 127.0.0.1 that answers each request with what a
// function returns for it, raw (status line, headers and body), then closes
// the connection. For answers no real etcd member gives on purpose: cut short,
// not HTTP, refused.
#pragma once

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <functional>
#include <string>
#include <thread>

namespace rdmanet::ipam::testing {

class TestHttpServer {
 public:
  // `answer` gets the whole request (head and body).
  explicit TestHttpServer(std::function<std::string(const std::string&)> answer)
      : answer_(std::move(answer)) {
    listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (listener_ < 0 || bind(listener_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        listen(listener_, 8) != 0 ||
        getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      return;  // url() stays empty: the test fails on it
    }
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~TestHttpServer() {
    stop_ = true;
    if (thread_.joinable()) {
      thread_.join();
    }
    if (listener_ >= 0) {
      close(listener_);
    }
  }
  TestHttpServer(const TestHttpServer&) = delete;
  TestHttpServer& operator=(const TestHttpServer&) = delete;

  std::string url() const {
    return port_ == 0 ? std::string() : "http://127.0.0.1:" + std::to_string(port_);
  }
  // How many requests were answered so far (counted before the answer is sent).
  int answered() const { return answered_; }

 private:
  void serve() {
    while (!stop_) {
      pollfd p{listener_, POLLIN, 0};
      if (poll(&p, 1, 20) != 1) {
        continue;
      }
      int conn = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (conn < 0) {
        continue;
      }
      std::string reply = answer_(read_request(conn));
      ++answered_;  // before the answer: a client that has it may count at once
      (void)!write(conn, reply.data(), reply.size());
      close(conn);
    }
  }

  // The head, then as many body bytes as its Content-Length says.
  static std::string read_request(int conn) {
    std::string request;
    char buf[4096];
    size_t want = std::string::npos;
    while (request.size() < want) {
      ssize_t n = read(conn, buf, sizeof buf);
      if (n <= 0) {
        break;
      }
      request.append(buf, static_cast<size_t>(n));
      size_t end = request.find("\r\n\r\n");
      size_t at = request.find("Content-Length: ");
      if (end != std::string::npos && at != std::string::npos && at < end) {
        size_t length = 0;
        std::from_chars(request.data() + at + 16, request.data() + end, length);
        want = end + 4 + length;
      }
    }
    return request;
  }

  std::function<std::string(const std::string&)> answer_;
  int listener_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> answered_{0};
  std::thread thread_;
};

}  // namespace rdmanet::ipam::testing
