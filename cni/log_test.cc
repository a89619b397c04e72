// The log file: private, not inherited, and no logged value can forge a line.
#include "cni/log.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "base/testing/temp_dir.h"

namespace rdmanet::cni {
namespace {

TEST(Log, FileIsPrivateAndControlBytesAreEscaped) {
  testutil::TempDir tmp{"rdmanet-log"};
  NetConf conf;
  conf.log_file = tmp.path() + "/rdmanet.log";
  conf.log_level = LogLevel::kInfo;
  init_logging("rdmanet-test");
  configure_logging(conf, "ADD net c/eth0");
  // As a pod author could put it in a MAC or an address annotation.
  spdlog::error("invalid hardware address \"x\n2026-01-01 error forged line\x1b[2J\"");
  spdlog::default_logger()->flush();
  init_logging("rdmanet-test");  // closes the file

  std::ifstream in(conf.log_file);
  std::stringstream text;
  text << in.rdbuf();
  std::string log = text.str();
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << log;
  EXPECT_NE(log.find("\\x0a2026-01-01 error forged line\\x1b[2J"), std::string::npos) << log;
  struct stat st {};
  ASSERT_EQ(::stat(conf.log_file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600U);
}

// A '%' in what the call names (an interface, on a STATUS or GC call that does not check it)
// stays text in the line prefix; it must not become a pattern flag.
TEST(Log, PercentInTheContextIsText) {
  testutil::TempDir tmp{"rdmanet-log"};
  NetConf conf;
  conf.log_file = tmp.path() + "/rdmanet.log";
  conf.log_level = LogLevel::kInfo;
  init_logging("rdmanet-test");
  configure_logging(conf, "GC net c/net%d%v%n");
  spdlog::error("the message");
  spdlog::default_logger()->flush();
  init_logging("rdmanet-test");

  std::ifstream in(conf.log_file);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("GC net c/net%d%v%n: the message"), std::string::npos) << text.str();
}

// Root must not append to (or chmod) whatever a symlink at the logFile path points to, nor
// block on a FIFO there; a file someone else created keeps its mode.
TEST(Log, FileIsNeverFollowedNorReModed) {
  testutil::TempDir tmp{"rdmanet-log"};
  std::string target = tmp.path() + "/shadow";
  std::ofstream(target) << "root:x:0:0\n";
  ::chmod(target.c_str(), 0644);
  ASSERT_EQ(::symlink(target.c_str(), (tmp.path() + "/link.log").c_str()), 0);
  ASSERT_EQ(::mkfifo((tmp.path() + "/fifo.log").c_str(), 0600), 0);
  std::ofstream(tmp.path() + "/theirs.log") << "";
  ::chmod((tmp.path() + "/theirs.log").c_str(), 0644);
  for (const char* name : {"/link.log", "/fifo.log", "/theirs.log"}) {
    NetConf conf;
    conf.log_file = tmp.path() + name;
    conf.log_level = LogLevel::kInfo;
    init_logging("rdmanet-test");
    configure_logging(conf, "ADD net c/eth0");  // returns: a FIFO must not block
    spdlog::error("a line");
    init_logging("rdmanet-test");
  }
  std::ifstream in(target);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), "root:x:0:0\n") << "appended through the symlink";
  struct stat st {};
  ASSERT_EQ(::stat(target.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644U);
  ASSERT_EQ(::stat((tmp.path() + "/theirs.log").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644U) << "a file rdmanet did not create was chmod-ed";
  EXPECT_GT(st.st_size, 0) << "a regular file is still appended to";
}

TEST(Log, MissingDirectoriesAreCreatedPrivate) {
  testutil::TempDir tmp{"rdmanet-log"};
  NetConf conf;
  conf.log_file = tmp.path() + "/new/deeper/rdmanet.log";
  init_logging("rdmanet-test");
  configure_logging(conf, "ADD net c/eth0");
  spdlog::warn("hello");
  spdlog::default_logger()->flush();
  init_logging("rdmanet-test");
  for (const char* dir : {"/new", "/new/deeper"}) {
    struct stat st {};
    ASSERT_EQ(::stat((tmp.path() + dir).c_str(), &st), 0) << dir;
    EXPECT_EQ(st.st_mode & 0777, 0700U) << dir;
  }
  struct stat st {};
  EXPECT_EQ(::stat(conf.log_file.c_str(), &st), 0);
}

TEST(Log, FileIsNotInheritedByChildren) {
  testutil::TempDir tmp{"rdmanet-log"};
  NetConf conf;
  conf.log_file = tmp.path() + "/rdmanet.log";
  init_logging("rdmanet-test");
  configure_logging(conf, "ADD");
  bool found = false;
  for (int fd = 3; fd < 256; ++fd) {
    char target[512] = {};
    std::string link = "/proc/self/fd/" + std::to_string(fd);
    ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
    if (n > 0 && conf.log_file == target) {
      found = true;
      EXPECT_NE(::fcntl(fd, F_GETFD) & FD_CLOEXEC, 0) << "the IPAM child would inherit it";
    }
  }
  EXPECT_TRUE(found);
  init_logging("rdmanet-test");
}

}  // namespace
}  // namespace rdmanet::cni
