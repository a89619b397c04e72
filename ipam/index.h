// The allocation index of a network: per range set, the next-fit cursor and (for
// pools of up to 2^20 addresses, pool.h) a bitmap of taken ordinals, so that ADD
// finds a free address without reading a single lease.
//
// Kept in <store>/index/<set>, and only a hint: never fsynced, because a bit set
// without a lease is found by the sweep (allocator.h) and a clear bit with a
// lease costs one EEXIST. Rebuilt from the leases when missing, corrupt or made
// for another configuration (ranges, gateways, exclude: the pool's fingerprint).
//
// File: a 64-byte header of native uint64s (magic "RDMIDX01", the pool's
// fingerprint, the bitmap's size in bits, the cursor's low and high halves, then
// zeros), followed by the bitmap's words.
#pragma once

#include <optional>
#include <vector>

#include "base/error.h"
#include "ipam/ip.h"
#include "ipam/lease.h"
#include "ipam/pool.h"
#include "ipam/store.h"

namespace rdmanet::ipam {

class AllocationIndex {
 public:
  // Forgets what was read: `pools` (which must outlive every later call) are the
  // range sets from now on. For each new hold of the store's lock (another process
  // may have changed the files meanwhile) and whenever the pools change.
  void reset(const std::vector<Pool>* pools);

  // cursor() and next_free() read the set's index first, and rebuild every set's
  // from the leases when it is missing, corrupt or made for another configuration.
  //
  // The ordinal where next-fit starts in `set`.
  Expected<u128> cursor(Store& store, size_t set);
  // The first ordinal of `set` at or after `from` (wrapping around) that is neither
  // reserved nor taken; nullopt when there is none. Pools with a bitmap only.
  Expected<std::optional<u128>> next_free(Store& store, size_t set, u128 from);

  // Marks `ordinal` of `set` taken or free, moving the cursor past it when
  // `advance_cursor`, and writes that part of the file. Never fails: a write that
  // does is logged (a hint), and an index not on disk is left to the next ADD,
  // which rebuilds it, so DEL never reads every lease.
  void mark(Store& store, size_t set, u128 ordinal, bool taken, bool advance_cursor);

  // Rebuilds every set from `leases` (cursors kept) and writes them: after a sweep
  // or GC, which have read every lease anyway.
  Status rebuild(Store& store, const std::vector<Lease>& leases);

 private:
  struct SetIndex {
    u128 cursor = 0;
    Bitmap taken;     // empty for pools without a bitmap
    Bitmap reserved;  // the pool's reserved ordinals, for next_free
  };
  // The index of `set`, read or rebuilt.
  Expected<SetIndex*> loaded(Store& store, size_t set);
  // From the file; nullopt when missing, corrupt or made for another pool.
  Expected<std::optional<SetIndex>> read(const Store& store, size_t set) const;
  Status write(Store& store, size_t set, const SetIndex& index) const;
  size_t bits(size_t set) const;

  const std::vector<Pool>* pools_ = nullptr;
  std::vector<std::optional<SetIndex>> sets_;
};

}  // namespace rdmanet::ipam
