// The lease store of one network: <dataDir>/<network>/.
//
// Why this layout: host-local keeps one file per address and reads all of
// them on every ADD and DEL, so its cost grows with the number of leases. Here
// every ADD and DEL touches a constant number of files:
//
//   lock                 flock()ed exclusively by every command: one writer at a time,
//                        across processes; the kernel drops it when a process dies.
//   leases/<address>     one file per leased address (lease.h), created by link(2) from a
//                        fully written temporary, so it appears atomically
//                        with its content and link's EEXIST makes double allocation
//                        impossible even if every other file were lost. It names its
//                        attachment, the pod's netns path and K8S_POD_*.
//   attachments/<name>   one record per (container id, ifname) listing its addresses (lease.h):
//                        what idempotent ADD, DEL and CHECK read. The name is a hash of
//                        both ids plus the (validated) container id and the ifname in
//                        hex, so no byte of the ifname can reach the path; the content
//                        holds both ids and is compared on every read.
//   index/<set>          per range set: next-fit cursor and a bitmap of taken ordinals
//                        (index.h, which owns the format; the store only keeps the
//                        files). Only a hint, never fsynced.
//
// Writes go to a temporary in the same directory (complete before it gets its real name by
// link/rename). What a crash must find decides what is synced (README "Durability"):
//   - a process crash (kill -9 at any step) leaves the page cache: either nothing, a
//     temporary (removed by the sweep), a lease its record does not list (an orphan:
//     reclaimable) or a record listing a lease that is gone (ignored);
//   - a machine crash takes every pod netns with it, so what must outlive it is each lease
//     until the runtime's DEL: sync() fsyncs every lease the call created, once per lease,
//     before the caller reports success. Records, releases and the index are not synced:
//     a record lost or cut short reads as none (the leases, which name their owner,
//     decide), and a release lost comes back as a lease of a netns that is gone, which the
//     node agent's reconcile releases again.
// Files are 0600, directories 0700.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/fd.h"
#include "ipam/ip.h"
#include "ipam/lease.h"

namespace rdmanet::ipam {

class Store {
 public:
  // Creates the directories when missing and takes the exclusive lock, waiting as long as
  // another call holds it, or at most `lock_wait` (then kTryAgainLater). The lock is held
  // until the Store is destroyed.
  static Expected<Store> open(const std::string& dir,
                              std::optional<std::chrono::milliseconds> lock_wait = std::nullopt);

  Store(Store&&) noexcept = default;
  Store& operator=(Store&&) = delete;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;
  ~Store() = default;

  const std::string& dir() const { return dir_; }

  // Creates the lease file; false when the address already has one.
  Expected<bool> claim(const Lease& lease);
  // nullopt when the address has no lease; an unparseable file gives a Lease
  // with readable == false.
  Expected<std::optional<Lease>> read_lease(const IpAddr& ip) const;
  // Whether the address has a lease file (one fstatat; errors count as yes).
  bool has_lease(const IpAddr& ip) const;
  // Removes the lease file; succeeds when there is none.
  Status release(const IpAddr& ip);
  // Every lease (O(leases): sweeps, GC and index rebuilds only).
  Expected<std::vector<Lease>> list_leases() const;
  // The leased addresses, from the directory alone (no lease is read).
  Expected<std::vector<IpAddr>> leased_addresses() const;

  Expected<std::optional<Record>> read_record(const Owner& owner) const;
  Status write_record(const Record& record);
  Status remove_record(const Owner& owner);
  Expected<std::vector<Record>> list_records() const;

  // Makes every lease claimed so far durable (one fsync each); nothing else is synced.
  Status sync();

  // The index file of range set `set` (its format: index.h); nullopt when missing.
  Expected<std::optional<std::string>> read_index(size_t set) const;
  // Replaces it atomically, but does not sync it: the index is a hint.
  Status write_index(size_t set, const std::string& content);
  // Overwrites parts of it in place, (offset, bytes) each; not synced either.
  Status patch_index(size_t set, const std::vector<std::pair<off_t, std::string>>& parts);

  // Removes the temporaries a killed call can leave (one fixed name per directory); cheap,
  // for every ADD and DEL.
  Status remove_stale_temporaries();
  // Removes every temporary, also those of older versions (".tmp-<pid>-<n>"): lists the
  // directories, for sweeps and GC.
  Status remove_temporaries();

 private:
  explicit Store(std::string dir) : dir_(std::move(dir)) {}
  Status write_new(int dir_fd, const std::string& what, const std::string& content,
                   std::string* tmp_name);

  std::string temp_name(int dir_fd) const;

  struct Unsynced {
    Fd fd;
    std::string what;
  };
  std::string dir_;
  // Closed in the reverse of this order: the lock is released last.
  Fd lock_fd_;
  Fd leases_fd_;
  Fd records_fd_;
  Fd index_fd_;
  std::vector<Unsynced> unsynced_;  // written files whose data sync() still owes
};

}  // namespace rdmanet::ipam
