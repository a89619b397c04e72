#include "netns/netns.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <thread>

#include "base/names.h"

namespace rdmanet::netns {
namespace {

Error invalid(const std::string& path, const std::string& why) {
  return {ErrorKind::kInvalidEnvironment, "netns " + path + ": " + why};
}

// What NS_GET_NSTYPE may answer for a namespace that is not a network one.
constexpr Name<int> kNsTypeNames[] = {
    {CLONE_NEWNS, "mount"},  {CLONE_NEWUTS, "uts"}, {CLONE_NEWIPC, "ipc"},
    {CLONE_NEWUSER, "user"}, {CLONE_NEWPID, "pid"}, {CLONE_NEWCGROUP, "cgroup"},
};

std::string ns_type_name(int type) {
  std::string_view name = name_of(kNsTypeNames, type);
  // Types the table leaves out (time namespaces, say) are named by what they are not.
  return name == "?" ? "non-network" : std::string(name);
}

}  // namespace

// Checks the open fd rather than the path, so the answer is about the file we hold.
Expected<Netns> Netns::verify(Fd fd, const std::string& path, bool* not_a_netns) {
  auto none = [&](const std::string& why) {
    if (not_a_netns != nullptr) {
      *not_a_netns = true;
    }
    return invalid(path, why);
  };
  struct statfs fs {};
  if (fstatfs(fd.get(), &fs) != 0) {
    return invalid(path, std::string("fstatfs: ") + std::strerror(errno));
  }
  if (static_cast<unsigned long>(fs.f_type) != NSFS_MAGIC) {
    return none("not a namespace file (is the netns mounted?)");
  }
  // On nsfs these fail only transiently: a failure to look (5), not a path that is no netns.
  int type = ioctl(fd.get(), NS_GET_NSTYPE);
  if (type < 0) {
    return Error(ErrorKind::kIo,
                 "netns " + path + ": ioctl NS_GET_NSTYPE: " + std::strerror(errno));
  }
  if (type != CLONE_NEWNET) {
    return none("is a " + ns_type_name(type) + " namespace, not a network namespace");
  }
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) {
    return Error(ErrorKind::kIo, "netns " + path + ": fstat: " + std::strerror(errno));
  }
  return Netns(std::move(fd), path, st.st_dev, st.st_ino);
}

Expected<std::optional<Netns>> Netns::open_if_exists(const std::string& path) {
  // O_NONBLOCK: a FIFO at the path must not block the open (it fails the nsfs check next).
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) {
      return std::optional<Netns>();
    }
    return invalid(path, std::string("open: ") + std::strerror(errno));
  }
  TRY_ASSIGN(Netns ns, verify(Fd(fd), path));
  return std::optional<Netns>(std::move(ns));
}

Expected<std::optional<Netns>> Netns::open_if_still_there(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) {
      return std::optional<Netns>();
    }
    return invalid(path, std::string("open: ") + std::strerror(errno));
  }
  bool not_a_netns = false;
  auto ns = verify(Fd(fd), path, &not_a_netns);
  if (!ns) {
    if (not_a_netns) {
      return std::optional<Netns>();
    }
    return std::move(ns).error();
  }
  return std::optional<Netns>(std::move(*ns));
}

Expected<Netns> Netns::open(const std::string& path) {
  TRY_ASSIGN(std::optional<Netns> ns, open_if_exists(path));
  if (!ns) {
    return invalid(path, std::string("open: ") + std::strerror(ENOENT));
  }
  return std::move(*ns);
}

Expected<uint64_t> Netns::cookie() const {
  return in_netns(*this, [this]() -> Expected<uint64_t> {
    Fd sock(socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!sock.valid()) {
      return sys_error("socket in netns " + path_, errno);
    }
    uint64_t cookie = 0;
    socklen_t len = sizeof cookie;
    if (getsockopt(sock.get(), SOL_SOCKET, SO_NETNS_COOKIE, &cookie, &len) != 0) {
      return sys_error("SO_NETNS_COOKIE in netns " + path_, errno);
    }
    return cookie;
  });
}

Expected<Netns> Netns::current() {
  // thread-self, not self: setns() moves only the calling thread.
  return open("/proc/thread-self/ns/net");
}

Expected<bool> Netns::is_current() const {
  struct stat st {};
  if (stat("/proc/thread-self/ns/net", &st) != 0) {
    return sys_error("stat /proc/thread-self/ns/net", errno);
  }
  return st.st_dev == dev_ && st.st_ino == ino_;
}

namespace detail {

Expected<NetnsSwitch> NetnsSwitch::enter(const Netns& target) {
  TRY_ASSIGN(Netns original, Netns::current());
  if (setns(target.fd(), CLONE_NEWNET) != 0) {
    return sys_error("enter netns " + target.path(), errno);
  }
  return NetnsSwitch(std::move(original), target.path());
}

NetnsSwitch::~NetnsSwitch() {
  if (!original_) {
    return;
  }
  // Going on in the wrong netns would act on the pod's links as if they were the host's:
  // a failure that persists aborts. A transient one (ENOMEM) is retried first.
  for (int attempt = 1; setns(original_->fd(), CLONE_NEWNET) != 0; ++attempt) {
    if (attempt == 5) {
      std::fprintf(stderr, "rdmanet: cannot return from netns %s to %s: %s; aborting\n",
                   target_path_.c_str(), original_->path().c_str(), std::strerror(errno));
      std::abort();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10 * attempt));
  }
}

}  // namespace detail
}  // namespace rdmanet::netns
