#include "agent/metrics_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <vector>

#include "base/fd.h"

namespace rdmanet::agent {
namespace {

Fd connect_to(int port) {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval limit{10, 0};  // a generous bound: the failure this guards against is a stall
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  return fd;
}

// Everything the server sends until it closes (or 10 s pass without a byte).
std::string read_all(const Fd& fd) {
  std::string out;
  char buf[4096];
  ssize_t n = 0;
  while ((n = ::recv(fd.get(), buf, sizeof(buf), 0)) > 0) {
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

std::string get(int port, const std::string& path) {
  Fd fd = connect_to(port);
  std::string req = "GET " + path + " HTTP/1.1\r\nHost: node\r\n\r\n";
  EXPECT_EQ(::send(fd.get(), req.data(), req.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(req.size()));
  return read_all(fd);
}

class MetricsServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = MetricsServer::start("127.0.0.1:0", [this] {
      return AgentStatus{"rdmanet_reconcile_rounds_total 7\n", healthy_.load()};
    });
    ASSERT_TRUE(s.ok()) << s.error().msg();
    server_ = std::move(*s);
    ASSERT_GT(server_->port(), 0);
  }
  std::atomic<bool> healthy_{true};
  std::unique_ptr<MetricsServer> server_;
};

TEST_F(MetricsServerTest, AnswersMetricsHealthAndNothingElse) {
  std::string metrics = get(server_->port(), "/metrics");
  EXPECT_EQ(metrics.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << metrics;
  EXPECT_NE(metrics.find("text/plain; version=0.0.4"), std::string::npos);
  EXPECT_NE(metrics.find("\r\n\r\nrdmanet_reconcile_rounds_total 7\n"), std::string::npos);
  EXPECT_EQ(get(server_->port(), "/healthz").rfind("HTTP/1.1 200 OK", 0), 0u);
  healthy_ = false;
  EXPECT_EQ(get(server_->port(), "/healthz").rfind("HTTP/1.1 503", 0), 0u);
  EXPECT_EQ(get(server_->port(), "/other").rfind("HTTP/1.1 404", 0), 0u);
}

// More idle clients than the server keeps, all connected before the probe: the probe is
// answered (it waited 1 s per idle client, one after another, before), and the idle ones are
// closed by the server, not left to hold it.
TEST_F(MetricsServerTest, IdleClientsCannotStallTheProbe) {
  std::vector<Fd> idle;
  for (size_t i = 0; i < MetricsServer::kMaxConnections + 40; ++i) {
    idle.push_back(connect_to(server_->port()));
  }
  std::string health = get(server_->port(), "/healthz");
  EXPECT_EQ(health.rfind("HTTP/1.1 200 OK", 0), 0u) << "answer: \"" << health << "\"";
  // A client that starts a request and stalls is closed: recv sees the end, not a timeout.
  Fd slow = connect_to(server_->port());
  ASSERT_GT(::send(slow.get(), "GET /hea", 8, MSG_NOSIGNAL), 0);
  char c = 0;
  EXPECT_EQ(::recv(slow.get(), &c, 1, 0), 0) << "the stalled client was not closed";
}

}  // namespace
}  // namespace rdmanet::agent
