#include "cni/delegate.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "base/fd.h"
#include "base/json_fields.h"
#include "cni/error_code.h"
#include "cni/skel.h"

extern char** environ;

namespace rdmanet::cni {

namespace {

constexpr size_t kMaxOutput = 16 << 20;

struct Pipe {
  Fd read;
  Fd write;
};

Expected<Pipe> make_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return sys_error("pipe", errno);
  }
  return Pipe{Fd(fds[0]), Fd(fds[1])};
}

std::vector<std::string> child_environment(Command command, const Environment& env) {
  static const char* overridden[] = {"CNI_COMMAND", "CNI_CONTAINERID", "CNI_NETNS",
                                     "CNI_IFNAME",  "CNI_ARGS",        "CNI_PATH"};
  std::vector<std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry(*e);
    bool skip = false;
    for (const char* name : overridden) {
      size_t len = std::strlen(name);
      if (entry.compare(0, len, name) == 0 && entry.size() > len && entry[len] == '=') {
        skip = true;
      }
    }
    if (!skip) {
      out.push_back(std::move(entry));
    }
  }
  out.push_back("CNI_COMMAND=" + std::string(name_of(kCommandNames, command)));
  out.push_back("CNI_CONTAINERID=" + env.container_id);
  out.push_back("CNI_NETNS=" + env.netns);
  out.push_back("CNI_IFNAME=" + env.ifname);
  out.push_back("CNI_ARGS=" + env.args);
  out.push_back("CNI_PATH=" + env.path);
  return out;
}

// The environment a child would get, as the Getenv of a plugin run in process.
Getenv environment_getenv(const std::vector<std::string>& entries) {
  auto values = std::make_shared<std::map<std::string, std::string>>();
  for (const auto& entry : entries) {
    size_t eq = entry.find('=');
    if (eq != std::string::npos) {
      values->emplace(entry.substr(0, eq), entry.substr(eq + 1));
    }
  }
  return [values](const std::string& name) -> std::optional<std::string> {
    auto it = values->find(name);
    return it == values->end() ? std::nullopt : std::optional<std::string>(it->second);
  };
}

struct Exit {
  int status = 0;  // waitpid status
  std::string out;
  std::string err;
};

// The child's stdin, stdout and stderr.
struct Pipes {
  Pipe in;
  Pipe out;
  Pipe err;
};

Expected<Pipes> make_pipes() {
  TRY_ASSIGN(Pipe in, make_pipe());
  TRY_ASSIGN(Pipe out, make_pipe());
  TRY_ASSIGN(Pipe err, make_pipe());
  return Pipes{std::move(in), std::move(out), std::move(err)};
}

// argv or envp for execve: pointers into `strings` (which outlive it), then a null.
std::vector<char*> exec_array(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const auto& s : strings) {
    out.push_back(const_cast<char*>(s.c_str()));
  }
  out.push_back(nullptr);
  return out;
}

// The child between fork and exec: async-signal-safe calls only (the parent may have had
// other threads). It dies with `parent`, leads a process group of its own (killed as one on
// timeout), and gets the pipes as stdin, stdout and stderr.
[[noreturn]] void exec_child(const char* binary, char* const* argv, char* const* envp,
                             const Pipes& pipes, pid_t parent) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) {
    ::_exit(127);  // the parent died before the line above: nobody waits for this child
  }
  ::setpgid(0, 0);
  sigset_t empty;
  sigemptyset(&empty);
  ::sigprocmask(SIG_SETMASK, &empty, nullptr);
  ::signal(SIGPIPE, SIG_DFL);
  if (::dup2(pipes.in.read.get(), 0) < 0 || ::dup2(pipes.out.write.get(), 1) < 0 ||
      ::dup2(pipes.err.write.get(), 2) < 0) {
    ::_exit(127);
  }
  ::execve(binary, argv, envp);
  // Tell the parent why, on a stderr it reads (errno's text is not async-signal-safe).
  const char* why = errno == ENOENT   ? "no such file"
                    : errno == EACCES ? "permission denied"
                                      : "exec failed";
  (void)!::write(2, why, std::strlen(why));
  ::_exit(127);
}

// Writes what is left of `input` to a non-blocking stdin; closes it when all is written or
// the plugin closed its end (it will answer without the rest).
void feed(Fd& in, const std::string& input, size_t& written) {
  ssize_t w = ::write(in.get(), input.data() + written, input.size() - written);
  if (w > 0) {
    written += static_cast<size_t>(w);
  }
  if ((w < 0 && errno != EAGAIN) || written == input.size()) {
    in.reset();
  }
}

// Appends what `src` has to `dst` (up to kMaxOutput); closes `src` at its end or on an error.
void drain(Fd& src, std::string& dst) {
  char buf[65536];
  ssize_t r = ::read(src.get(), buf, sizeof(buf));
  if (r > 0 && dst.size() < kMaxOutput) {
    dst.append(buf, static_cast<size_t>(r));
  } else if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN)) {
    src.reset();
  }
}

// Feeds `input` to the child and collects its stdout and stderr until it closes both;
// false when `deadline` passed first.
bool exchange(Pipes& pipes, const std::string& input,
              std::chrono::steady_clock::time_point deadline, Exit& result) {
  Fd& in = pipes.in.write;
  Fd& out = pipes.out.read;
  Fd& err = pipes.err.read;
  size_t written = 0;
  if (input.empty()) {
    in.reset();
  }
  while (out.get() >= 0 || err.get() >= 0) {
    std::vector<pollfd> fds;
    if (in.get() >= 0) {
      fds.push_back({in.get(), POLLOUT, 0});
    }
    for (const Fd* fd : {&out, &err}) {
      if (fd->get() >= 0) {
        fds.push_back({fd->get(), POLLIN, 0});
      }
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return false;
    }
    if (::poll(fds.data(), fds.size(), static_cast<int>(left.count())) < 0 && errno != EINTR) {
      break;
    }
    for (const auto& p : fds) {
      if (p.revents == 0) {
        continue;
      }
      if (p.fd == in.get()) {
        feed(in, input, written);
      } else if (p.fd == out.get()) {
        drain(out, result.out);
      } else {
        drain(err, result.err);
      }
    }
  }
  return true;
}

// Spawns `binary`, feeds it `input`, collects stdout/stderr until it exits or
// the deadline passes (then it and its process group are killed).
Expected<Exit> run(const std::string& binary, const std::vector<std::string>& args,
                   const std::vector<std::string>& envv, const std::string& input,
                   std::chrono::milliseconds timeout) {
  TRY_ASSIGN(Pipes pipes, make_pipes());
  std::vector<std::string> argv_strings = {binary};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv = exec_array(argv_strings);
  std::vector<char*> envp = exec_array(envv);
  // The child dies with us: a runtime that gives up on an ADD SIGKILLs the plugin
  // (containerd does when kubelet cancels RunPodSandbox) and then runs DEL; an IPAM child
  // left running would allocate after that DEL, a lease nobody releases. posix_spawn has no
  // way to ask for that, so fork, and only async-signal-safe calls until exec.
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    return Error(ErrorKind::kDelegateFailed,
                 "cannot execute " + binary + ": " + std::strerror(errno));
  }
  if (pid == 0) {
    exec_child(binary.c_str(), argv.data(), envp.data(), pipes, parent);
  }
  pipes.in.read.reset();
  pipes.out.write.reset();
  pipes.err.write.reset();
  // A plugin that exits without reading stdin must not kill us with SIGPIPE.
  ::signal(SIGPIPE, SIG_IGN);
  ::fcntl(pipes.in.write.get(), F_SETFL, O_NONBLOCK);

  Exit result;
  const bool finished = exchange(pipes, input, std::chrono::steady_clock::now() + timeout, result);
  if (!finished) {
    ::kill(-pid, SIGKILL);
    ::kill(pid, SIGKILL);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!finished) {
    return Error(ErrorKind::kTryAgainLater, binary + " did not finish within " +
                                                std::to_string(timeout.count()) + " ms; killed");
  }
  result.status = status;
  return result;
}

std::string tail(const std::string& text, size_t max = 512) {
  std::string t = text.size() > max ? "..." + text.substr(text.size() - max) : text;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) {
    t.pop_back();
  }
  return t;
}

// "exited with status 3: <the end of what it said>", for a program that failed.
std::string how_it_ended(const Exit& exit) {
  std::string how = WIFEXITED(exit.status)
                        ? "exited with status " + std::to_string(WEXITSTATUS(exit.status))
                        : "was killed by signal " + std::to_string(WTERMSIG(exit.status));
  std::string said = tail(exit.err.empty() ? exit.out : exit.err);
  return how + (said.empty() ? "" : ": " + said);
}

}  // namespace

Expected<std::string> find_plugin(const std::string& type, const std::string& cni_path) {
  if (type.empty() || type == "." || type == ".." || type.find('/') != std::string::npos ||
      type.find('\0') != std::string::npos) {
    return Error(ErrorKind::kInvalidConfig, "plugin type \"" + type + "\" is not a plugin name");
  }
  size_t pos = 0;
  while (pos <= cni_path.size()) {
    size_t end = cni_path.find(':', pos);
    if (end == std::string::npos) {
      end = cni_path.size();
    }
    std::string dir = cni_path.substr(pos, end - pos);
    pos = end + 1;
    if (dir.empty()) {
      continue;
    }
    std::string candidate = dir + "/" + type;
    // Only "not there" and "not executable" mean look on; a lookup that failed is not an
    // absent plugin (DEL would take it for "IPAM holds nothing" and leak the lease).
    struct stat st {};
    if (::stat(candidate.c_str(), &st) != 0) {
      if (errno == ENOENT || errno == ENOTDIR || errno == EACCES) {
        continue;
      }
      return Error(ErrorKind::kIo, "look for plugin " + candidate + ": " + std::strerror(errno));
    }
    if (!S_ISREG(st.st_mode)) {
      continue;
    }
    if (::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    if (errno != EACCES) {
      return Error(ErrorKind::kIo, "look for plugin " + candidate + ": " + std::strerror(errno));
    }
  }
  return Error(ErrorKind::kPluginNotFound,
               "plugin \"" + type + "\" not found in CNI_PATH \"" + cni_path + "\"");
}

Expected<std::string> exec_plugin(const std::string& type, Command command, const Environment& env,
                                  const std::string& stdin_text, const DelegateOptions& options) {
  const std::string who = std::string(name_of(kCommandNames, command)) + " via " + type;
  if (options.in_process != nullptr && options.in_process->name == type) {
    auto reply = run_in_process(*options.in_process,
                                environment_getenv(child_environment(command, env)), stdin_text);
    if (!reply) {
      // As the exec'd plugin's error would come back: its code, its message after `who`.
      const Error& e = reply.error();
      return Error::delegated(error_code(e), who + ": " + e.msg(), e.details());
    }
    return reply;
  }
  TRY_ASSIGN(std::string binary, find_plugin(type, env.path));
  TRY_ASSIGN(Exit exit,
             run(binary, {}, child_environment(command, env), stdin_text, options.timeout));
  if (WIFEXITED(exit.status) && WEXITSTATUS(exit.status) == 0) {
    return std::move(exit.out);
  }
  // A failing plugin prints {code, msg, details}; pass its code on.
  auto doc = parse_json(exit.out);
  if (doc.is_object()) {
    Fields f(doc, type);
    int code = 0;
    std::string msg;
    std::string details;
    f.integer("code", &code).string("msg", &msg).string("details", &details);
    if (f.ok() && code > 0) {
      return Error::delegated(code, who + ": " + msg, details);
    }
  }
  return Error(ErrorKind::kDelegateFailed, who + " " + how_it_ended(exit));
}

Expected<std::string> exec_program(const std::string& binary, const std::vector<std::string>& args,
                                   const std::string& stdin_text,
                                   std::chrono::milliseconds timeout) {
  std::vector<std::string> envv;
  for (const char* keep : {"PATH", "LANG", "TZ"}) {
    if (const char* v = ::getenv(keep)) {
      envv.push_back(std::string(keep) + "=" + v);
    }
  }
  TRY_ASSIGN(Exit exit, run(binary, args, envv, stdin_text, timeout));
  if (WIFEXITED(exit.status) && WEXITSTATUS(exit.status) == 0) {
    return std::move(exit.out);
  }
  return Error(ErrorKind::kDelegateFailed, binary + " " + how_it_ended(exit));
}

Expected<Result> delegate_add(const std::string& type, const Environment& env,
                              const std::string& stdin_text, const std::string& cni_version,
                              const DelegateOptions& options) {
  TRY_ASSIGN(std::string out, exec_plugin(type, Command::kAdd, env, stdin_text, options));
  auto doc = parse_json(out);
  if (doc.is_discarded() || !doc.is_object()) {
    return Error(ErrorKind::kDelegateFailed,
                 "ADD via " + type + ": result is not a JSON object: \"" + tail(out, 200) + "\"");
  }
  std::string version = cni_version;
  if (doc.contains("cniVersion") && doc["cniVersion"].is_string()) {
    version = doc["cniVersion"].get<std::string>();
  }
  auto result = decode_result(doc, version, type + " result");
  if (!result) {
    Error e = std::move(result).error();
    return Error(ErrorKind::kDelegateFailed, "ADD via " + type + ": " + e.msg());
  }
  return result;
}

Status delegate_command(const std::string& type, Command command, const Environment& env,
                        const std::string& stdin_text, const DelegateOptions& options) {
  TRY(exec_plugin(type, command, env, stdin_text, options));
  return ok_status();
}

}  // namespace rdmanet::cni
