// For tests: etcd in memory. One key space with etcd's revisions (a store
// revision that each transaction that changes something moves by one; create and
// mod revisions per key), its comparison and range rules, and the failures a
// real cluster shows, injected on purpose and at exact points: a member that
// does not answer, an answer lost after the commit, a transaction still in
// flight that lands later.
//
// A test double although etcd runs here (tests/binary/ipam_cluster_test.py): there a
// lost answer needs a dropping proxy and a race needs luck; here the claim,
// adoption and release races of cluster.h run in milliseconds, in an order the
// test chooses.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ipam/kv_store.h"

namespace rdmanet::ipam {

class FakeEtcd final : public KvStore {
 public:
  // What happens to a call that a fault is injected into.
  enum class Fault {
    kUnavailable,  // nothing happens; kTryAgainLater (no leader, every member down)
    kAnswerLost,   // the txn commits; kTryAgainLater all the same (the answer never came)
    // The txn commits and its answer is lost; the client sends it again to another
    // member, and the caller gets that second answer (EtcdClient retries within a call).
    kRetriedAfterCommit,
    kInFlight,  // kTryAgainLater now; the txn commits at deliver_in_flight()
  };

  // A call about to be applied, for before_each_call().
  struct Call {
    bool is_txn = false;
    std::vector<std::string> keys;  // the range's key, or every key the txn compares or writes
    bool touches(const std::string& part) const;
  };

  // The next call (txn, or range with `on_range`) with a key containing `key_part`
  // gets `fault`. Faults are used in the order injected, each once. A faulted range
  // only fails.
  void inject(Fault fault, std::string key_part = "", bool on_range = false);
  // Runs `hook` before each call takes effect (not for calls the hook makes itself):
  // to run another node's steps between two of this one's. Single-threaded tests only.
  void before_each_call(std::function<void(const Call&)> hook);
  // Applies the transactions kInFlight held back, in order.
  void deliver_in_flight();

  Expected<std::vector<KeyValue>> range(const std::string& key,
                                        const std::string& range_end) override;
  Expected<TxnResult> txn(const std::vector<Compare>& compare,
                          const std::vector<Op>& success) override;

  // Direct access, as etcdctl would do it: no fault, no hook.
  int64_t put(const std::string& key, const std::string& value);  // the new revision
  void erase(const std::string& key);
  std::optional<KeyValue> get(const std::string& key) const;
  std::vector<KeyValue> with_prefix(const std::string& prefix) const;
  int64_t revision() const;
  // Transactions received (faulted ones included) and those whose comparison failed.
  size_t txns() const;
  size_t failed_compares() const;

 private:
  struct Txn {
    std::vector<Compare> compare;
    std::vector<Op> success;
  };
  struct Injected {
    Fault fault;
    std::string key_part;
    bool on_range;
  };
  // Under mutex_.
  std::optional<Fault> take_fault(const Call& call);
  TxnResult apply(const Txn& t);
  void run_hook(const Call& call);

  mutable std::mutex mutex_;
  std::map<std::string, KeyValue> kvs_;
  int64_t revision_ = 1;  // a new etcd cluster is at revision 1
  std::deque<Injected> faults_;
  std::vector<Txn> in_flight_;
  std::function<void(const Call&)> hook_;
  bool in_hook_ = false;
  size_t txns_ = 0;
  size_t failed_compares_ = 0;
};

}  // namespace rdmanet::ipam
