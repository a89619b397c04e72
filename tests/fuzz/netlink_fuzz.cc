// Fuzz target: netlink replies as the parsers see them. The first byte picks the parser
// (RTM_NEWLINK, dcbnl IEEE_GET, RDMA nldev GET), the rest is the message. Like libnl's
// receive loop, the harness only hands over messages whose nlmsg_len fits the buffer.
#include <linux/netlink.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

#include "netns/dcb.h"
#include "netns/link.h"
#include "rdma/nldev.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 + sizeof(nlmsghdr)) {
    return 0;
  }
  // A private copy, exactly as long as the message (so ASan sees any overread); new[]
  // aligns it for nlmsghdr.
  std::unique_ptr<uint8_t[]> storage(new uint8_t[size - 1]);
  std::memcpy(storage.get(), data + 1, size - 1);
  auto* hdr = reinterpret_cast<nlmsghdr*>(storage.get());
  if (hdr->nlmsg_len < sizeof(nlmsghdr) || hdr->nlmsg_len > size - 1) {
    return 0;
  }
  switch (data[0] % 3) {
    case 0:
      (void)rdmanet::netns::decode_link(hdr);
      break;
    case 1: {
      rdmanet::netns::DcbState state;
      rdmanet::netns::parse_dcb_reply(hdr, &state);
      break;
    }
    default:
      (void)rdmanet::rdma::decode_device(hdr);
      break;
  }
  return 0;
}
