// What cluster mode (cluster.h) needs of etcd: a range read and a transaction
// with comparisons on revisions and put/delete operations, with etcd's meaning.
// EtcdClient (etcd.h) is the real one; FakeEtcd (testing/fake_etcd.h) is the tests'.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"

namespace rdmanet::ipam {

struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;  // the store revision that created the key
  int64_t mod_revision = 0;     // the store revision that last wrote it
};

// One comparison of a transaction; etcd's Compare with result EQUAL. A key that
// does not exist has create and mod revision 0.
struct Compare {
  enum class Target { kCreateRevision, kModRevision };
  Target target = Target::kCreateRevision;
  std::string key;
  int64_t revision = 0;
};

// One operation of a transaction: a put (value set) or a delete.
struct Op {
  std::string key;
  std::optional<std::string> put_value;  // nullopt: delete the key
};

struct TxnResult {
  bool succeeded = false;
  int64_t revision = 0;  // the store revision after the txn (a put's mod_revision)
};

class KvStore {
 public:
  virtual ~KvStore() = default;

  // Every key in [key, range_end), in key order; range_end empty: the key alone.
  virtual Expected<std::vector<KeyValue>> range(const std::string& key,
                                                const std::string& range_end) = 0;
  // If every comparison holds, applies `success` at one new revision, else nothing.
  // kTryAgainLater when the store did not answer: the txn may or may not have happened.
  virtual Expected<TxnResult> txn(const std::vector<Compare>& compare,
                                  const std::vector<Op>& success) = 0;
};

// The range_end that selects every key starting with `prefix`.
std::string prefix_end(const std::string& prefix);

}  // namespace rdmanet::ipam
