// The HTTP client: endpoint URLs, the answers a server gives (whole, cut short,
// not HTTP), TLS files that do not load, and name resolution bounded by the
// deadline. Over TLS against real etcd members: tests/binary/ipam_cluster_test.py.
#include "ipam/http_client.h"

#include <gtest/gtest.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>

#include "base/testing/temp_dir.h"
#include "ipam/testing/test_http_server.h"

namespace rdmanet::ipam {
namespace {

using testing::TestHttpServer;

Clock::time_point in_ms(int ms) { return Clock::now() + std::chrono::milliseconds(ms); }

TEST(Endpoint, ParsesSchemeHostPort) {
  auto e = parse_endpoint("https://10.0.0.11:2379");
  ASSERT_TRUE(e) << e.error().msg();
  EXPECT_TRUE(e->tls);
  EXPECT_EQ(e->host, "10.0.0.11");
  EXPECT_EQ(e->port, 2379);
  auto v6 = parse_endpoint("http://[fd00::1]:2379/");
  ASSERT_TRUE(v6) << v6.error().msg();
  EXPECT_FALSE(v6->tls);
  EXPECT_EQ(v6->host, "fd00::1");
}

TEST(Endpoint, RejectsWhatIsNotAnEndpoint) {
  for (const char* bad : {"10.0.0.1:2379", "unix:///run/etcd.sock", "https://host", "https://:2379",
                          "https://host:0", "https://host:70000", "https://host:23x",
                          "https://host:2379/v3", "https://[fd00::1:2379"}) {
    auto e = parse_endpoint(bad);
    ASSERT_FALSE(e) << bad;
    EXPECT_EQ(e.error().kind(), ErrorKind::kInvalidConfig);
    EXPECT_NE(e.error().msg().find(bad), std::string::npos) << e.error().msg();
  }
}

TEST(HttpPost, SendsThePostAndReturnsStatusAndBody) {
  std::string seen;
  TestHttpServer server([&](const std::string& request) {
    seen = request;
    return std::string(
        "HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"a\":1}");
  });
  auto r = http_post(*parse_endpoint(server.url()), nullptr, "/v3/kv/range", R"({"key":"eA=="})",
                     in_ms(2000), in_ms(2000));
  ASSERT_TRUE(r) << r.error().msg();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, R"({"a":1})");
  EXPECT_EQ(seen.rfind("POST /v3/kv/range HTTP/1.0\r\n", 0), 0U) << seen;
  EXPECT_NE(seen.find("\r\nContent-Length: 14\r\n\r\n{\"key\":\"eA==\"}"), std::string::npos)
      << seen;
  // Without a Content-Length the answer ends with the connection; a status is not a failure.
  TestHttpServer unavailable([](const std::string&) {
    return std::string("HTTP/1.1 503 Service Unavailable\r\n\r\n{\"message\":\"no leader\"}");
  });
  auto busy = http_post(*parse_endpoint(unavailable.url()), nullptr, "/v3/kv/txn", "{}",
                        in_ms(2000), in_ms(2000));
  ASSERT_TRUE(busy) << busy.error().msg();
  EXPECT_EQ(busy->status, 503);
  EXPECT_EQ(busy->body, R"({"message":"no leader"})");
}

// A server that dies in the middle of its answer announces a body longer than what it
// sends: that is a failed attempt (worth another server), never the answer.
TEST(HttpPost, AnAnswerShorterThanItsContentLengthIsAFailure) {
  TestHttpServer server([](const std::string&) {
    return std::string("HTTP/1.0 200 OK\r\nContent-Length: 120\r\n\r\n{\"header\":{\"revision\":");
  });
  auto r = http_post(*parse_endpoint(server.url()), nullptr, "/v3/kv/range", "{}", in_ms(2000),
                     in_ms(2000));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind(), ErrorKind::kTryAgainLater);
  EXPECT_EQ(r.error().msg(), "answer cut short (22 of 120 bytes)");
}

TEST(HttpPost, WhatIsNotHttpOrNobodyListeningIsAFailure) {
  TestHttpServer server([](const std::string&) { return std::string("SSH-2.0-OpenSSH_9.2\r\n"); });
  auto r = http_post(*parse_endpoint(server.url()), nullptr, "/", "{}", in_ms(2000), in_ms(2000));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind(), ErrorKind::kTryAgainLater);
  EXPECT_EQ(r.error().msg(), "not an HTTP answer");
  // Port 9 (discard) on loopback: nothing listens there in the test netns.
  auto refused = http_post(*parse_endpoint("http://127.0.0.1:9"), nullptr, "/", "{}", in_ms(2000),
                           in_ms(2000));
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().kind(), ErrorKind::kTryAgainLater);
  EXPECT_EQ(refused.error().msg(), "connect: Connection refused");
}

TEST(TlsContext, FilesThatDoNotLoadAreNamed) {
  testutil::TempDir tmp{"rdmanet-tls"};
  std::string junk = tmp.path() + "/junk.pem";
  std::ofstream(junk) << "not a certificate\n";
  auto ca = TlsContext::load({junk, "", ""}, "etcd");
  ASSERT_FALSE(ca);
  EXPECT_EQ(ca.error().kind(), ErrorKind::kInvalidConfig);
  EXPECT_EQ(ca.error().msg().rfind("cannot load the etcd CA " + junk + ": ", 0), 0U)
      << ca.error().msg();
  auto cert = TlsContext::load({"", tmp.path() + "/missing.crt", junk}, "etcd");
  ASSERT_FALSE(cert);
  EXPECT_EQ(cert.error().msg().rfind(
                "cannot load the etcd client certificate " + tmp.path() + "/missing.crt: ", 0),
            0U)
      << cert.error().msg();
}

// An endpoint by name whose DNS server never answers: the request still ends at its
// deadline (getaddrinfo alone would wait resolv.conf's 5 s x 2 attempts). In a
// child with its own mount and network namespaces: /etc/resolv.conf names
// 127.0.0.1, where a socket takes the queries and never answers.
TEST(HttpPost, AResolverThatNeverAnswersCostsOnlyTheDeadline) {
  ASSERT_EQ(geteuid(), 0u) << "needs root (mount and network namespaces); it does not skip";
  testutil::TempDir tmp{"rdmanet-etcd-dns"};
  std::string resolv = tmp.path() + "/resolv.conf";
  std::string nss = tmp.path() + "/nsswitch.conf";
  std::ofstream(resolv) << "nameserver 127.0.0.1\noptions timeout:5 attempts:2\n";
  std::ofstream(nss) << "hosts: dns\n";
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (unshare(CLONE_NEWNS | CLONE_NEWNET) != 0 ||
        mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        mount(resolv.c_str(), "/etc/resolv.conf", nullptr, MS_BIND, nullptr) != 0 ||
        mount(nss.c_str(), "/etc/nsswitch.conf", nullptr, MS_BIND, nullptr) != 0) {
      _exit(10);
    }
    int any = socket(AF_INET, SOCK_DGRAM, 0);
    ifreq lo{};
    std::strcpy(lo.ifr_name, "lo");  // NOLINT(clang-analyzer-security.insecureAPI.strcpy)
    if (ioctl(any, SIOCGIFFLAGS, &lo) != 0 ||
        (lo.ifr_flags |= IFF_UP, ioctl(any, SIOCSIFFLAGS, &lo)) != 0) {
      _exit(11);
    }
    int dns = socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_port = htons(53);
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(dns, reinterpret_cast<sockaddr*>(&at), sizeof at) != 0) {
      _exit(12);
    }
    auto start = std::chrono::steady_clock::now();
    auto deadline = start + std::chrono::milliseconds(1000);
    auto r = http_post(*parse_endpoint("http://etcd.rdmanet.test:2379"), nullptr, "/v3/kv/range",
                       "{}", deadline, deadline);
    auto took = std::chrono::steady_clock::now() - start;
    if (r || r.error().kind() != ErrorKind::kTryAgainLater ||
        r.error().msg().find("cannot resolve: timed out") == std::string::npos) {
      _exit(20);
    }
    _exit(took < std::chrono::seconds(4) ? 0 : 21);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "10-12: namespace setup failed, 20: wrong answer, 21: the request outlived its deadline";
}

}  // namespace
}  // namespace rdmanet::ipam
