// The etcd client: decoding the JSON gateway's answers (captured from etcd
// 3.4.23) and moving between members, against test servers. The calls
// themselves run against a real etcd cluster in tests/binary/ipam_cluster_test.py.
#include "ipam/etcd.h"

#include <gtest/gtest.h>

#include <string>

#include "ipam/testing/test_http_server.h"

namespace rdmanet::ipam {
namespace {

using testing::TestHttpServer;

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

TEST(EtcdClient, NoMemberListeningIsTryAgainLaterNamingEachEndpoint) {
  // Port 9 (discard) on loopback: nothing listens there in the test netns.
  std::vector<Endpoint> eps{*parse_endpoint("http://127.0.0.1:9"),
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
  TestHttpServer member([](const std::string&) {
    return std::string("HTTP/1.0 200 OK\r\nContent-Length: 120\r\n\r\n{\"header\":{\"revision\":");
  });
  EtcdClient client({*parse_endpoint(member.url())}, {}, std::chrono::milliseconds(300));
  auto r = client.range("/x", "");
  ASSERT_FALSE(r);
  // Taken for the answer, it would fail at once as undecodable (kIo); the message
  // names only the last attempt's failure, which may be the deadline itself.
  EXPECT_EQ(r.error().kind(), ErrorKind::kTryAgainLater) << r.error().msg();
  EXPECT_GE(member.answered(), 2) << "not retried";
}

// 5xx (no leader, leader changed) is a member's state: the next member is asked, and
// the one that answered is asked first by the next call. 4xx is the request's fault:
// every member would refuse it, so the call fails at once with etcd's message.
TEST(EtcdClient, MovesOnAfter5xxAndFailsAtOnceOn4xx) {
  const std::string ok = R"({"header":{"revision":"3"},"succeeded":true})";
  TestHttpServer no_leader([](const std::string&) {
    return std::string("HTTP/1.0 503 Service Unavailable\r\n\r\n") +
           R"({"error":"etcdserver: no leader","message":"etcdserver: no leader","code":14})";
  });
  TestHttpServer leader([&](const std::string&) {
    return "HTTP/1.0 200 OK\r\nContent-Length: " + std::to_string(ok.size()) + "\r\n\r\n" + ok;
  });
  EtcdClient client({*parse_endpoint(no_leader.url()), *parse_endpoint(leader.url())}, {},
                    std::chrono::milliseconds(2000));
  for (int call = 0; call < 3; ++call) {
    auto r = client.txn({}, {Op{"/k", "v"}});
    ASSERT_TRUE(r) << r.error().msg();
    EXPECT_TRUE(r->succeeded);
    EXPECT_EQ(r->revision, 3);
  }
  EXPECT_EQ(leader.answered(), 3);
  EXPECT_LE(no_leader.answered(), 1) << "the member that answered is not asked first";

  TestHttpServer bad_request([](const std::string&) {
    return std::string("HTTP/1.0 400 Bad Request\r\n\r\n") +
           R"({"error":"etcdserver: duplicate key given in txn request","message":"etcdserver: duplicate key given in txn request","code":3})";
  });
  // Twice the same member: whichever entry is asked first, moving on would ask it again.
  EtcdClient refusing({*parse_endpoint(bad_request.url()), *parse_endpoint(bad_request.url())}, {},
                      std::chrono::milliseconds(2000));
  auto refused = refusing.txn({}, {Op{"/k", "v"}, Op{"/k", std::nullopt}});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().kind(), ErrorKind::kIo);
  EXPECT_NE(refused.error().msg().find("refused /v3/kv/txn: HTTP 400: etcdserver: duplicate key"),
            std::string::npos)
      << refused.error().msg();
  EXPECT_EQ(bad_request.answered(), 1);
}

}  // namespace
}  // namespace rdmanet::ipam
