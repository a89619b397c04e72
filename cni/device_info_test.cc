#include "cni/device_info.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/testing/temp_dir.h"
#include "cni/error_code.h"

namespace rdmanet::cni {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// What a device plugin's file looks like once Multus has copied it for us.
const char* kFromDevicePlugin = R"({
  "type": "pci", "version": "1.0.0",
  "pci": {"pci-address": "0000:3b:00.2", "vhost-net": "/dev/vhost-net", "rdma-device": "old"},
  "vendor": {"kept": true}
})";

class DeviceInfoFile : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(tmp_.path().empty()) << "cannot create a temporary directory";
    dir_ = tmp_.path() + "/devinfo/cni";
    path_ = dir_ + "/rail0-abc_net1";
    previous_ = spdlog::default_logger();
    spdlog::set_default_logger(std::make_shared<spdlog::logger>(
        "test", std::make_shared<spdlog::sinks::ostream_sink_st>(log_)));
  }
  void TearDown() override { spdlog::set_default_logger(previous_); }

  static DeviceInfo sample() { return {"0000:3b:00.2", "0000:3b:00.0", "mlx5_3", ""}; }

  void put(const std::string& text) {
    fs::create_directories(dir_);
    std::ofstream(path_) << text;
  }
  json read() {
    std::ifstream in(path_);
    std::stringstream ss;
    ss << in.rdbuf();
    return json::parse(ss.str(), nullptr, false);
  }

  testutil::TempDir tmp_{"rdmanet-devinfo"};
  std::string dir_;
  std::string path_;
  std::ostringstream log_;
  std::shared_ptr<spdlog::logger> previous_;
};

mode_t mode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

const json kFresh = {{"type", "pci"},
                     {"version", "1.1.0"},
                     {"pci",
                      {{"pci-address", "0000:3b:00.2"},
                       {"pf-pci-address", "0000:3b:00.0"},
                       {"rdma-device", "mlx5_3"}}}};

TEST_F(DeviceInfoFile, FreshFileHasExactlyTheSpecKeys) {
  Status s = write_device_info(path_, sample());
  ASSERT_TRUE(s.ok()) << s.error().msg();
  EXPECT_EQ(read(), kFresh);
  EXPECT_EQ(log_.str(), "");
}

TEST_F(DeviceInfoFile, CreatesMissingDirectoriesPrivatelyAndTheFileReadOnly) {
  mode_t before = mode_of(tmp_.path());
  ASSERT_TRUE(write_device_info(path_, sample()).ok());
  EXPECT_EQ(mode_of(tmp_.path()), before) << "an existing directory was changed";
  EXPECT_EQ(mode_of(tmp_.path() + "/devinfo"), 0700u);
  EXPECT_EQ(mode_of(dir_), 0700u);
  EXPECT_EQ(mode_of(path_), 0444u);
}

TEST_F(DeviceInfoFile, MergeKeepsForeignKeysAndSetsOurs) {
  put(kFromDevicePlugin);
  ::chmod(path_.c_str(), 0644);
  DeviceInfo info = sample();
  info.representor_device = "pf0vf2";
  ASSERT_TRUE(write_device_info(path_, info).ok());
  json want = {{"type", "pci"},
               {"version", "1.1.0"},
               {"pci",
                {{"pci-address", "0000:3b:00.2"},
                 {"vhost-net", "/dev/vhost-net"},
                 {"pf-pci-address", "0000:3b:00.0"},
                 {"rdma-device", "mlx5_3"},
                 {"representor-device", "pf0vf2"}}},
               {"vendor", {{"kept", true}}}};
  EXPECT_EQ(read(), want);
  EXPECT_EQ(mode_of(path_), 0444u);
  EXPECT_EQ(log_.str(), "");
}

TEST_F(DeviceInfoFile, EmptyFieldsLeaveWhatIsThere) {
  put(R"({"type": "pci", "version": "1.1.0",
          "pci": {"pci-address": "0000:3b:00.2", "pf-pci-address": "0000:3b:00.1"}})");
  DeviceInfo info = sample();
  info.pf_pci_address.clear();
  ASSERT_TRUE(write_device_info(path_, info).ok());
  EXPECT_EQ(read()["pci"]["pf-pci-address"], "0000:3b:00.1");
  EXPECT_EQ(read()["pci"]["rdma-device"], "mlx5_3");
}

TEST_F(DeviceInfoFile, NewerMinorVersionIsKept) {
  put(R"({"type": "pci", "version": "1.2.0", "pci": {"pci-address": "0000:3b:00.2"}})");
  ASSERT_TRUE(write_device_info(path_, sample()).ok());
  EXPECT_EQ(read()["version"], "1.2.0");
}

TEST_F(DeviceInfoFile, WrongPciAddressIsCorrectedWithAWarning) {
  put(R"({"type": "pci", "version": "1.1.0", "pci": {"pci-address": "0000:3b:00.7"}})");
  ASSERT_TRUE(write_device_info(path_, sample()).ok());
  EXPECT_EQ(read()["pci"]["pci-address"], "0000:3b:00.2");
  EXPECT_NE(log_.str().find("0000:3b:00.7"), std::string::npos) << log_.str();
}

// The path comes from the runtime: a file there that is not a device-info
// document (it could be any file on the node) is left alone, and ADD fails.
TEST_F(DeviceInfoFile, UnusableFileIsRefusedAndLeftAlone) {
  for (const char* text : {
           "{\"type\": \"pci\", \"pci\": ",                                    // cut short
           "[1, 2]",                                                           // not an object
           R"({"type": "vdpa", "version": "1.1.0", "vdpa": {"path": "/x"}})",  // another kind
           R"({"type": "pci", "pci": "0000:3b:00.2"})",                        // pci not a map
           R"({"type": "pci", "version": "2.0.0", "pci": {}})",                // unknown major
           R"({"type": "pci", "version": 1, "pci": {}})",                      // version a number
       }) {
    put(text);
    Status s = write_device_info(path_, sample());
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_EQ(s.error().kind(), ErrorKind::kIo);
    EXPECT_NE(s.error().msg().find(path_), std::string::npos) << s.error().msg();
    EXPECT_NE(s.error().msg().find("refusing to replace"), std::string::npos);
    std::ifstream in(path_);
    std::stringstream left;
    left << in.rdbuf();
    EXPECT_EQ(left.str(), text);
  }
}

TEST_F(DeviceInfoFile, NulByteAndFifoAreRefused) {
  std::string with_nul = dir_ + "/a";
  with_nul += '\0';
  with_nul += "/../x";
  Status nul = write_device_info(with_nul, sample());
  ASSERT_FALSE(nul.ok());
  EXPECT_NE(nul.error().msg().find("NUL"), std::string::npos);
  fs::create_directories(dir_);
  ASSERT_EQ(::mkfifo(path_.c_str(), 0600), 0);
  Status fifo = write_device_info(path_, sample());  // must not block on the open
  ASSERT_FALSE(fifo.ok());
  EXPECT_NE(fifo.error().msg().find("not a regular file"), std::string::npos);
}

TEST_F(DeviceInfoFile, EmptyFileIsNoDocument) {
  put("");
  ASSERT_TRUE(write_device_info(path_, sample()).ok());
  EXPECT_EQ(read(), kFresh);
  EXPECT_EQ(log_.str(), "");
}

TEST_F(DeviceInfoFile, SymlinkIsNotFollowed) {
  std::string target = tmp_.path() + "/elsewhere";
  std::ofstream(target) << "precious";
  fs::create_directories(dir_);
  fs::create_symlink(target, path_);
  Status s = write_device_info(path_, sample());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(error_code(s.error()), 5);
  std::ifstream in(target);
  std::string content;
  in >> content;
  EXPECT_EQ(content, "precious");
}

TEST_F(DeviceInfoFile, RelativeOrClimbingPathIsInvalidConfig) {
  for (const std::string& path :
       {std::string("devinfo/x.json"), std::string(), std::string("/var/run/../../etc/passwd"),
        std::string("/tmp/..")}) {
    Status w = write_device_info(path, sample());
    ASSERT_FALSE(w.ok()) << path;
    EXPECT_EQ(error_code(w.error()), 7);
    EXPECT_NE(w.error().msg().find("runtimeConfig.CNIDeviceInfoFile"), std::string::npos);
    Status r = remove_device_info(path);
    ASSERT_FALSE(r.ok()) << path;
    EXPECT_EQ(error_code(r.error()), 7);
  }
  EXPECT_FALSE(fs::exists("devinfo"));
}

TEST_F(DeviceInfoFile, MissingPciAddressIsABug) {
  Status s = write_device_info(path_, {});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().kind(), ErrorKind::kInternal);
  EXPECT_FALSE(fs::exists(path_));
}

TEST_F(DeviceInfoFile, RemoveIsIdempotent) {
  ASSERT_TRUE(write_device_info(path_, sample()).ok());
  ASSERT_TRUE(remove_device_info(path_).ok());
  EXPECT_FALSE(fs::exists(path_));
  EXPECT_TRUE(remove_device_info(path_).ok());
  EXPECT_TRUE(remove_device_info(tmp_.path() + "/no/such/dir/file").ok());
}

// The path comes from state: only the document written for this device is removed.
TEST_F(DeviceInfoFile, RemoveLeavesWhatIsNotTheDocumentWritten) {
  ASSERT_TRUE(write_device_info(path_, sample()).ok());
  Status other = remove_device_info(path_, "0000:3b:00.9");
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.error().msg().find("0000:3b:00.9"), std::string::npos) << other.error().msg();
  EXPECT_TRUE(fs::exists(path_));
  for (const std::string& text : {std::string("root:x:0:0::/root:/bin/sh\n"),
                                  std::string(R"({"pci":{"pci-address":"0000:3b:00.2"}})"),
                                  std::string(R"({"type":"vdpa"})")}) {
    std::ofstream(path_, std::ios::trunc) << text;
    EXPECT_FALSE(remove_device_info(path_, "0000:3b:00.2").ok()) << text;
    EXPECT_TRUE(fs::exists(path_)) << text;
  }
  fs::remove(path_);
  ASSERT_TRUE(write_device_info(path_, sample()).ok());
  EXPECT_TRUE(remove_device_info(path_, "0000:3b:00.2").ok());
  EXPECT_FALSE(fs::exists(path_));
}

TEST_F(DeviceInfoFile, NoTemporaryFilesAreLeft) {
  ASSERT_TRUE(write_device_info(path_, sample()).ok());
  ASSERT_TRUE(write_device_info(path_, sample()).ok());
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir_)) {
    names.push_back(e.path().filename().string());
  }
  EXPECT_EQ(names, std::vector<std::string>{"rail0-abc_net1"});
}

}  // namespace
}  // namespace rdmanet::cni
