#include "ipam/allocator.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
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
  indexes_.resize(pools_.size());
}

std::optional<size_t> Allocator::set_of(const IpAddr& ip) const {
  for (size_t i = 0; i < pools_.size(); ++i) {
    if (pools_[i].ordinal(ip)) {
      return i;
    }
  }
  return std::nullopt;
}

Status Allocator::rebuild_indexes(Store& store, const std::vector<Lease>& leases) {
  for (size_t set = 0; set < pools_.size(); ++set) {
    const Pool& pool = pools_[set];
    Index index;
    index.fingerprint = pool.fingerprint();
    index.cursor = indexes_[set] ? indexes_[set]->cursor : 0;
    index.taken = Bitmap(pool.has_bitmap() ? static_cast<size_t>(pool.size()) : 0);
    if (pool.has_bitmap()) {
      for (const auto& lease : leases) {
        if (auto o = pool.ordinal(lease.ip)) {
          index.taken.set(static_cast<size_t>(*o));
        }
      }
    }
    if (auto s = store.save_index(set, index); !s) {
      return s;
    }
    indexes_[set] = std::move(index);
  }
  spdlog::debug("rebuilt the index of {} from {} leases", dir_, leases.size());
  return ok_status();
}

Expected<Index*> Allocator::index_for(Store& store, size_t set) {
  if (!indexes_[set]) {
    const Pool& pool = pools_[set];
    auto loaded = store.load_index(set, pool.fingerprint(),
                                   pool.has_bitmap() ? static_cast<size_t>(pool.size()) : 0);
    if (!loaded) {
      return std::move(loaded).error();
    }
    if (*loaded) {
      indexes_[set] = std::move(**loaded);
    } else {
      // Missing, corrupt or made for another configuration: the leases decide.
      auto leases = store.list_leases();
      if (!leases) {
        return std::move(leases).error();
      }
      if (auto s = rebuild_indexes(store, *leases); !s) {
        return std::move(s).error();
      }
    }
  }
  return &*indexes_[set];
}

void Allocator::note_taken(Store& store, size_t set, const IpAddr& ip, bool taken,
                           bool advance_cursor) {
  const Pool& pool = pools_[set];
  if (!indexes_[set]) {
    // DEL does not rebuild a missing index; the next ADD will.
    auto loaded = store.load_index(set, pool.fingerprint(),
                                   pool.has_bitmap() ? static_cast<size_t>(pool.size()) : 0);
    if (!loaded || !*loaded) {
      return;
    }
    indexes_[set] = std::move(**loaded);
  }
  Index& index = *indexes_[set];
  auto o = pool.ordinal(ip);
  if (!o) {
    return;
  }
  size_t bit = pool.has_bitmap() ? static_cast<size_t>(*o) : SIZE_MAX;
  if (pool.has_bitmap()) {
    taken ? index.taken.set(bit) : index.taken.reset(bit);
  }
  if (advance_cursor) {
    index.cursor = (*o + 1) % pool.size();
  }
  if (auto s = store.save_index_word(set, index, bit); !s) {
    // Only a hint: a stale bit is repaired by the sweep or costs one EEXIST.
    spdlog::warn("{}", s.error().msg());
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
    if (auto s = blocks_->grow(store, set); !s) {
      return std::move(s).error();
    }
    if (auto s = refresh_pools(store); !s) {
      return std::move(s).error();
    }
  }
}

Expected<IpAddr> Allocator::allocate_in_pool(Store& store, size_t set, const Lease& proto,
                                             const std::vector<IpAddr>& keep) {
  const Pool& pool = pools_[set];
  for (int round = 0; round < 2; ++round) {
    auto index = index_for(store, set);
    if (!index) {
      return std::move(index).error();
    }
    Index& idx = **index;
    // Tries one ordinal; true when it is ours now.
    auto try_claim = [&](u128 o) -> Expected<bool> {
      Lease lease = proto;
      lease.ip = pool.address(o);
      if (before_claim_) {
        if (auto s = before_claim_(lease.ip); !s) {
          return std::move(s).error();
        }
      }
      auto claimed = store.claim(lease);
      if (!claimed || *claimed) {
        return claimed;
      }
      // The index said free but a lease exists: claimed by a process that died
      // before updating the index. Ours (an ADD that crashed) is adopted.
      auto existing = store.read_lease(lease.ip);
      if (!existing) {
        return std::move(existing).error();
      }
      return *existing && (*existing)->readable && (*existing)->owner == proto.owner;
    };
    if (pool.has_bitmap()) {
      Bitmap mask = pool.reserved_mask();
      mask |= idx.taken;
      size_t from = static_cast<size_t>(idx.cursor);
      while (auto hit = mask.find_clear_from(from)) {
        auto won = try_claim(*hit);
        if (!won) {
          return std::move(won).error();
        }
        if (*won) {
          return pool.address(*hit);
        }
        mask.set(*hit);
        idx.taken.set(*hit);
        if (auto s = store.save_index_word(set, idx, *hit); !s) {
          spdlog::warn("{}", s.error().msg());  // a hint only: the next ADD pays one EEXIST
        }
        from = *hit + 1;
      }
    } else {
      u128 from = idx.cursor;
      bool wrapped = false;
      for (u128 probes = 0; probes < kMaxProbes;) {
        auto o = pool.next_unreserved(from);
        if (!o || (wrapped && *o >= idx.cursor)) {
          if (wrapped) {
            break;
          }
          wrapped = true;
          from = 0;
          continue;
        }
        auto won = try_claim(*o);
        if (!won) {
          return std::move(won).error();
        }
        if (*won) {
          return pool.address(*o);
        }
        from = *o + 1;
        ++probes;
      }
    }
    if (round == 0) {
      spdlog::info("range set {} ({}) looks full: sweeping for reclaimable leases", pool.where(),
                   pool.description());
      if (auto s = sweep(store, keep); !s) {
        return std::move(s).error();
      }
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
    if (auto s = before_claim_(ip); !s) {
      return std::move(s).error();
    }
  }
  for (int round = 0; round < 2; ++round) {
    auto claimed = store.claim(lease);
    if (!claimed) {
      return std::move(claimed).error();
    }
    if (*claimed) {
      return ip;
    }
    auto existing = store.read_lease(ip);
    if (!existing) {
      return std::move(existing).error();
    }
    if (*existing && (*existing)->readable && (*existing)->owner == proto.owner) {
      return ip;
    }
    if (round == 1 || !*existing) {
      std::string holder = *existing ? (*existing)->owner.str() : "another attachment";
      return Error(ErrorKind::kAddressUnavailable,
                   "requested address " + ip.str() + " is already allocated to " + holder);
    }
    // The holder may be reclaimable (orphan, stale netns).
    if (auto s = sweep(store, keep); !s) {
      return std::move(s).error();
    }
  }
  return Error(ErrorKind::kInternal, "unreachable");
}

Expected<Store> Allocator::open_store() {
  // Another process may have changed the index since this object last held
  // the lock: read it afresh under the lock.
  indexes_.assign(pools_.size(), std::nullopt);
  auto store = Store::open(dir_);
  if (store && blocks_) {
    if (auto s = refresh_pools(*store); !s) {
      return std::move(s).error();
    }
  }
  return store;
}

Status Allocator::refresh_pools(Store& store) {
  auto sets = blocks_->held(store);
  if (!sets) {
    return std::move(sets).error();
  }
  pools_.clear();
  for (const auto& set : *sets) {
    pools_.emplace_back(set, config_.exclude);
  }
  indexes_.assign(pools_.size(), std::nullopt);
  return ok_status();
}

Expected<std::vector<Allocation>> Allocator::add(const Attachment& who,
                                                 const std::vector<IpAddr>& requested) {
  std::vector<std::optional<IpAddr>> want(pools_.size());
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

  auto store = open_store();
  if (!store) {
    return std::move(store).error();
  }
  if (auto s = store->remove_stale_temporaries(); !s) {
    return std::move(s).error();
  }
  std::vector<std::optional<IpAddr>> held(pools_.size());
  auto record = store->read_record(who.owner);
  if (!record) {
    return std::move(record).error();
  }
  if (*record) {
    for (const auto& ip : (*record)->ips) {
      auto set = set_of(ip);
      if (!set || held[*set]) {
        continue;
      }
      auto lease = store->read_lease(ip);
      if (!lease) {
        return std::move(lease).error();
      }
      if (*lease && (*lease)->readable && (*lease)->owner == who.owner) {
        held[*set] = ip;
      }
    }
  }

  Lease proto;
  proto.owner = who.owner;
  proto.netns = who.netns;
  proto.pod_namespace = who.pod_namespace;
  proto.pod_name = who.pod_name;
  proto.pod_uid = who.pod_uid;
  std::vector<std::pair<size_t, IpAddr>> fresh;
  auto fail = [&](Error error) -> Error {
    for (const auto& [set, ip] : fresh) {
      (void)store->release(ip);
      note_taken(*store, set, ip, false, false);
    }
    // The record as it was before this call (before_claim_ may have rewritten it).
    (void)(*record ? store->write_record(**record) : store->remove_record(who.owner));
    (void)store->sync();
    return error;
  };
  before_claim_ = [&](const IpAddr& candidate) {
    Record r{who.owner, who.netns, {candidate}};
    for (const auto& h : held) {
      if (h) {
        r.ips.push_back(*h);
      }
    }
    return store->write_record(r);
  };
  struct Reset {
    std::function<Status(const IpAddr&)>* fn;
    ~Reset() { *fn = nullptr; }
  } reset{&before_claim_};
  for (size_t set = 0; set < pools_.size(); ++set) {
    if (held[set]) {
      continue;
    }
    std::vector<IpAddr> keep;
    for (const auto& h : held) {
      if (h) {
        keep.push_back(*h);
      }
    }
    auto ip = want[set] ? claim_requested(*store, set, *want[set], proto, keep)
                        : allocate(*store, set, proto, keep);
    if (!ip) {
      return fail(std::move(ip).error());
    }
    spdlog::debug("{} gets {} from {}", who.owner.str(), ip->str(), pools_[set].where());
    held[set] = *ip;
    fresh.emplace_back(set, *ip);
    note_taken(*store, set, *ip, true, !want[set]);
  }
  // A re-ADD that holds everything changes nothing: the netns and pod of a
  // lease are those of the ADD that created it.
  if (!fresh.empty()) {
    Record r{who.owner, who.netns, {}};
    for (const auto& ip : held) {
      r.ips.push_back(*ip);
    }
    if (auto s = store->write_record(r); !s) {
      return fail(std::move(s).error());
    }
  }
  if (auto s = store->sync(); !s) {
    return fail(std::move(s).error());
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
    auto lease = store.read_lease(ip);
    if (!lease) {
      return std::move(lease).error();
    }
    // Only our own lease: after a crash the address may belong to someone else now.
    if (*lease && (*lease)->readable && (*lease)->owner == owner) {
      if (auto s = store.release(ip); !s) {
        return s;
      }
      if (auto set = set_of(ip)) {
        note_taken(store, *set, ip, false, false);
      }
    }
  }
  return store.remove_record(owner);
}

Status Allocator::del(const Owner& who) {
  auto store = open_store();
  if (!store) {
    return std::move(store).error();
  }
  if (auto s = store->remove_stale_temporaries(); !s) {
    return s;
  }
  auto record = store->read_record(who);
  if (!record) {
    return std::move(record).error();
  }
  if (!*record) {
    return ok_status();
  }
  if (auto s = release_attachment(*store, who, (*record)->ips); !s) {
    return s;
  }
  if (auto s = store->sync(); !s) {
    return s;
  }
  if (blocks_) {
    blocks_->released(*store, (*record)->ips, false);
  }
  return ok_status();
}

Status Allocator::check(const Owner& who) {
  auto store = open_store();
  if (!store) {
    return std::move(store).error();
  }
  auto record = store->read_record(who);
  if (!record) {
    return std::move(record).error();
  }
  if (!*record) {
    return Error(ErrorKind::kUnknownContainer, who.str() + " holds no address in " + dir_);
  }
  for (size_t set = 0; set < pools_.size(); ++set) {
    bool found = false;
    for (const auto& ip : (*record)->ips) {
      if (!pools_[set].ordinal(ip)) {
        continue;
      }
      auto lease = store->read_lease(ip);
      if (!lease) {
        return std::move(lease).error();
      }
      found = *lease && (*lease)->readable && (*lease)->owner == who;
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

Status Allocator::sweep(Store& store, const std::vector<IpAddr>& keep) {
  auto records = store.list_records();
  if (!records) {
    return std::move(records).error();
  }
  auto leases = store.list_leases();
  if (!leases) {
    return std::move(leases).error();
  }
  std::unordered_map<std::string, const Record*> by_name;
  for (const auto& r : *records) {
    by_name[Store::record_name(r.owner)] = &r;
  }
  std::unordered_set<std::string> holding;  // records that keep a lease
  std::vector<Lease> kept;
  size_t reclaimed = 0;
  for (const auto& lease : *leases) {
    std::string name = Store::record_name(lease.owner);
    const char* why = nullptr;
    if (std::find(keep.begin(), keep.end(), lease.ip) != keep.end()) {
      why = nullptr;
    } else if (!lease.readable) {
      why = "unreadable";
    } else if (auto it = by_name.find(name); it == by_name.end() || !lists(*it->second, lease.ip)) {
      why = "orphan (not listed by its attachment)";
    } else if (!lease.netns.empty() && !netns_exists_(lease.netns)) {
      why = "stale (netns gone)";
    }
    if (why == nullptr) {
      holding.insert(name);
      kept.push_back(lease);
      continue;
    }
    spdlog::info("reclaiming {} of {}: {}", lease.ip.str(), lease.owner.str(), why);
    if (auto s = store.release(lease.ip); !s) {
      return s;
    }
    ++reclaimed;
  }
  // Records left without a lease (stale attachments, DEL residue) go too.
  for (const auto& r : *records) {
    if (holding.count(Store::record_name(r.owner)) == 0) {
      if (auto s = store.remove_record(r.owner); !s) {
        return s;
      }
    }
  }
  if (auto s = store.remove_temporaries(); !s) {
    return s;
  }
  if (auto s = store.sync(); !s) {
    return s;
  }
  spdlog::info("sweep of {}: {} of {} leases reclaimed", dir_, reclaimed, leases->size());
  return rebuild_indexes(store, kept);
}

Status Allocator::gc(const std::vector<Owner>& valid) {
  auto store = open_store();
  if (!store) {
    return std::move(store).error();
  }
  auto is_valid = [&](const Owner& o) {
    return std::find(valid.begin(), valid.end(), o) != valid.end();
  };
  auto records = store->list_records();
  if (!records) {
    return std::move(records).error();
  }
  auto leases = store->list_leases();
  if (!leases) {
    return std::move(leases).error();
  }
  std::unordered_map<std::string, const Record*> by_name;
  for (const auto& r : *records) {
    by_name[Store::record_name(r.owner)] = &r;
  }
  std::vector<Lease> kept;
  std::vector<IpAddr> released;
  for (const auto& lease : *leases) {
    // Kept: a lease of a valid attachment that its record lists (a valid
    // attachment's orphans from a killed ADD go as well).
    auto it = by_name.find(Store::record_name(lease.owner));
    if (lease.readable && is_valid(lease.owner) && it != by_name.end() &&
        lists(*it->second, lease.ip)) {
      kept.push_back(lease);
      continue;
    }
    spdlog::info("GC releases {} of {}", lease.ip.str(), lease.owner.str());
    if (auto s = store->release(lease.ip); !s) {
      return s;
    }
    released.push_back(lease.ip);
  }
  for (const auto& r : *records) {
    if (!is_valid(r.owner)) {
      if (auto s = store->remove_record(r.owner); !s) {
        return s;
      }
    }
  }
  if (auto s = store->remove_temporaries(); !s) {
    return s;
  }
  if (auto s = store->sync(); !s) {
    return s;
  }
  if (auto s = rebuild_indexes(*store, kept); !s) {
    return s;
  }
  if (blocks_) {
    blocks_->released(*store, released, true);
  }
  return ok_status();
}

Status Allocator::status() {
  auto store = open_store();
  if (!store) {
    return std::move(store).error();
  }
  if (blocks_) {
    return ok_status();  // full blocks are no reason to refuse: ADD claims another
  }
  for (size_t set = 0; set < pools_.size(); ++set) {
    const Pool& pool = pools_[set];
    for (int round = 0; round < 2; ++round) {
      auto index = index_for(*store, set);
      if (!index) {
        return std::move(index).error();
      }
      bool free = false;
      if (pool.has_bitmap()) {
        Bitmap mask = pool.reserved_mask();
        mask |= (*index)->taken;
        free = mask.find_clear_from(0).has_value();
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
      if (auto s = sweep(*store, {}); !s) {
        return s;
      }
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
