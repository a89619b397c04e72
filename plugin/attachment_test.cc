#include "plugin/attachment.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "base/testing/temp_dir.h"

namespace rdmanet::plugin {
namespace {

namespace fs = std::filesystem;

// Steps as the test records them (each step's own record struct says the same).
struct IpamStep {
  static constexpr StepKind kKind = StepKind::kIpam;
  nlohmann::json to_json() const { return nlohmann::json::object(); }
};
struct DeviceInfoStep {
  static constexpr StepKind kKind = StepKind::kDeviceInfo;
  std::string path;
  nlohmann::json to_json() const { return {{"path", path}}; }
};

UndoContext in(const std::string& state_dir) { return {state_dir, {}, IpamPlugins{{}, 1}}; }

AttachmentRecord record_of(const std::string& network) {
  AttachmentRecord r;
  r.network = network;
  r.container_id = "c";
  r.ifname = "net1";
  return r;  // no netns: the pod counts as gone, as after a reboot
}

// A step whose record cannot be written must not run, so it must not be recorded either:
// an undo would otherwise "undo" what never happened.
TEST(Attachment, AStepWhoseRecordCannotBeWrittenIsNotRecorded) {
  testutil::TempDir tmp("rdmanet-attachment");
  ASSERT_FALSE(tmp.path().empty());
  // The network's directory is in the way as a file: every save fails.
  fs::create_directories(tmp.path() + "/state");
  std::ofstream(tmp.path() + "/state/rail0") << "not a directory";
  auto a = Attachment::for_undo(in(tmp.path() + "/state"), record_of("rail0"));
  ASSERT_TRUE(a) << a.error().msg();
  auto s = a->record(IpamStep{});
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().kind(), ErrorKind::kIo);
  EXPECT_TRUE(a->rec().steps.empty());
}

TEST(Attachment, UndoOfNothingRecordedRemovesTheRecord) {
  testutil::TempDir tmp("rdmanet-attachment");
  ASSERT_FALSE(tmp.path().empty());
  auto a = Attachment::for_undo(in(tmp.path() + "/state"), record_of("rail0"));
  ASSERT_TRUE(a) << a.error().msg();
  ASSERT_TRUE(a->record(DeviceInfoStep{tmp.path() + "/devinfo"}));
  StateStore store(tmp.path() + "/state");
  ASSERT_TRUE(store.load(a->rec().id())->has_value()) << "record() writes the record";
  std::ofstream(tmp.path() + "/devinfo") << R"({"type":"pci"})";
  ASSERT_TRUE(a->undo());
  EXPECT_FALSE(fs::exists(tmp.path() + "/devinfo")) << "the inverse ran";
  EXPECT_FALSE(store.load(a->rec().id())->has_value()) << "the record went with the last step";
}

}  // namespace
}  // namespace rdmanet::plugin
