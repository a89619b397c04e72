// The etcd client's pure parts: endpoint URLs and decoding the JSON
// gateway's answers (captured from etcd 3.4.23). The calls themselves run
// against a real etcd cluster in tests/ipam_cluster_test.py.
#include "ipam/etcd.h"

#include <gtest/gtest.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "base/testing/temp_dir.h"

namespace rdmanet::ipam {
namespace {

TEST(EtcdEndpoint, ParsesSchemeHostPort) {
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

TEST(EtcdEndpoint, RejectsWhatIsNotAnEndpoint) {
  for (const char* bad : {"10.0.0.1:2379", "unix:///run/etcd.sock", "https://host", "https://:2379",
                          "https://host:0", "https://host:70000", "https://host:23x",
                          "https://host:2379/v3", "https://[fd00::1:2379"}) {
    auto e = parse_endpoint(bad);
    ASSERT_FALSE(e) << bad;
    EXPECT_EQ(e.error().kind(), ErrorKind::kInvalidConfig);
    EXPECT_NE(e.error().msg().find(bad), std::string::npos) << e.error().msg();
  }
}

TEST(EtcdAnswers, DecodesARange) {
  auto kvs = decode_range_response(
      R"({"header":{"cluster_id":"324952591200643719","member_id":"3319814642761637952",)"
      R"("revision":"2","raft_term":"2"},"kvs":[{"key":"L3gvYQ==","create_revision":"2",)"
      R"("mod_revision":"5","version":"1","value":"aGk="}],"count":"1"})");
  ASSERT_TRUE(kvs) << kvs.error().msg();
  ASSERT_EQ(kvs->size(), 1U);
  EXPECT_EQ((*kvs)[0].key, "/x/a");
  EXPECT_EQ((*kvs)[0].value, "hi");
  EXPECT_EQ((*kvs)[0].create_revision, 2);
  EXPECT_EQ((*kvs)[0].mod_revision, 5);
  // No key: the gateway leaves kvs out.
  auto none = decode_range_response(R"({"header":{"revision":"2"}})");
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
}

TEST(EtcdAnswers, DecodesATxn) {
  auto won = decode_txn_response(
      R"({"header":{"revision":"7"},"succeeded":true,"responses":[{"response_put":{"header":{"revision":"7"}}}]})");
  ASSERT_TRUE(won) << won.error().msg();
  EXPECT_TRUE(won->succeeded);
  EXPECT_EQ(won->revision, 7);
  // A failed comparison: the gateway omits succeeded (false).
  auto lost = decode_txn_response(R"({"header":{"revision":"7"}})");
  ASSERT_TRUE(lost);
  EXPECT_FALSE(lost->succeeded);
}

TEST(EtcdAnswers, RejectsMalformedAnswers) {
  for (const char* bad :
       {"", "[]", "{}", R"({"header":{}})", R"({"header":{"revision":"x"}})",
        R"({"header":{"revision":"1"},"kvs":{}})",
        R"({"header":{"revision":"1"},"kvs":[{"value":"aGk="}]})",
        R"({"header":{"revision":"1"},"kvs":[{"key":"!!"}]})",
        R"({"header":{"revision":"1"},"kvs":[{"key":"eA==","mod_revision":"1e3"}]})"}) {
    auto r = decode_range_response(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().kind(), ErrorKind::kIo);
  }
  EXPECT_FALSE(decode_txn_response(R"({"header":{"revision":"1"},"succeeded":"yes"})"));
}

TEST(EtcdClient, PrefixEndSelectsThePrefix) {
  EXPECT_EQ(EtcdClient::prefix_end("/a/b/"), "/a/b0");
  EXPECT_EQ(EtcdClient::prefix_end(std::string("a\xff", 2)), "b");
}

TEST(EtcdClient, NoMemberListeningIsTryAgainLaterNamingEachEndpoint) {
  // Port 9 (discard) on loopback: nothing listens there in the test netns.
  std::vector<EtcdEndpoint> eps{*parse_endpoint("http://127.0.0.1:9"),
                                *parse_endpoint("http://127.0.0.1:11")};
  EtcdClient client(eps, {}, std::chrono::milliseconds(300));
  auto r = client.range("/x", "");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind(), ErrorKind::kTryAgainLater);
  EXPECT_NE(r.error().msg().find("http://127.0.0.1:9: connect"), std::string::npos)
      << r.error().msg();
  EXPECT_NE(r.error().msg().find("http://127.0.0.1:11: connect"), std::string::npos);
}

// A member that dies in the middle of its answer: it announces a body longer than
// what it sends, then closes. That is no answer, and must not be taken for one.
TEST(EtcdClient, AnAnswerCutShortIsRetriedNotTakenForTheAnswer) {
  int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), len), 0);
  ASSERT_EQ(listen(listener, 8), 0);
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  std::atomic<bool> stop{false};
  std::atomic<int> answered{0};
  std::thread member([&] {
    while (!stop) {
      pollfd p{listener, POLLIN, 0};
      if (poll(&p, 1, 20) != 1) {
        continue;
      }
      int conn = accept(listener, nullptr, nullptr);
      std::string request;
      char buf[4096];
      ssize_t n = 0;
      while (request.find('}') == std::string::npos && (n = read(conn, buf, sizeof buf)) > 0) {
        request.append(buf, static_cast<size_t>(n));
      }
      std::string cut = "HTTP/1.0 200 OK\r\nContent-Length: 120\r\n\r\n{\"header\":{\"revision\":";
      (void)!write(conn, cut.data(), cut.size());
      close(conn);
      ++answered;
    }
  });
  std::string url = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  EtcdClient client({*parse_endpoint(url)}, {}, std::chrono::milliseconds(300));
  auto r = client.range("/x", "");
  stop = true;
  member.join();
  close(listener);
  ASSERT_FALSE(r);
  // Taken for the answer, it would fail at once as undecodable (kIo); the message
  // names only the last attempt's failure, which may be the deadline itself.
  EXPECT_EQ(r.error().kind(), ErrorKind::kTryAgainLater) << r.error().msg();
  EXPECT_GE(answered.load(), 2) << "not retried";
}

// An endpoint by name whose DNS server never answers: the call still ends at its
// deadline (getaddrinfo alone would wait resolv.conf's 5 s x 2 attempts). In a
// child with its own mount and network namespaces: /etc/resolv.conf names
// 127.0.0.1, where a socket takes the queries and never answers.
TEST(EtcdClient, AResolverThatNeverAnswersCostsOnlyTheDeadline) {
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
    EtcdClient client({*parse_endpoint("http://etcd.rdmanet.test:2379")}, {},
                      std::chrono::milliseconds(1000));
    auto start = std::chrono::steady_clock::now();
    auto r = client.range("/x", "");
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
      << "10-12: namespace setup failed, 20: wrong answer, 21: the call outlived its deadline";
}

}  // namespace
}  // namespace rdmanet::ipam
