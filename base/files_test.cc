#include "base/files.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/fd.h"
#include "base/testing/temp_dir.h"

namespace rdmanet {
namespace {

namespace fs = std::filesystem;

mode_t mode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

std::string content_of(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs `question` in a child of a time namespace whose boot happened `seconds_ago`, as a
// process started after a reboot sees it (CLOCK_BOOTTIME is per time namespace; needs
// root). Returns its answer, or fails the test.
bool asked_after_a_boot(int seconds_ago, bool (*question)(const std::string&),
                        const std::string& arg) {
  timespec up{};
  ::clock_gettime(CLOCK_BOOTTIME, &up);
  pid_t pid = ::fork();
  if (pid == 0) {
    if (::unshare(CLONE_NEWTIME) != 0) {
      ::_exit(3);
    }
    std::ofstream offsets("/proc/self/timens_offsets");
    offsets << "boottime " << -(up.tv_sec - seconds_ago) << " 0\n";
    offsets.close();
    if (!offsets) {
      ::_exit(4);
    }
    pid_t inner = ::fork();  // only children enter the new time namespace
    if (inner == 0) {
      ::_exit(question(arg) ? 1 : 0);
    }
    int status = 0;
    ::waitpid(inner, &status, 0);
    ::_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 5);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) <= 1)
      << "time namespace (needs root and Linux 5.6+): status " << status;
  return WIFEXITED(status) && WEXITSTATUS(status) == 1;
}

class AtomicFile : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(tmp_.path().empty()) << "cannot create a temporary directory";
  }
  testutil::TempDir tmp_{"rdmanet-atomic"};
};

TEST_F(AtomicFile, ReplacesWithExactlyTheModeWhateverTheUmask) {
  std::string path = tmp_.path() + "/f";
  std::ofstream(path) << "old";
  mode_t umask_before = ::umask(0077);
  Status s = write_file_atomically(path, "new", 0644, Survives::kMachineCrash);
  ::umask(umask_before);
  ASSERT_TRUE(s.ok()) << s.error().msg();
  EXPECT_EQ(content_of(path), "new");
  EXPECT_EQ(mode_of(path), 0644u);
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

TEST_F(AtomicFile, ReplacesAStaleReadOnlyTemporaryFile) {
  std::string path = tmp_.path() + "/f";
  std::ofstream(path + ".tmp") << "left by a crash";
  ::chmod((path + ".tmp").c_str(), 0444);
  ASSERT_TRUE(write_file_atomically(path, "new", 0600, Survives::kProcessCrash).ok());
  EXPECT_EQ(content_of(path), "new");
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

TEST_F(AtomicFile, FailedRenameLeavesNoTemporaryFile) {
  std::string path = tmp_.path() + "/d";
  fs::create_directories(path + "/inside");
  Status s = write_file_atomically(path, "x", 0600, Survives::kProcessCrash);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().kind(), ErrorKind::kIo);
  EXPECT_NE(s.error().msg().find(path), std::string::npos) << s.error().msg();
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  EXPECT_TRUE(fs::is_directory(path + "/inside"));
}

TEST_F(AtomicFile, MoveIntoPlaceReplacesAFileAndNeverFollowsALink) {
  const std::string dir = tmp_.path();
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(fd.valid());
  std::ofstream(dir + "/f") << "old";
  std::ofstream(dir + "/f.tmp") << "new";
  EXPECT_EQ(move_into_place(fd.get(), "f.tmp", "f"), 0);
  EXPECT_EQ(content_of(dir + "/f"), "new");
  EXPECT_FALSE(fs::exists(dir + "/f.tmp")) << "the old content is removed";

  std::ofstream(dir + "/g.tmp") << "first";
  EXPECT_EQ(move_into_place(fd.get(), "g.tmp", "g"), 0) << "nothing there yet";
  EXPECT_EQ(content_of(dir + "/g"), "first");

  std::ofstream(dir + "/target") << "not ours";
  fs::create_symlink(dir + "/target", dir + "/l");
  std::ofstream(dir + "/l.tmp") << "ours";
  EXPECT_EQ(move_into_place(fd.get(), "l.tmp", "l"), 0);
  EXPECT_FALSE(fs::is_symlink(dir + "/l")) << "the link is replaced, not followed";
  EXPECT_EQ(content_of(dir + "/l"), "ours");
  EXPECT_EQ(content_of(dir + "/target"), "not ours");

  fs::create_directories(dir + "/d/inside");
  std::ofstream(dir + "/d.tmp") << "x";
  EXPECT_NE(move_into_place(fd.get(), "d.tmp", "d"), 0) << "a directory is not replaced";
  EXPECT_TRUE(fs::is_directory(dir + "/d/inside"));
}

TEST_F(AtomicFile, AFileChangedBeforeTheBootIsOneOnlyThen) {
  std::string path = tmp_.path() + "/record";
  std::ofstream(path) << "";
  ::sleep(4);  // times are whole seconds (up to a second off each); the boot below is 1 s ago
  EXPECT_FALSE(changed_before_this_boot(path)) << "changed in this boot";
  EXPECT_FALSE(changed_before_this_boot(tmp_.path() + "/missing"));
  EXPECT_TRUE(asked_after_a_boot(1, changed_before_this_boot, path))
      << "a process of a boot 1 s ago sees a file changed 4 s ago as from before its boot";
  EXPECT_FALSE(asked_after_a_boot(60, changed_before_this_boot, path));
  // Written again, after a boot 5 s ago: changed in that boot.
  ASSERT_TRUE(write_file_atomically(path, "{}", 0600, Survives::kProcessCrash).ok());
  EXPECT_FALSE(asked_after_a_boot(5, changed_before_this_boot, path));
}

TEST_F(AtomicFile, MakeDirectoriesCreatesOnlyWhatIsMissing) {
  ::chmod(tmp_.path().c_str(), 0755);
  ASSERT_TRUE(make_directories(tmp_.path() + "/a//b/c", 0700).ok());
  EXPECT_EQ(mode_of(tmp_.path()), 0755u);
  EXPECT_EQ(mode_of(tmp_.path() + "/a"), 0700u);
  EXPECT_EQ(mode_of(tmp_.path() + "/a/b/c"), 0700u);
  EXPECT_TRUE(make_directories(tmp_.path() + "/a/b/c", 0700).ok()) << "not idempotent";

  std::ofstream(tmp_.path() + "/file") << "x";
  Status s = make_directories(tmp_.path() + "/file/sub", 0700);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().msg().find(tmp_.path() + "/file"), std::string::npos) << s.error().msg();
}

TEST_F(AtomicFile, PrivateDirectoryCheck) {
  std::string dir = tmp_.path() + "/d";
  ASSERT_TRUE(make_directories(dir, 0700).ok());
  EXPECT_TRUE(check_private_directory(dir).ok());
  fs::permissions(dir, fs::perms(0755));
  EXPECT_TRUE(check_private_directory(dir).ok());  // readable by others is fine
  for (auto mode : {0775, 0757, 01777}) {
    fs::permissions(dir, fs::perms(mode));
    Status s = check_private_directory(dir);
    ASSERT_FALSE(s.ok()) << std::oct << mode;
    EXPECT_NE(s.error().msg().find(dir), std::string::npos);
  }
  fs::create_directory_symlink(dir, tmp_.path() + "/link");
  Status link = check_private_directory(tmp_.path() + "/link");
  ASSERT_FALSE(link.ok());
  EXPECT_NE(link.error().msg().find("symlink"), std::string::npos);
  ASSERT_EQ(::chown(dir.c_str(), 65534, 0), 0);
  fs::permissions(dir, fs::perms(0700));
  Status other = check_private_directory(dir);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.error().msg().find("is uid 65534"), std::string::npos) << other.error().msg();
}

TEST_F(AtomicFile, DirectoryEntriesAreTheNamesWithoutDots) {
  std::string dir = tmp_.path() + "/d";
  ASSERT_TRUE(make_directories(dir + "/sub", 0700).ok());
  std::ofstream(dir + "/a.json") << "{}";
  auto names = directory_entries(dir);
  ASSERT_TRUE(names.ok()) << names.error().msg();
  std::sort(names->begin(), names->end());
  EXPECT_EQ(*names, (std::vector<std::string>{"a.json", "sub"}));
  auto none = directory_entries(dir + "/missing");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  auto file = directory_entries(dir + "/a.json");
  ASSERT_FALSE(file.ok());
  EXPECT_NE(file.error().msg().find(dir + "/a.json"), std::string::npos) << file.error().msg();
}

class ReadFile : public AtomicFile {
 protected:
  void SetUp() override {
    AtomicFile::SetUp();
    dir_.reset(::open(tmp_.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(dir_.valid());
  }
  Expected<std::optional<std::string>> read(const std::string& name,
                                            const ReadOptions& options = {}) {
    return read_file_at(dir_.get(), name, tmp_.path() + "/" + name, options);
  }
  Fd dir_;
};

TEST_F(ReadFile, ReadsAFileOfTheDirectoryAndNothingForNoFile) {
  std::ofstream(tmp_.path() + "/f") << "content";
  auto text = read("f");
  ASSERT_TRUE(text.ok()) << text.error().msg();
  EXPECT_EQ(text->value_or("none"), "content");
  auto none = read("missing");
  ASSERT_TRUE(none.ok()) << none.error().msg();
  EXPECT_FALSE(*none);
  auto by_path = read_file(tmp_.path() + "/f");
  ASSERT_TRUE(by_path.ok()) << by_path.error().msg();
  EXPECT_EQ(by_path->value_or("none"), "content");
}

// procfs says 0 bytes, sysfs 4096, whatever the file holds.
TEST_F(ReadFile, ReadsToTheEndWhateverTheSizeSays) {
  auto status = read_file("/proc/self/status");
  ASSERT_TRUE(status.ok()) << status.error().msg();
  ASSERT_TRUE(*status);
  EXPECT_NE((*status)->find("\nPid:"), std::string::npos) << **status;
}

TEST_F(ReadFile, RefusesWhatIsNotARegularFileWithoutFollowingOrBlocking) {
  std::ofstream(tmp_.path() + "/target") << "elsewhere";
  fs::create_symlink(tmp_.path() + "/target", tmp_.path() + "/link");
  ASSERT_EQ(::mkfifo((tmp_.path() + "/fifo").c_str(), 0600), 0);
  fs::create_directory(tmp_.path() + "/dir");
  for (const auto& [name, type] : {std::pair{"link", "a symlink"}, std::pair{"fifo", "a FIFO"},
                                   std::pair{"dir", "a directory"}}) {
    auto text = read(name);  // a FIFO must not block
    ASSERT_FALSE(text.ok()) << name;
    EXPECT_EQ(text.error().kind(), ErrorKind::kIo);
    EXPECT_EQ(text.error().msg(),
              "read " + tmp_.path() + "/" + name + ": not a regular file (" + type + ")");
  }
}

TEST_F(ReadFile, RefusesMoreThanTheLimit) {
  std::ofstream(tmp_.path() + "/f") << std::string(10000, 'a');
  auto exact = read("f", {.max_size = 10000});
  ASSERT_TRUE(exact.ok()) << exact.error().msg();
  EXPECT_EQ(exact->value_or("").size(), 10000U);
  auto over = read("f", {.max_size = 9999});
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error().kind(), ErrorKind::kIo);
  EXPECT_NE(over.error().msg().find("larger than 9999 bytes"), std::string::npos)
      << over.error().msg();
}

// Dir::read_own: a hard link to a file elsewhere, or a file of another user, is not one
// rdmanet wrote.
TEST_F(ReadFile, OnlyOwnRefusesAnotherLinkOrAnotherUsersFile) {
  std::ofstream(tmp_.path() + "/f") << "ours";
  auto own = read("f", {.only_own = true});
  ASSERT_TRUE(own.ok()) << own.error().msg();
  EXPECT_EQ(own->value_or(""), "ours");
  ASSERT_EQ(::link((tmp_.path() + "/f").c_str(), (tmp_.path() + "/g").c_str()), 0);
  auto linked = read("f", {.only_own = true});
  ASSERT_FALSE(linked.ok());
  EXPECT_NE(linked.error().msg().find("not a file rdmanet wrote"), std::string::npos);
  EXPECT_NE(linked.error().msg().find("2 links"), std::string::npos) << linked.error().msg();
  EXPECT_TRUE(read("f").ok()) << "only when asked";

  std::ofstream(tmp_.path() + "/theirs") << "x";
  ASSERT_EQ(::chown((tmp_.path() + "/theirs").c_str(), 65534, 65534), 0) << "needs root";
  auto theirs = read("theirs", {.only_own = true});
  ASSERT_FALSE(theirs.ok());
  EXPECT_NE(theirs.error().msg().find("owner uid 65534"), std::string::npos)
      << theirs.error().msg();
}

Error refused_as_state(const std::string& what, Refusal why, const struct stat& st) {
  if (why == Refusal::kTooLarge) {
    return Error(ErrorKind::kState, what + " too large");
  }
  return Error(ErrorKind::kState, what + " is " + file_type_name(st.st_mode));
}

TEST_F(ReadFile, TheCallerWordsARefusal) {
  fs::create_symlink(tmp_.path() + "/target", tmp_.path() + "/link");
  std::ofstream(tmp_.path() + "/big") << "12345";
  const ReadOptions options{.max_size = 4, .refused = &refused_as_state};
  auto link = read("link", options);
  ASSERT_FALSE(link.ok());
  EXPECT_EQ(link.error().kind(), ErrorKind::kState);
  EXPECT_EQ(link.error().msg(), tmp_.path() + "/link is a symlink");
  auto big = read("big", options);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error().msg(), tmp_.path() + "/big too large");
}

TEST_F(AtomicFile, WriteAllAtAnOffsetLeavesThePositionAlone) {
  Fd fd(::open((tmp_.path() + "/f").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  ASSERT_TRUE(fd.valid());
  ASSERT_EQ(write_all(fd.get(), "abcdef"), 0);
  ASSERT_EQ(write_all(fd.get(), "XY", 2), 0);
  ASSERT_EQ(write_all(fd.get(), "!"), 0);
  EXPECT_EQ(content_of(tmp_.path() + "/f"), "abXYef!");
}

TEST(AbsolutePath, RefusesRelativeNulAndClimbing) {
  EXPECT_TRUE(check_absolute_path("/var/lib/cni", "stateDir", ErrorKind::kState).ok());
  EXPECT_TRUE(check_absolute_path("/a/..b/c..", "stateDir", ErrorKind::kState).ok());
  for (const std::string& bad : {std::string("rel"), std::string(""), std::string("/a/../b"),
                                 std::string("/.."), std::string("/a/b\0c", 6)}) {
    Status s = check_absolute_path(bad, "stateDir", ErrorKind::kState);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.error().kind(), ErrorKind::kState);
    EXPECT_NE(s.error().msg().find("stateDir"), std::string::npos) << s.error().msg();
  }
}

}  // namespace
}  // namespace rdmanet
