#include "rdma/nldev.h"

#include <gtest/gtest.h>

namespace rdmanet::rdma {
namespace {

// Port states read as `rdma link` prints them, so a message matches what an operator sees.
TEST(PortState, NamedAsTheRdmaToolNamesThem) {
  Port down;
  down.state = 1;
  down.phys_state = 2;
  EXPECT_FALSE(down.active());
  EXPECT_EQ(down.state_summary(), "DOWN (physical state POLLING)");

  Port active;
  active.state = kPortActive;
  active.phys_state = 5;
  EXPECT_TRUE(active.active());
  EXPECT_EQ(active.state_summary(), "ACTIVE (physical state LINK_UP)");

  Port unreported;  // a kernel that sends no physical state
  unreported.state = 2;
  EXPECT_EQ(unreported.state_summary(), "INIT");

  Port odd;
  odd.state = 42;
  odd.phys_state = 99;
  EXPECT_FALSE(odd.active());
  EXPECT_EQ(odd.state_summary(), "UNKNOWN(42) (physical state UNKNOWN(99))");
}

}  // namespace
}  // namespace rdmanet::rdma
