#include "plugin/steps/soft_roce.h"

#include <gtest/gtest.h>

#include <string>
#include <unordered_map>

#include "plugin/record.h"

namespace rdmanet::plugin {
namespace {

bool every_tool_takes(const std::string& name) {
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) {
      return false;
    }
  }
  return true;
}

// UCX keeps an RDMA device's name in 16 bytes (UCT_MD_NAME_MAX) and finds no device by a
// truncated one: every name ADD gives fits, also for the longest interface name (15 bytes)
// and the longest network and container ids, and is made of [a-z0-9] only.
TEST(SoftRoceName, FitsUcxForTheLongestInterfaceName) {
  const std::string longest_ifname(15, 'x');
  for (const AttachmentId& id :
       {AttachmentId{"rail0", "ctr", "net1"}, AttachmentId{"n", "c", "a"},
        AttachmentId{std::string(253, 'n'), std::string(1024, 'c'), longest_ifname},
        AttachmentId{"rail0", "ctr", "eth-with.dots"}}) {
    const std::string name = soft_roce_name(id);
    EXPECT_EQ(name.size(), 15u) << name;
    EXPECT_TRUE(name.starts_with("rxe")) << name;
    EXPECT_TRUE(every_tool_takes(name)) << name;
  }
  // The form before: 28 characters for a 15-byte interface name, which UCX cannot open.
  EXPECT_EQ(legacy_soft_roce_name({"rail0", "ctr", longest_ifname}).size(), 28u);
}

// One name per attachment: 8 rails of 20,000 pods in 4 networks give 640,000 names, none
// twice (the kernel would refuse the second; ADD would fail with EEXIST).
TEST(SoftRoceName, IsUniqueAcrossManyAttachments) {
  std::unordered_map<std::string, std::string> seen;
  seen.reserve(640000);
  for (int net = 0; net < 4; ++net) {
    for (int pod = 0; pod < 20000; ++pod) {
      for (int rail = 1; rail <= 8; ++rail) {
        AttachmentId id{"rail" + std::to_string(net),
                        "c0ffee" + std::to_string(pod * 7919) + "deadbeef",
                        "net" + std::to_string(rail)};
        const std::string key = id.network + "/" + id.container_id + "/" + id.ifname;
        auto [it, inserted] = seen.emplace(soft_roce_name(id), key);
        ASSERT_TRUE(inserted) << soft_roce_name(id) << " for " << key << " and " << it->second;
      }
    }
  }
}

// The same attachment always gets the same name (DEL finds what ADD made), and DEL, GC and
// the node agent still recognise the name rdmanet 0.1 gave, from records written before an
// upgrade; another attachment's name, either form, is never taken for this one's.
TEST(SoftRoceName, RecognisesBothFormsOfItsOwnNameOnly) {
  const AttachmentId id{"rail0", "ctr-pod-a", "net1"};
  EXPECT_EQ(soft_roce_name(id), soft_roce_name(AttachmentId{"rail0", "ctr-pod-a", "net1"}));
  // The 0.1 name of this attachment, as the lab's upgrade check creates it by hand.
  EXPECT_EQ(legacy_soft_roce_name(id), "rxe_net1_eace3a0a");
  EXPECT_TRUE(is_soft_roce_name_of(soft_roce_name(id), id));
  EXPECT_TRUE(is_soft_roce_name_of("rxe_net1_eace3a0a", id));
  const AttachmentId other{"rail0", "ctr-pod-b", "net1"};
  EXPECT_FALSE(is_soft_roce_name_of(soft_roce_name(other), id));
  EXPECT_FALSE(is_soft_roce_name_of(legacy_soft_roce_name(other), id));
  EXPECT_FALSE(is_soft_roce_name_of("rxe0", id));
  EXPECT_FALSE(is_soft_roce_name_of("", id));
}

}  // namespace
}  // namespace rdmanet::plugin
