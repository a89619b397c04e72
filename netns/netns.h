// Network namespace handles, and running code inside another network namespace.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "base/error.h"
#include "base/fd.h"

namespace rdmanet::netns {

// An open network namespace. Holding it keeps the namespace alive.
class Netns {
 public:
  // Opens path (a /var/run/netns bind mount or /proc/PID/ns/net) and checks that it is a
  // network namespace; anything else (missing, file, directory, other ns type) is
  // kInvalidEnvironment naming the path.
  static Expected<Netns> open(const std::string& path);
  // Like open(), but a path that does not exist is std::nullopt rather than an error: DEL
  // must succeed when the runtime already removed the namespace.
  static Expected<std::optional<Netns>> open_if_exists(const std::string& path);
  // For teardown: like open_if_exists(), but also std::nullopt when what is at the path is
  // no longer a network namespace (a file the runtime unmounted, another kind of
  // namespace). Only failing to look (open, fstatfs, ioctl errors other than ENOENT) is an
  // error: "could not look" must never read as "gone".
  static Expected<std::optional<Netns>> open_if_still_there(const std::string& path);
  // The network namespace of the calling thread.
  static Expected<Netns> current();

  int fd() const { return fd_.get(); }
  const std::string& path() const { return path_; }
  // The kernel's cookie of the namespace (SO_NETNS_COOKIE, Linux 5.14+): never reused
  // while the node runs, unlike the nsfs inode number, which a namespace created later
  // usually gets again. So it tells whether a path still names the namespace it named.
  Expected<uint64_t> cookie() const;
  // True when both handles refer to the same namespace (not merely the same path).
  bool same_as(const Netns& other) const { return dev_ == other.dev_ && ino_ == other.ino_; }
  // True when this is the calling thread's current network namespace.
  Expected<bool> is_current() const;

 private:
  // A namespace, or why the fd is none: `*not_a_netns` says the fd is readable but is not a
  // network namespace (as opposed to a failure to look).
  static Expected<Netns> verify(Fd fd, const std::string& path, bool* not_a_netns = nullptr);
  Netns(Fd fd, std::string path, dev_t dev, ino_t ino)
      : fd_(std::move(fd)), path_(std::move(path)), dev_(dev), ino_(ino) {}

  Fd fd_;
  std::string path_;
  dev_t dev_;
  ino_t ino_;
};

namespace detail {

// Moves the calling thread into a namespace and back when destroyed. If the way back
// fails the process aborts: continuing in the wrong namespace could change the wrong
// interfaces.
class NetnsSwitch {
 public:
  static Expected<NetnsSwitch> enter(const Netns& target);
  NetnsSwitch(NetnsSwitch&& other) noexcept
      : original_(std::exchange(other.original_, std::nullopt)),
        target_path_(std::move(other.target_path_)) {}
  NetnsSwitch& operator=(NetnsSwitch&&) = delete;
  NetnsSwitch(const NetnsSwitch&) = delete;
  NetnsSwitch& operator=(const NetnsSwitch&) = delete;
  ~NetnsSwitch();

 private:
  NetnsSwitch(Netns original, std::string target_path)
      : original_(std::move(original)), target_path_(std::move(target_path)) {}

  std::optional<Netns> original_;
  std::string target_path_;
};

}  // namespace detail

// Runs fn (returning Status or Expected<T>) with the calling thread inside ns and returns
// its result; the thread is back in its original namespace afterwards, whatever fn returned.
// Sockets opened by fn stay bound to ns after the return.
template <class F>
auto in_netns(const Netns& ns, F&& fn) -> decltype(fn()) {
  TRY_ASSIGN(auto guard, detail::NetnsSwitch::enter(ns));
  return std::forward<F>(fn)();
}

}  // namespace rdmanet::netns
