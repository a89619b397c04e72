// The etcd client's pure parts: endpoint URLs, base64, and decoding the JSON
// gateway's answers (captured from etcd 3.4.23). The calls themselves run
// against a real etcd cluster in tests/ipam_cluster_test.py.
#include "ipam/etcd.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

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

TEST(Base64, RoundTripsEveryLengthAndByte) {
  std::string all;
  for (int c = 0; c < 256; ++c) {
    all += static_cast<char>(c);
  }
  for (size_t n = 0; n <= all.size(); n += 37) {
    auto text = all.substr(0, n);
    auto back = base64_decode(base64_encode(text));
    ASSERT_TRUE(back);
    EXPECT_EQ(*back, text);
  }
  EXPECT_EQ(base64_encode("/x/a"), "L3gvYQ==");
  // The last one: non-canonical (padding drops set bits), found by etcd_fuzz.
  for (const char* bad : {"L3gvYQ=", "L3g*YQ==", "=3gvYQ==", "L3gvYQ=a", "L3JkvsFwLjE1aY=="}) {
    EXPECT_FALSE(base64_decode(bad)) << bad;
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
      while (request.find("}") == std::string::npos && (n = read(conn, buf, sizeof buf)) > 0) {
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

}  // namespace
}  // namespace rdmanet::ipam
