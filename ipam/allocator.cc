#include "ipam/allocator.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <future>
#include <unordered_map>
#include <unordered_set>

namespace rdmanet::ipam {

namespace {

// Probes per round for pools too large for a bitmap (see pool.h).
constexpr u128 kMaxProbes = 65536;

bool default_netns_exists(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) == 0) {
    return true;
  }
  // Anything but "not there" (EACCES, EIO ...) keeps the lease.
  return errno != ENOENT && errno != ENOTDIR;
}

bool lists(const Record& record, const IpAddr& ip) {
  return std::find(record.ips.begin(), record.ips.end(), ip) != record.ips.end();
}

// Whether `lease` is the attachment's own: after a crash the address may be someone else's.
bool owned_by(const std::optional<Lease>& lease, const Owner& owner) {
  return lease && lease->readable && lease->owner == owner;
}

}  // namespace

Allocator::Allocator(IpamConfig config, std::string store_dir,
                     std::function<bool(const std::string&)> netns_exists, BlockSource* blocks)
    : config_(std::move(config)),
      dir_(std::move(store_dir)),
      blocks_(blocks),
      netns_exists_(netns_exists ? std::move(netns_exists) : default_netns_exists) {
  for (const auto& set : config_.range_sets) {
    pools_.emplace_back(set, config_.exclude);
  }
  index_.reset(&pools_);
}

std::optional<size_t> Allocator::set_of(const IpAddr& ip) const {
  for (size_t i = 0; i < pools_.size(); ++i) {
    if (pools_[i].ordinal(ip)) {
      return i;
    }
  }
  return std::nullopt;
}

void Allocator::note_taken(Store& store, size_t set, const IpAddr& ip, bool taken,
                           bool advance_cursor) {
  if (auto o = pools_[set].ordinal(ip)) {
    index_.mark(store, set, *o, taken, advance_cursor);
  }
}

Expected<IpAddr> Allocator::allocate(Store& store, size_t set, const Lease& proto,
                                     const std::vector<IpAddr>& keep) {
  for (;;) {
    const Pool& pool = pools_[set];
    auto ip = allocate_in_pool(store, set, proto, keep);
    if (ip || !blocks_ || ip.error().kind() != ErrorKind::kAddressUnavailable) {
      return ip;
    }
    // Cluster mode: every block the node holds is full; claim another.
    spdlog::info("{}: the node's blocks are full ({}): claiming another", pool.where(),
                 pool.description());
    TRY(blocks_->grow(store, set));
    TRY(refresh_pools(store));
  }
}

Expected<IpAddr> Allocator::allocate_in_pool(Store& store, size_t set, const Lease& proto,
                                             const std::vector<IpAddr>& keep) {
  const Pool& pool = pools_[set];
  // Tries one ordinal; true when it is ours now.
  auto try_claim = [&](u128 o) -> Expected<bool> {
    Lease lease = proto;
    lease.ip = pool.address(o);
    if (before_claim_) {
      TRY(before_claim_(lease.ip));
    }
    TRY_ASSIGN(bool claimed, store.claim(lease));
    if (claimed) {
      return true;
    }
    // The index said free but a lease exists: claimed by a process that died
    // before updating the index. Ours (an ADD that crashed) is adopted.
    TRY_ASSIGN(auto existing, store.read_lease(lease.ip));
    return owned_by(existing, proto.owner);
  };
  for (int round = 0; round < 2; ++round) {
    TRY_ASSIGN(u128 cursor, index_.cursor(store, set));
    if (pool.has_bitmap()) {
      u128 from = cursor;
      for (;;) {
        TRY_ASSIGN(auto hit, index_.next_free(store, set, from));
        if (!hit) {
          break;
        }
        TRY_ASSIGN(bool won, try_claim(*hit));
        if (won) {
          return pool.address(*hit);
        }
        index_.mark(store, set, *hit, true, false);  // the next ADD pays no EEXIST for it
        from = *hit + 1;
      }
    } else {
      u128 from = cursor;
      bool wrapped = false;
      for (u128 probes = 0; probes < kMaxProbes;) {
        auto o = pool.next_unreserved(from);
        if (!o || (wrapped && *o >= cursor)) {
          if (wrapped) {
            break;
          }
          wrapped = true;
          from = 0;
          continue;
        }
        TRY_ASSIGN(bool won, try_claim(*o));
        if (won) {
          return pool.address(*o);
        }
        from = *o + 1;
        ++probes;
      }
    }
    if (round == 0) {
      spdlog::info("range set {} ({}) looks full: sweeping for reclaimable leases", pool.where(),
                   pool.description());
      TRY(sweep(store, keep));
    }
  }
  return Error(ErrorKind::kAddressUnavailable, "no free address left in range set " + pool.where() +
                                                   " (" + pool.description() + ")");
}

Expected<IpAddr> Allocator::claim_requested(Store& store, size_t set, const IpAddr& ip,
                                            const Lease& proto, const std::vector<IpAddr>& keep) {
  if (auto why = pools_[set].reserved_reason(ip); !why.empty()) {
    return Error(ErrorKind::kAddressUnavailable, "requested address " + ip.str() + " " + why);
  }
  if (blocks_ && !pools_[set].ordinal(ip)) {
    return Error(ErrorKind::kAddressUnavailable,
                 "requested address " + ip.str() + " is not in an address block this node holds");
  }
  Lease lease = proto;
  lease.ip = ip;
  if (before_claim_) {
    TRY(before_claim_(ip));
  }
  for (int round = 0; round < 2; ++round) {
    TRY_ASSIGN(bool claimed, store.claim(lease));
    if (claimed) {
      return ip;
    }
    TRY_ASSIGN(auto existing, store.read_lease(ip));
    if (owned_by(existing, proto.owner)) {
      return ip;
    }
    if (round == 1 || !existing) {
      std::string holder = existing ? existing->owner.str() : "another attachment";
      return Error(ErrorKind::kAddressUnavailable,
                   "requested address " + ip.str() + " is already allocated to " + holder);
    }
    // The holder may be reclaimable (orphan, stale netns).
    TRY(sweep(store, keep));
  }
  return Error(ErrorKind::kInternal, "unreachable");
}

Expected<Store> Allocator::open_store() {
  // Another process may have changed the index since this object last held
  // the lock: read it afresh under the lock.
  index_.reset(&pools_);
  TRY_ASSIGN(Store store, Store::open(dir_, lock_wait_));
  if (blocks_) {
    TRY(refresh_pools(store));
  }
  return store;
}

Status Allocator::refresh_pools(Store& store) {
  TRY_ASSIGN(auto sets, blocks_->held(store));
  pools_.clear();
  for (const auto& set : sets) {
    pools_.emplace_back(set, config_.exclude);
  }
  index_.reset(&pools_);
  return ok_status();
}

Expected<Allocator::AddressBySet> Allocator::requested_by_set(
    const std::vector<IpAddr>& requested) const {
  AddressBySet want(pools_.size());
  for (const auto& ip : requested) {
    auto set = set_of(ip);
    if (!set) {
      return Error(ErrorKind::kInvalidConfig,
                   "requested address " + ip.str() + " is not in any range of the network");
    }
    if (want[*set]) {
      return Error(ErrorKind::kInvalidConfig, "requested addresses " + want[*set]->str() + " and " +
                                                  ip.str() + " are both in " +
                                                  pools_[*set].where());
    }
    want[*set] = ip;
  }
  return want;
}

Expected<Allocator::AddressBySet> Allocator::held_by(Store& store, const Owner& owner,
                                                     const std::optional<Record>& record) const {
  AddressBySet held(pools_.size());
  if (!record) {
    return held;
  }
  for (const auto& ip : record->ips) {
    auto set = set_of(ip);
    if (!set || held[*set]) {
      continue;
    }
    TRY_ASSIGN(auto lease, store.read_lease(ip));
    if (owned_by(lease, owner)) {
      held[*set] = ip;
    }
  }
  return held;
}

Status Allocator::refuse_a_second_address(const Owner& owner, const AddressBySet& want,
                                          const AddressBySet& held) const {
  // A re-ADD keeps what the attachment holds; asking for another address is a conflict, as
  // host-local refuses it (never silently the old address).
  for (size_t set = 0; set < pools_.size(); ++set) {
    if (want[set] && held[set] && *want[set] != *held[set]) {
      return Error(ErrorKind::kAddressUnavailable,
                   owner.str() + " already holds " + held[set]->str() + " in " +
                       pools_[set].where() + "; requested address " + want[set]->str() +
                       " would be a second one (DEL the attachment first)");
    }
  }
  return ok_status();
}

namespace {

// What every lease of `who` says besides its address.
Lease lease_of(const Attachment& who) {
  Lease proto;
  proto.owner = who.owner;
  proto.netns = who.netns;
  proto.pod_namespace = who.pod_namespace;
  proto.pod_name = who.pod_name;
  proto.pod_uid = who.pod_uid;
  return proto;
}

// The addresses there are, in set order.
std::vector<IpAddr> present(const std::vector<std::optional<IpAddr>>& addresses) {
  std::vector<IpAddr> out;
  for (const auto& ip : addresses) {
    if (ip) {
      out.push_back(*ip);
    }
  }
  return out;
}

}  // namespace

Status Allocator::claim_missing(Store& store, const Attachment& who, const AddressBySet& want,
                                AddressBySet& held, std::vector<Claimed>& fresh) {
  const Lease proto = lease_of(who);
  before_claim_ = [&](const IpAddr& candidate) {
    Record r{who.owner, who.netns, {candidate}};
    for (const auto& ip : present(held)) {
      r.ips.push_back(ip);
    }
    return store.write_record(r);
  };
  struct Reset {
    std::function<Status(const IpAddr&)>* fn;
    ~Reset() { *fn = nullptr; }
  } reset{&before_claim_};
  for (size_t set = 0; set < pools_.size(); ++set) {
    if (held[set]) {
      continue;
    }
    const std::vector<IpAddr> keep = present(held);
    TRY_ASSIGN(IpAddr ip, want[set] ? claim_requested(store, set, *want[set], proto, keep)
                                    : allocate(store, set, proto, keep));
    spdlog::debug("{} gets {} from {}", who.owner.str(), ip.str(), pools_[set].where());
    held[set] = ip;
    fresh.push_back({set, ip});
    note_taken(store, set, ip, true, !want[set]);
  }
  // A re-ADD that holds everything changes nothing: the netns and pod of a
  // lease are those of the ADD that created it.
  if (!fresh.empty()) {
    TRY(store.write_record(Record{who.owner, who.netns, present(held)}));
  }
  return store.sync();
}

void Allocator::undo_claims(Store& store, const Owner& owner, const std::optional<Record>& record,
                            const std::vector<Claimed>& fresh) {
  for (const auto& [set, ip] : fresh) {
    (void)store.release(ip);
    note_taken(store, set, ip, false, false);
  }
  // The record as it was before this call (before_claim_ may have rewritten it).
  (void)(record ? store.write_record(*record) : store.remove_record(owner));
  (void)store.sync();
}

Expected<std::vector<Allocation>> Allocator::add(const Attachment& who,
                                                 const std::vector<IpAddr>& requested) {
  TRY_ASSIGN(AddressBySet want, requested_by_set(requested));
  TRY_ASSIGN(Store store, open_store());
  TRY(store.remove_stale_temporaries());
  TRY_ASSIGN(std::optional<Record> record, store.read_record(who.owner));
  TRY_ASSIGN(AddressBySet held, held_by(store, who.owner, record));
  TRY(refuse_a_second_address(who.owner, want, held));
  std::vector<Claimed> fresh;
  if (auto s = claim_missing(store, who, want, held, fresh); !s) {
    undo_claims(store, who.owner, record, fresh);
    return std::move(s).error();
  }
  std::vector<Allocation> out;
  for (size_t set = 0; set < pools_.size(); ++set) {
    out.push_back({*held[set], pools_[set].range_at(*pools_[set].ordinal(*held[set]))});
  }
  return out;
}

Status Allocator::release_attachment(Store& store, const Owner& owner,
                                     const std::vector<IpAddr>& ips) {
  for (const auto& ip : ips) {
    TRY_ASSIGN(auto lease, store.read_lease(ip));
    if (owned_by(lease, owner)) {
      TRY(store.release(ip));
      if (auto set = set_of(ip)) {
        note_taken(store, *set, ip, false, false);
      }
    }
  }
  return store.remove_record(owner);
}

Status Allocator::del(const Owner& who) {
  TRY_ASSIGN(Store store, open_store());
  TRY(store.remove_stale_temporaries());
  TRY_ASSIGN(std::optional<Record> record, store.read_record(who));
  if (!record) {
    return ok_status();
  }
  TRY(release_attachment(store, who, record->ips));
  TRY(store.sync());
  if (blocks_) {
    blocks_->released(store, record->ips, false);
  }
  return ok_status();
}

Status Allocator::check(const Owner& who) {
  TRY_ASSIGN(Store store, open_store());
  TRY_ASSIGN(std::optional<Record> record, store.read_record(who));
  if (!record) {
    return Error(ErrorKind::kUnknownContainer, who.str() + " holds no address in " + dir_);
  }
  for (size_t set = 0; set < pools_.size(); ++set) {
    bool found = false;
    for (const auto& ip : record->ips) {
      if (!pools_[set].ordinal(ip)) {
        continue;
      }
      TRY_ASSIGN(auto lease, store.read_lease(ip));
      found = owned_by(lease, who);
      if (!found) {
        return Error(ErrorKind::kState, who.str() + " lists " + ip.str() +
                                            " but the lease is missing or held by another");
      }
    }
    if (!found) {
      return Error(ErrorKind::kState, who.str() + " holds no address in " + pools_[set].where());
    }
  }
  return ok_status();
}

Expected<std::vector<IpAddr>> Allocator::release_leases(
    Store& store, const ReleaseReason& why,
    const std::function<bool(const Record& record, bool holds)>& drop) {
  // Both listings read a file per entry (120,000 files at 60,000 leases): one per core.
  auto listed_records = std::async(std::launch::async, [&] { return store.list_records(); });
  auto listed_leases = store.list_leases();
  TRY_ASSIGN(auto records, listed_records.get());
  TRY_ASSIGN(auto leases, std::move(listed_leases));
  std::unordered_map<std::string, const Record*> by_name;
  for (const auto& r : records) {
    by_name[record_name(r.owner)] = &r;
  }
  std::unordered_set<std::string> holding;  // records that keep a lease
  std::vector<Lease> kept;
  std::vector<IpAddr> released;
  for (const auto& lease : leases) {
    std::string name = record_name(lease.owner);
    auto it = by_name.find(name);
    const Record* listed =
        it != by_name.end() && lists(*it->second, lease.ip) ? it->second : nullptr;
    const char* reason = why(lease, listed);
    if (reason == nullptr) {
      holding.insert(name);
      kept.push_back(lease);
      continue;
    }
    spdlog::info("releasing {} of {}: {}", lease.ip.str(), lease.owner.str(), reason);
    TRY(store.release(lease.ip));
    released.push_back(lease.ip);
  }
  for (const auto& r : records) {
    if (drop(r, holding.count(record_name(r.owner)) > 0)) {
      TRY(store.remove_record(r.owner));
    }
  }
  TRY(store.remove_temporaries());
  TRY(store.sync());
  spdlog::info("{}: {} of {} leases released", dir_, released.size(), leases.size());
  TRY(index_.rebuild(store, kept));
  return released;
}

const char* Allocator::reclaim_reason(const Lease& lease, const Record* listed,
                                      const std::vector<IpAddr>& keep) const {
  if (std::find(keep.begin(), keep.end(), lease.ip) != keep.end()) {
    return nullptr;
  }
  if (!lease.readable) {
    return "unreadable";
  }
  if (listed == nullptr) {
    return "orphan (not listed by its attachment)";
  }
  if (!lease.netns.empty() && !netns_exists_(lease.netns)) {
    return "stale (netns gone)";
  }
  return nullptr;
}

Status Allocator::sweep(Store& store, const std::vector<IpAddr>& keep) {
  auto reclaim = [&](const Lease& lease, const Record* listed) {
    return reclaim_reason(lease, listed, keep);
  };
  // Records left without a lease (stale attachments, DEL residue) go too.
  auto leaseless = [](const Record&, bool holds) { return !holds; };
  TRY(release_leases(store, reclaim, leaseless));
  return ok_status();
}

Expected<Allocator::Reconciled> Allocator::reconcile(const std::vector<Owner>& keep) {
  TRY_ASSIGN(Store store, open_store());
  Reconciled out;
  std::vector<size_t> used(pools_.size(), 0);
  auto kept = [&](const Owner& o) {
    return std::any_of(keep.begin(), keep.end(), [&](const Owner& k) {
      return k.container_id == o.container_id && k.ifname == o.ifname;
    });
  };
  auto reclaim = [&](const Lease& lease, const Record* listed) {
    const char* why =
        lease.readable && kept(lease.owner) ? nullptr : reclaim_reason(lease, listed, {});
    if (why != nullptr) {
      ++out.released[why];
    } else if (auto set = set_of(lease.ip)) {
      ++used[*set];
    }
    return why;
  };
  auto leaseless = [&](const Record& r, bool holds) { return !holds && !kept(r.owner); };
  TRY_ASSIGN(auto released, release_leases(store, reclaim, leaseless));
  std::vector<size_t> blocks(pools_.size(), 0);
  if (blocks_) {
    blocks_->released(store, released, true);
    // Blocks given back are no longer the node's; each held block is a range of its set.
    TRY_ASSIGN(auto held, blocks_->held(store));
    pools_.clear();
    blocks.assign(held.size(), 0);
    for (size_t set = 0; set < held.size(); ++set) {
      blocks[set] = held[set].ranges.size();
      pools_.emplace_back(held[set], config_.exclude);
    }
    index_.reset(&pools_);
  }
  for (size_t set = 0; set < pools_.size(); ++set) {
    const Pool& pool = pools_[set];
    PoolUsage usage;
    usage.where = pool.where();
    usage.description = pool.description();
    // Reserved addresses are counted where there is a bitmap; a larger pool's few
    // reserved ones do not show at its size.
    u128 usable = pool.has_bitmap() ? pool.size() - pool.reserved_mask().count() : pool.size();
    usage.size = static_cast<double>(usable);
    usage.used = used[set];
    usage.blocks = blocks[set];
    out.pools.push_back(std::move(usage));
  }
  return out;
}

Status Allocator::gc(const std::vector<Owner>& valid) {
  TRY_ASSIGN(Store store, open_store());
  // One lookup per lease, not a scan of the list (60,000 of each took 13.5 s under the lock).
  std::unordered_set<std::string> valid_names;
  for (const auto& o : valid) {
    valid_names.insert(o.container_id + '\0' + o.ifname);  // neither can hold a NUL
  }
  auto is_valid = [&](const Owner& o) {
    return valid_names.count(o.container_id + '\0' + o.ifname) > 0;
  };
  // Kept: a lease of a valid attachment that its record lists (a valid
  // attachment's orphans from a killed ADD go as well).
  auto collect = [&](const Lease& lease, const Record* listed) -> const char* {
    if (!lease.readable) {
      return "unreadable";
    }
    if (!is_valid(lease.owner)) {
      return "not a valid attachment (GC)";
    }
    return listed == nullptr ? "orphan (not listed by its attachment)" : nullptr;
  };
  auto invalid = [&](const Record& r, bool) { return !is_valid(r.owner); };
  TRY_ASSIGN(auto released, release_leases(store, collect, invalid));
  if (blocks_) {
    blocks_->released(store, released, true);
  }
  return ok_status();
}

Status Allocator::status() {
  TRY_ASSIGN(Store store, open_store());
  if (blocks_) {
    return ok_status();  // full blocks are no reason to refuse: ADD claims another
  }
  for (size_t set = 0; set < pools_.size(); ++set) {
    const Pool& pool = pools_[set];
    for (int round = 0; round < 2; ++round) {
      bool free = false;
      if (pool.has_bitmap()) {
        TRY_ASSIGN(auto hit, index_.next_free(store, set, 0));
        free = hit.has_value();
      } else {
        free = pool.next_unreserved(0).has_value();  // too large to fill up
      }
      if (free) {
        break;
      }
      if (round == 1) {
        return Error(ErrorKind::kNotAvailable, "no free address left in range set " + pool.where() +
                                                   " (" + pool.description() + ")");
      }
      TRY(sweep(store, {}));
    }
  }
  return ok_status();
}

cni::Result to_result(const IpamConfig& config, const std::vector<Allocation>& allocations) {
  cni::Result result;
  for (const auto& a : allocations) {
    cni::IpConfig ip;
    ip.address = a.ip.str() + "/" + std::to_string(a.range.subnet.len);
    ip.gateway = a.range.gateway.str();
    result.ips.push_back(std::move(ip));
  }
  result.routes = config.routes;
  result.dns = config.dns;
  return result;
}

}  // namespace rdmanet::ipam
