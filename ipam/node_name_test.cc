#include "ipam/node_name.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "ipam/testing/test_util.h"

namespace rdmanet::ipam {
namespace {

TEST(NodeName, ReadFromTheDaemonSetsFile) {
  testing::TempDir dir;
  std::string file = dir.path() + "/node-name";
  auto missing = read_node_name(file);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().kind(), ErrorKind::kTryAgainLater);
  EXPECT_EQ(missing.error().msg(),
            "cluster mode needs the node name in " + file +
                ": No such file or directory (the rdmanet DaemonSet writes it from NODE_NAME; is "
                "it running here?)");
  std::ofstream(file) << "gpu-node-7.example\n";
  auto name = read_node_name(file);
  ASSERT_TRUE(name) << name.error().msg();
  EXPECT_EQ(*name, "gpu-node-7.example");
  for (const char* bad : {"", "Upper", "-x", "a/b", "x_y", "a..\n\nb"}) {
    std::ofstream(file, std::ios::trunc) << bad;
    auto r = read_node_name(file);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().kind(), ErrorKind::kInvalidConfig);
    EXPECT_NE(r.error().msg().find(file), std::string::npos);
  }
}

// What the DaemonSet never writes: not a regular file, or far too large to be a name.
TEST(NodeName, WhatIsNotTheDaemonSetsFileIsRefused) {
  testing::TempDir dir;
  std::string dir_file = dir.path() + "/a-directory";
  ASSERT_EQ(mkdir(dir_file.c_str(), 0700), 0);
  auto not_regular = read_node_name(dir_file);
  ASSERT_FALSE(not_regular);
  EXPECT_EQ(not_regular.error().kind(), ErrorKind::kTryAgainLater);
  EXPECT_NE(not_regular.error().msg().find(dir_file), std::string::npos);
  std::string big = dir.path() + "/big";
  std::ofstream(big) << std::string(10000, 'a');
  auto too_big = read_node_name(big);
  ASSERT_FALSE(too_big);
  EXPECT_NE(too_big.error().msg().find("larger than"), std::string::npos) << too_big.error().msg();
}

}  // namespace
}  // namespace rdmanet::ipam
