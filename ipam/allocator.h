// The IPAM rules on top of the store: one address per range set per
// attachment, idempotent ADD, DEL/CHECK/GC/STATUS, and the reclaim rule.
//
// Reclaim rule. A lease is reclaimed (its address becomes free again) when
//   1. its file cannot be parsed (a write torn by a crash), or
//   2. it is an orphan: the record of the attachment it names does not exist
//      or does not list its address (a crash between claiming the lease and
//      writing the record, or between the two steps of DEL), or
//   3. it is stale: the netns path recorded at ADD no longer exists (the pod's
//      sandbox is gone: node reboot, force delete, missed DEL). The whole
//      attachment (every lease and the record) is released.
// The leases an ADD holds or has just claimed are never reclaimed during that
// ADD (its older orphans are, like anyone's). The rule is
// applied lazily, by a sweep over all leases, only when a range set has no
// free address left (ADD or STATUS), and by GC; ADD and DEL never scan.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "cni/config.h"
#include "cni/result.h"
#include "ipam/config.h"
#include "ipam/index.h"
#include "ipam/pool.h"
#include "ipam/store.h"

namespace rdmanet::ipam {

struct Attachment {
  Owner owner;
  std::string netns;
  std::string pod_namespace;
  std::string pod_name;
  std::string pod_uid;
};

struct Allocation {
  IpAddr ip;
  Range range;  // the range holding ip: prefix length and gateway for the result
};

// Cluster mode (cluster.h): the node hands out addresses only inside the
// blocks it holds. Every call is made with the store locked.
class BlockSource {
 public:
  virtual ~BlockSource() = default;
  // The config's range sets cut down to the blocks the node holds now.
  virtual Expected<std::vector<RangeSet>> held(Store& store) = 0;
  // Range set `set` has no free address even after a sweep: claims one more
  // block (a network call); an error when none can be had.
  virtual Status grow(Store& store, size_t set) = 0;
  // Addresses were released by DEL (`ips`) or GC (`every_block`: look at all
  // blocks): blocks left empty long enough are given back. Failures are the
  // source's to log.
  virtual void released(Store& store, const std::vector<IpAddr>& ips, bool every_block) = 0;
};

class Allocator {
 public:
  // `store_dir` is <dataDir>/<network>. `netns_exists` decides rule 3 (tests
  // replace it; the default stat()s the path). `blocks`, when set, restricts
  // allocation to the node's blocks (cluster mode) and must outlive the allocator.
  Allocator(IpamConfig config, std::string store_dir,
            std::function<bool(const std::string&)> netns_exists = {},
            BlockSource* blocks = nullptr);

  // The attachment's addresses, one per range set: those it already holds, or
  // new ones (the requested address for a range set when there is one).
  Expected<std::vector<Allocation>> add(const Attachment& who,
                                        const std::vector<IpAddr>& requested);
  // Every call waits for the store's lock as long as another call holds it; with this, at
  // most `limit` (then kTryAgainLater): for a caller that must not hang behind a stuck one.
  void set_store_lock_wait(std::chrono::milliseconds limit) { lock_wait_ = limit; }

  // Releases the attachment's addresses; succeeds when it holds none.
  Status del(const Owner& who);
  // Fails unless the attachment holds an address in every range set.
  Status check(const Owner& who);
  // Releases every lease and record whose attachment is not in `valid`, and
  // every lease its attachment's record does not list.
  Status gc(const std::vector<Owner>& valid);
  // kNotAvailable when some range set has no free address even after a sweep.
  Status status();

  // What the node agent asks each round: the reclaim rule applied to every lease (what a
  // sweep does when a pool is full), and how full each range set is afterwards.
  struct PoolUsage {
    std::string where;        // "ipam.ranges[0]"
    std::string description;  // its ranges
    double size = 0;          // addresses it can hand out (reserved ones left out)
    size_t used = 0;
    size_t blocks = 0;  // cluster mode: the node's blocks in it
  };
  struct Reconciled {
    std::map<std::string, size_t> released;  // by reason
    std::vector<PoolUsage> pools;
  };
  // The leases of `keep` stay whatever the rule says.
  Expected<Reconciled> reconcile(const std::vector<Owner>& keep = {});

 private:
  // One address or none per range set, indexed like pools_.
  using AddressBySet = std::vector<std::optional<IpAddr>>;
  // An address add() claimed in this call, in range set `set`.
  struct Claimed {
    size_t set;
    IpAddr ip;
  };

  Expected<Store> open_store();
  // add()'s steps. The requested addresses by range set: at most one in each, and each in one.
  Expected<AddressBySet> requested_by_set(const std::vector<IpAddr>& requested) const;
  // The addresses of `record` whose leases are still the attachment's own.
  Expected<AddressBySet> held_by(Store& store, const Owner& owner,
                                 const std::optional<Record>& record) const;
  // kAddressUnavailable when a set holds an address and another one is requested there.
  Status refuse_a_second_address(const Owner& owner, const AddressBySet& want,
                                 const AddressBySet& held) const;
  // Claims an address in every set not `held` (the one `want`ed, or any), records the
  // attachment as holding them and syncs. Every address claimed goes into `fresh` (and
  // `held`) at once, so that a failure half way can be undone by undo_claims().
  Status claim_missing(Store& store, const Attachment& who, const AddressBySet& want,
                       AddressBySet& held, std::vector<Claimed>& fresh);
  // Releases `fresh` and puts the attachment's record back as it was (`record`, or none).
  void undo_claims(Store& store, const Owner& owner, const std::optional<Record>& record,
                   const std::vector<Claimed>& fresh);
  // Applies the reclaim rule to every lease but those in `keep`.
  Status sweep(Store& store, const std::vector<IpAddr>& keep);
  // The reclaim rule: why a lease goes (nullptr: it stays).
  const char* reclaim_reason(const Lease& lease, const Record* listed,
                             const std::vector<IpAddr>& keep) const;
  // The one bulk release, for the sweep and GC (which read every lease anyway):
  // releases each lease `why` gives a reason for (logged with it; `listed` is the
  // record of the lease's attachment if that record lists it), then each record
  // `drop` says goes (`holds`: a lease of it is kept), and the temporaries; syncs,
  // and rebuilds the index from the leases kept. Returns the addresses released.
  using ReleaseReason = std::function<const char*(const Lease& lease, const Record* listed)>;
  Expected<std::vector<IpAddr>> release_leases(
      Store& store, const ReleaseReason& why,
      const std::function<bool(const Record& record, bool holds)>& drop);
  Expected<IpAddr> allocate(Store& store, size_t set, const Lease& proto,
                            const std::vector<IpAddr>& keep);
  Expected<IpAddr> allocate_in_pool(Store& store, size_t set, const Lease& proto,
                                    const std::vector<IpAddr>& keep);
  Expected<IpAddr> claim_requested(Store& store, size_t set, const IpAddr& ip, const Lease& proto,
                                   const std::vector<IpAddr>& keep);
  Status release_attachment(Store& store, const Owner& owner, const std::vector<IpAddr>& ips);
  std::optional<size_t> set_of(const IpAddr& ip) const;
  // Marks `ip` taken or free in its range set's index (a hint).
  void note_taken(Store& store, size_t set, const IpAddr& ip, bool taken, bool advance_cursor);

  // Cluster mode: pools_ become the node's blocks, read under the lock.
  Status refresh_pools(Store& store);

  IpamConfig config_;
  std::string dir_;
  std::optional<std::chrono::milliseconds> lock_wait_;
  BlockSource* blocks_ = nullptr;
  std::function<bool(const std::string&)> netns_exists_;
  std::vector<Pool> pools_;
  // Of pools_, read under the store's lock: open_store() resets it in every call.
  AllocationIndex index_;
  // During add(): records the attachment as holding `ip` before its lease is linked, so no
  // lease ever exists that its attachment's record does not name (a call killed between
  // the two would otherwise leak the address past DEL).
  std::function<Status(const IpAddr&)> before_claim_;
};

// The CNI result for an ADD.
cni::Result to_result(const IpamConfig& config, const std::vector<Allocation>& allocations);

}  // namespace rdmanet::ipam
