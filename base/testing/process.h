// For tests: runs a binary the way a container runtime runs a CNI plugin, with
// exactly the given environment and stdin, and collects its stdout and exit.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace rdmanet::testutil {

struct Outcome {
  int status = 0;  // exit code, or -signal
  std::string out;
};

// Starts `binary` with exactly `env` and `input` on stdin; returns its pid and
// a pipe fd carrying its stdout. stdin is fed from a file so the child never
// blocks on us.
inline pid_t spawn(const std::string& binary, const std::map<std::string, std::string>& env,
                   const std::string& input, const std::string& scratch_dir, int* out_fd) {
  static int counter = 0;
  std::string in_path =
      scratch_dir + "/stdin." + std::to_string(getpid()) + "." + std::to_string(counter++);
  int in_fd = open(in_path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (in_fd < 0 || write(in_fd, input.data(), input.size()) != static_cast<ssize_t>(input.size())) {
    return -1;
  }
  lseek(in_fd, 0, SEEK_SET);
  unlink(in_path.c_str());
  std::array<int, 2> out{};
  if (pipe2(out.data(), O_CLOEXEC) != 0) {
    close(in_fd);
    return -1;
  }
  std::vector<std::string> env_strings;
  env_strings.reserve(env.size());
  for (const auto& [k, v] : env) {
    env_strings.push_back(k + "=" + v);
  }
  std::vector<char*> envp;
  envp.reserve(env_strings.size() + 1);
  for (auto& s : env_strings) {
    envp.push_back(s.data());
  }
  envp.push_back(nullptr);
  std::string bin = binary;
  std::array<char*, 2> argv = {bin.data(), nullptr};
  pid_t pid = fork();
  if (pid == 0) {
    dup2(in_fd, 0);
    dup2(out[1], 1);
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 2);
    execve(bin.c_str(), argv.data(), envp.data());
    _exit(127);
  }
  close(in_fd);
  close(out[1]);
  *out_fd = out[0];
  return pid;
}

inline Outcome finish(pid_t pid, int out_fd) {
  Outcome run;
  std::array<char, 4096> buf{};
  ssize_t n = 0;
  while ((n = read(out_fd, buf.data(), buf.size())) > 0 || (n < 0 && errno == EINTR)) {
    if (n > 0) {
      run.out.append(buf.data(), static_cast<size_t>(n));
    }
  }
  close(out_fd);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  run.status = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  return run;
}

inline Outcome run(const std::string& binary, const std::map<std::string, std::string>& env,
                   const std::string& input, const std::string& scratch_dir) {
  int out_fd = -1;
  pid_t pid = spawn(binary, env, input, scratch_dir, &out_fd);
  if (pid < 0) {
    return {-1000, "spawn failed"};
  }
  return finish(pid, out_fd);
}

// The start time of process `pid` (field 22 of /proc/<pid>/stat, in clock ticks since boot),
// which tells it from a later process with the same pid; empty when there is none.
inline std::string start_time_of(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const auto comm_end = stat.rfind(')');
  if (comm_end == std::string::npos) {
    return "";
  }
  std::istringstream fields(stat.substr(comm_end + 1));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
  }
  return field;
}

// Waits until process `pid` (not necessarily a child of ours) has ended, for at most `limit`.
// `start_time` is the process's start_time_of(), taken while it surely ran: a pid that another
// process took meanwhile counts as ended. True when it ended within the limit.
inline bool wait_for_end(pid_t pid, const std::string& start_time,
                         std::chrono::milliseconds limit) {
  const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) {
    return errno == ESRCH;
  }
  // A later process may have taken the pid before it was opened: its start time tells.
  bool ended = start_time_of(pid) != start_time;
  if (!ended) {
    pollfd p{fd, POLLIN, 0};
    int n = 0;
    while ((n = ::poll(&p, 1, static_cast<int>(limit.count()))) < 0 && errno == EINTR) {
    }
    ended = n > 0;
  }
  ::close(fd);
  return ended;
}

}  // namespace rdmanet::testutil
