#include "ipam/testing/fake_etcd.h"

#include <algorithm>
#include <set>

namespace rdmanet::ipam {

namespace {

Error unavailable(const char* what) {
  return Error(ErrorKind::kTryAgainLater, std::string("etcd unreachable (injected: ") + what + ")");
}

}  // namespace

bool FakeEtcd::Call::touches(const std::string& part) const {
  return std::any_of(keys.begin(), keys.end(),
                     [&](const std::string& k) { return k.find(part) != std::string::npos; });
}

void FakeEtcd::inject(Fault fault, std::string key_part, bool on_range) {
  std::lock_guard lock(mutex_);
  faults_.push_back({fault, std::move(key_part), on_range});
}

void FakeEtcd::before_each_call(std::function<void(const Call&)> hook) {
  std::lock_guard lock(mutex_);
  hook_ = std::move(hook);
}

void FakeEtcd::deliver_in_flight() {
  std::lock_guard lock(mutex_);
  for (const auto& t : in_flight_) {
    apply(t);
  }
  in_flight_.clear();
}

void FakeEtcd::run_hook(const Call& call) {
  std::function<void(const Call&)> hook;
  {
    std::lock_guard lock(mutex_);
    if (!hook_ || in_hook_) {
      return;
    }
    hook = hook_;
    in_hook_ = true;
  }
  hook(call);
  std::lock_guard lock(mutex_);
  in_hook_ = false;
}

std::optional<FakeEtcd::Fault> FakeEtcd::take_fault(const Call& call) {
  for (auto it = faults_.begin(); it != faults_.end(); ++it) {
    if (it->on_range != call.is_txn && call.touches(it->key_part)) {
      Fault f = it->fault;
      faults_.erase(it);
      return f;
    }
  }
  return std::nullopt;
}

Expected<std::vector<KeyValue>> FakeEtcd::range(const std::string& key,
                                                const std::string& range_end) {
  if (key.empty()) {
    // etcd answers InvalidArgument, which EtcdClient reports as refused.
    return Error(ErrorKind::kIo, "etcd refused /v3/kv/range: key is not provided");
  }
  Call call{false, {key}};
  run_hook(call);
  std::lock_guard lock(mutex_);
  if (take_fault(call)) {
    return unavailable("range");
  }
  std::vector<KeyValue> out;
  if (range_end.empty()) {
    if (auto it = kvs_.find(key); it != kvs_.end()) {
      out.push_back(it->second);
    }
    return out;
  }
  // "\0" as range_end: every key from `key` on.
  bool to_the_end = range_end == std::string(1, '\0');
  for (auto it = kvs_.lower_bound(key); it != kvs_.end() && (to_the_end || it->first < range_end);
       ++it) {
    out.push_back(it->second);
  }
  return out;
}

Expected<TxnResult> FakeEtcd::txn(const std::vector<Compare>& compare,
                                  const std::vector<Op>& success) {
  // etcd checks this before anything else, and refuses the request (InvalidArgument).
  std::set<std::string> written;
  for (const auto& op : success) {
    if (!written.insert(op.key).second) {
      return Error(ErrorKind::kIo,
                   "etcd refused /v3/kv/txn: etcdserver: duplicate key given in txn request");
    }
  }
  Call call{true, {}};
  for (const auto& c : compare) {
    call.keys.push_back(c.key);
  }
  for (const auto& op : success) {
    call.keys.push_back(op.key);
  }
  run_hook(call);
  std::lock_guard lock(mutex_);
  ++txns_;
  Txn t{compare, success};
  auto fault = take_fault(call);
  if (!fault) {
    return apply(t);
  }
  switch (*fault) {
    case Fault::kUnavailable:
      return unavailable("no member answered");
    case Fault::kAnswerLost:
      apply(t);
      return unavailable("the answer was lost after the commit");
    case Fault::kRetriedAfterCommit:
      apply(t);
      return apply(t);
    case Fault::kInFlight:
      in_flight_.push_back(std::move(t));
      return unavailable("the transaction is still in flight");
  }
  return Error(ErrorKind::kInternal, "unknown fault");
}

TxnResult FakeEtcd::apply(const Txn& t) {
  // A key that does not exist has create and mod revision 0, as in etcd.
  bool holds = std::all_of(t.compare.begin(), t.compare.end(), [&](const Compare& c) {
    auto it = kvs_.find(c.key);
    int64_t have = 0;
    if (it != kvs_.end()) {
      have = c.target == Compare::Target::kCreateRevision ? it->second.create_revision
                                                          : it->second.mod_revision;
    }
    return have == c.revision;
  });
  if (!holds) {
    ++failed_compares_;
    return {false, revision_};
  }
  // Every change of one txn gets the same new revision; a txn that changes nothing
  // (deletes of missing keys only) leaves the revision where it is.
  int64_t next = revision_ + 1;
  bool changed = false;
  for (const auto& op : t.success) {
    auto it = kvs_.find(op.key);
    if (op.put_value) {
      KeyValue& kv = kvs_[op.key];
      kv.key = op.key;
      kv.value = *op.put_value;
      kv.create_revision = it == kvs_.end() ? next : kv.create_revision;
      kv.mod_revision = next;
      changed = true;
    } else if (it != kvs_.end()) {
      kvs_.erase(it);
      changed = true;
    }
  }
  if (changed) {
    revision_ = next;
  }
  return {true, revision_};
}

int64_t FakeEtcd::put(const std::string& key, const std::string& value) {
  std::lock_guard lock(mutex_);
  return apply({{}, {Op{key, value}}}).revision;
}

void FakeEtcd::erase(const std::string& key) {
  std::lock_guard lock(mutex_);
  apply({{}, {Op{key, std::nullopt}}});
}

std::optional<KeyValue> FakeEtcd::get(const std::string& key) const {
  std::lock_guard lock(mutex_);
  auto it = kvs_.find(key);
  return it == kvs_.end() ? std::nullopt : std::optional<KeyValue>(it->second);
}

std::vector<KeyValue> FakeEtcd::with_prefix(const std::string& prefix) const {
  std::lock_guard lock(mutex_);
  std::vector<KeyValue> out;
  for (auto it = kvs_.lower_bound(prefix); it != kvs_.end() && it->first.rfind(prefix, 0) == 0;
       ++it) {
    out.push_back(it->second);
  }
  return out;
}

int64_t FakeEtcd::revision() const {
  std::lock_guard lock(mutex_);
  return revision_;
}

size_t FakeEtcd::txns() const {
  std::lock_guard lock(mutex_);
  return txns_;
}

size_t FakeEtcd::failed_compares() const {
  std::lock_guard lock(mutex_);
  return failed_compares_;
}

}  // namespace rdmanet::ipam
