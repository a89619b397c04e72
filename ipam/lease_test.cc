#include "ipam/lease.h"

#include <gtest/gtest.h>

#include "ipam/testing/test_util.h"

namespace rdmanet::ipam {
namespace {

using testing::ip;

TEST(Lease, RoundTripsAndWhatIsNotTheLeaseIsUnreadable) {
  Lease lease{ip("10.1.0.2"), {"c1", "eth0"}, "/var/run/netns/x", "ns", "pod", "uid"};
  Lease back = parse_lease(ip("10.1.0.2"), format_lease(lease));
  EXPECT_TRUE(back.readable);
  EXPECT_EQ(back.owner, lease.owner);
  EXPECT_EQ(back.netns, "/var/run/netns/x");
  EXPECT_EQ(back.pod_uid, "uid");
  // Torn, another address's, or without its owner.
  for (const std::string& bad : {std::string("{\"containerID\":"), format_lease(lease),
                                 std::string(R"({"ip": "10.1.0.3"})")}) {
    EXPECT_FALSE(parse_lease(ip("10.1.0.3"), bad).readable) << bad;
  }
}

TEST(Record, RoundTripsAnyIfnameByte) {
  Record r{{"c1", std::string("e\xff\0x", 4)}, "/ns", {ip("10.1.0.2"), ip("fd00::2")}};
  auto back = parse_record(format_record(r));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->owner, r.owner);  // JSON is UTF-8 only: the ifname travels in hex
  EXPECT_EQ(back->ips, r.ips);
  for (const char* bad : {"", "[]", R"({"ips": "x"})", R"({"ips": [1]})",
                          R"({"containerID": "c", "ifnameHex": "6574", "ips": ["x"]})",
                          R"({"containerID": "c", "ips": []})"}) {
    EXPECT_FALSE(parse_record(bad)) << bad;
  }
}

TEST(Record, FileNamesAreSafeAndDistinct) {
  for (const char* ifname : {"eth0", "..", "a\\b", "\xff\xfe", "x/../../y", "net*1"}) {
    std::string name = record_name({"c1", ifname});
    EXPECT_EQ(name.find('/'), std::string::npos) << name;
    EXPECT_NE(name, "..");
  }
  std::string long_id(300, 'a');
  EXPECT_LT(record_name({long_id, "eth0"}).size(), 255U);
  EXPECT_NE(record_name({long_id, "eth0"}), record_name({long_id + "b", "eth0"}));
}

}  // namespace
}  // namespace rdmanet::ipam
