#include "netns/netns_sysfs.h"

#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <nlohmann/json.hpp>

#include "base/files.h"
#include "base/json_fields.h"

namespace rdmanet::netns {

namespace {

// The child's whole life: join, mount, run, report, exit. Never returns.
[[noreturn]] void run_child(const Netns& ns, const std::function<Expected<std::string>()>& fn,
                            int out, pid_t parent) {
  // Dies with the plugin, and holds none of its files: an orphaned reader must not keep
  // the plugin's device locks (flock belongs to the open file, which fork shares).
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) {
    _exit(1);
  }
  nlohmann::json reply;
  auto fail = [&](const std::string& what, int err) {
    Error e = sys_error(what, err);
    reply = {{"ok", false}, {"kind", static_cast<int>(e.kind())}, {"msg", e.msg()}};
  };
  if (setns(ns.fd(), CLONE_NEWNET) != 0) {
    fail("join netns " + ns.path(), errno);
  } else if (unshare(CLONE_NEWNS) != 0) {
    fail("new mount namespace", errno);
  } else if (mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0) {
    // Slave, so nothing mounted here propagates back to the host.
    fail("make mounts private", errno);
  } else if (mount("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
    fail("mount sysfs of netns " + ns.path(), errno);
  } else {
    // The netns fd has served; from here on only stdio and the answer pipe stay open.
    if (out != 3) {
      dup2(out, 3);
      out = 3;
    }
    close_range(4, ~0U, 0);
    auto result = fn();
    if (result) {
      reply = {{"ok", true}, {"text", *result}};
    } else {
      reply = {{"ok", false},
               {"kind", static_cast<int>(result.error().kind())},
               {"msg", result.error().msg()}};
    }
  }
  // A reply that does not arrive is the parent's error to report.
  (void)write_all(out, reply.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  _exit(0);
}

}  // namespace

Expected<std::string> in_netns_sysfs(const Netns& ns,
                                     const std::function<Expected<std::string>()>& fn,
                                     std::chrono::milliseconds timeout) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return sys_error("pipe", errno);
  }
  Fd read_end(fds[0]);
  Fd write_end(fds[1]);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    return sys_error("fork", errno);
  }
  if (pid == 0) {
    read_end.reset();
    run_child(ns, fn, write_end.get(), parent);
  }
  write_end.reset();

  std::string text;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  bool timed_out = false;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd pfd{read_end.get(), POLLIN, 0};
    int ready = poll(&pfd, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) {
      continue;
    }
    if (ready <= 0) {
      timed_out = ready == 0;
      break;
    }
    char buf[4096];
    ssize_t n = read(read_end.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      break;
    }
    text.append(buf, static_cast<size_t>(n));
  }
  if (timed_out) {
    kill(pid, SIGKILL);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return Error(ErrorKind::kInternal, "reading sysfs in netns " + ns.path() +
                                           ": no answer within " + std::to_string(timeout.count()) +
                                           " ms");
  }
  auto reply = parse_json(text);
  if (!reply.is_object() || !reply.contains("ok")) {
    return Error(ErrorKind::kInternal, "reading sysfs in netns " + ns.path() +
                                           ": the reader died (status " + std::to_string(status) +
                                           ")");
  }
  if (reply["ok"].get<bool>()) {
    return reply.value("text", "");
  }
  return Error(static_cast<ErrorKind>(reply.value("kind", static_cast<int>(ErrorKind::kInternal))),
               reply.value("msg", ""));
}

}  // namespace rdmanet::netns
