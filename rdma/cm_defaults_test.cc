#include "rdma/cm_defaults.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "base/testing/temp_dir.h"

namespace rdmanet::rdma {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// configfs itself exists only where rdma_cm is loaded (the QEMU lab checks the real one and
// the ToS on the wire). Here a plain directory tree stands in for it, with the port
// directory the kernel would create when the group is made.
class CmDefaultsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(root() + "/rdma_cm");
    fs::create_directories(root() + "/rdma_cm/rxe_a/ports/1");
    std::ofstream(root() + "/rdma_cm/rxe_a/ports/1/default_roce_tos") << "0\n";
    std::ofstream(root() + "/rdma_cm/rxe_a/ports/1/default_roce_mode") << "RoCE v2\n";
  }
  std::string root() const { return dir_.path(); }
  testutil::TempDir dir_;
};

TEST_F(CmDefaultsTest, WritesTheKernelsSpellings) {
  auto tos = root() + "/rdma_cm/rxe_a/ports/1/default_roce_tos";
  auto mode = root() + "/rdma_cm/rxe_a/ports/1/default_roce_mode";
  ASSERT_TRUE(set_cm_defaults(root(), "rxe_a", 1, {106, RoceMode::kV1}).ok());
  EXPECT_EQ(slurp(tos), "106");
  EXPECT_EQ(slurp(mode), "IB/RoCE v1");
  auto read = read_cm_defaults(root(), "rxe_a", 1);
  ASSERT_TRUE(read.ok()) << read.error().msg();
  EXPECT_EQ(read->tos, 106);
  EXPECT_EQ(read->mode, RoceMode::kV1);
}

TEST_F(CmDefaultsTest, SaysWhatIsMissing) {
  auto no_port = set_cm_defaults(root(), "rxe_a", 2, {106, std::nullopt});
  ASSERT_FALSE(no_port.ok());
  EXPECT_EQ(no_port.error().kind(), ErrorKind::kDeviceNotFound);
  EXPECT_NE(no_port.error().msg().find("has no port 2"), std::string::npos);

  auto no_configfs = set_cm_defaults(root() + "/nowhere", "rxe_a", 1, {106, std::nullopt});
  ASSERT_FALSE(no_configfs.ok());
  EXPECT_NE(no_configfs.error().msg().find("load the rdma_cm module"), std::string::npos)
      << no_configfs.error().msg();

  EXPECT_EQ(set_cm_defaults(root(), "../x", 1, {106, std::nullopt}).error().kind(),
            ErrorKind::kInvalidConfig);
  EXPECT_TRUE(set_cm_defaults(root() + "/nowhere", "rxe_a", 1, {}).ok()) << "nothing to do";
}

TEST_F(CmDefaultsTest, RemovesTheGroupIdempotently) {
  fs::create_directories(root() + "/rdma_cm/rxe_b");
  ASSERT_TRUE(remove_cm_group(root(), "rxe_b").ok());
  EXPECT_FALSE(fs::exists(root() + "/rdma_cm/rxe_b"));
  EXPECT_TRUE(remove_cm_group(root(), "rxe_b").ok());
}

TEST(RoceMode, ParsesConfigAndKernelSpellings) {
  EXPECT_EQ(*parse_roce_mode("v2", "roce.mode"), RoceMode::kV2);
  EXPECT_EQ(*parse_roce_mode("RoCE v2", "roce.mode"), RoceMode::kV2);
  EXPECT_EQ(*parse_roce_mode("v1", "roce.mode"), RoceMode::kV1);
  auto bad = parse_roce_mode("v3", "roce.mode");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().kind(), ErrorKind::kInvalidConfig);
  EXPECT_EQ(bad.error().msg(), "roce.mode: \"v3\" is not a RoCE mode (use \"v2\" or \"v1\")");
}

}  // namespace
}  // namespace rdmanet::rdma
