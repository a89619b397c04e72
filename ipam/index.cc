#include "ipam/index.h"

#include <spdlog/spdlog.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <string>

namespace rdmanet::ipam {

namespace {

constexpr uint64_t kIndexMagic = 0x3130584449444d52ULL;  // "RDMIDX01"
constexpr size_t kHeader = 64;
constexpr off_t kCursorAt = 24;  // header words 3 and 4

std::string cursor_bytes(u128 cursor) {
  std::array<uint64_t, 2> halves = {static_cast<uint64_t>(cursor),
                                    static_cast<uint64_t>(cursor >> 64)};
  return {reinterpret_cast<const char*>(halves.data()), sizeof halves};
}

}  // namespace

void AllocationIndex::reset(const std::vector<Pool>* pools) {
  pools_ = pools;
  sets_.assign(pools_->size(), std::nullopt);
}

size_t AllocationIndex::bits(size_t set) const {
  const Pool& pool = (*pools_)[set];
  return pool.has_bitmap() ? static_cast<size_t>(pool.size()) : 0;
}

Expected<std::optional<AllocationIndex::SetIndex>> AllocationIndex::read(const Store& store,
                                                                         size_t set) const {
  TRY_ASSIGN(auto text, store.read_index(set));
  if (!text) {
    return std::optional<SetIndex>();
  }
  const Pool& pool = (*pools_)[set];
  SetIndex index;
  index.taken = Bitmap(bits(set));
  auto& words = index.taken.words();
  std::array<uint64_t, kHeader / 8> header{};
  if (text->size() != kHeader + words.size() * 8) {
    return std::optional<SetIndex>();  // torn, or made for another size
  }
  std::memcpy(header.data(), text->data(), kHeader);
  if (header[0] != kIndexMagic || header[1] != pool.fingerprint() || header[2] != bits(set)) {
    return std::optional<SetIndex>();
  }
  if (!words.empty()) {
    std::memcpy(words.data(), text->data() + kHeader, words.size() * 8);
  }
  index.cursor = (u128{header[4]} << 64) | header[3];
  if (pool.has_bitmap()) {
    index.reserved = pool.reserved_mask();
  }
  return std::optional<SetIndex>(std::move(index));
}

Status AllocationIndex::write(Store& store, size_t set, const SetIndex& index) const {
  const auto& words = index.taken.words();
  std::string content(kHeader + words.size() * 8, '\0');
  std::array<uint64_t, kHeader / 8> header{};
  header[0] = kIndexMagic;
  header[1] = (*pools_)[set].fingerprint();
  header[2] = index.taken.size();
  std::memcpy(content.data(), header.data(), kHeader);
  std::string cursor = cursor_bytes(index.cursor);
  std::memcpy(content.data() + kCursorAt, cursor.data(), cursor.size());
  if (!words.empty()) {
    std::memcpy(content.data() + kHeader, words.data(), words.size() * 8);
  }
  return store.write_index(set, content);
}

Status AllocationIndex::rebuild(Store& store, const std::vector<Lease>& leases) {
  for (size_t set = 0; set < pools_->size(); ++set) {
    const Pool& pool = (*pools_)[set];
    SetIndex index;
    index.cursor = sets_[set] ? sets_[set]->cursor : 0;
    index.taken = Bitmap(bits(set));
    if (pool.has_bitmap()) {
      index.reserved = pool.reserved_mask();
      for (const auto& lease : leases) {
        if (auto o = pool.ordinal(lease.ip)) {
          index.taken.set(static_cast<size_t>(*o));
        }
      }
    }
    TRY(write(store, set, index));
    sets_[set] = std::move(index);
  }
  spdlog::debug("rebuilt the index of {} from {} leases", store.dir(), leases.size());
  return ok_status();
}

Expected<AllocationIndex::SetIndex*> AllocationIndex::loaded(Store& store, size_t set) {
  if (!sets_[set]) {
    TRY_ASSIGN(sets_[set], read(store, set));
  }
  if (!sets_[set]) {
    // Missing, corrupt or made for another configuration: the leases decide.
    TRY_ASSIGN(auto leases, store.list_leases());
    TRY(rebuild(store, leases));
  }
  return &*sets_[set];
}

Expected<u128> AllocationIndex::cursor(Store& store, size_t set) {
  TRY_ASSIGN(auto index, loaded(store, set));
  return index->cursor;
}

Expected<std::optional<u128>> AllocationIndex::next_free(Store& store, size_t set, u128 from) {
  TRY_ASSIGN(auto index, loaded(store, set));
  Bitmap mask = index->reserved;
  mask |= index->taken;
  auto hit = mask.find_clear_from(static_cast<size_t>(from));
  return hit ? std::optional<u128>(*hit) : std::nullopt;
}

void AllocationIndex::mark(Store& store, size_t set, u128 ordinal, bool taken,
                           bool advance_cursor) {
  const Pool& pool = (*pools_)[set];
  if (!sets_[set]) {
    auto index = read(store, set);
    if (!index || !*index) {
      return;  // DEL does not rebuild a missing index; the next ADD will
    }
    sets_[set] = std::move(*index);
  }
  SetIndex& index = *sets_[set];
  std::vector<std::pair<off_t, std::string>> changed;
  if (pool.has_bitmap()) {
    size_t bit = static_cast<size_t>(ordinal);
    taken ? index.taken.set(bit) : index.taken.reset(bit);
    uint64_t word = index.taken.words()[bit / 64];
    changed.emplace_back(static_cast<off_t>(kHeader + (bit / 64) * 8),
                         std::string(reinterpret_cast<const char*>(&word), sizeof word));
  }
  if (advance_cursor) {
    index.cursor = (ordinal + 1) % pool.size();
    changed.emplace_back(kCursorAt, cursor_bytes(index.cursor));
  }
  if (auto s = store.patch_index(set, changed); !s) {
    // Only a hint: a stale bit is repaired by the sweep or costs one EEXIST.
    spdlog::warn("{}", s.error().msg());
  }
}

}  // namespace rdmanet::ipam
