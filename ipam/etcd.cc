#include "ipam/etcd.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/hex.h"
#include "base/json_fields.h"

namespace rdmanet::ipam {

using nlohmann::json;

namespace {

Expected<int64_t> to_int64(const json& v, const char* what) {
  int64_t n = 0;
  if (v.is_number_integer()) {
    return v.get<int64_t>();
  }
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    if (ec == std::errc() && p == s.data() + s.size()) {
      return n;
    }
  }
  return Error(ErrorKind::kIo, std::string("etcd answered a malformed ") + what);
}

}  // namespace

EtcdClient::EtcdClient(std::vector<Endpoint> endpoints, TlsFiles tls,
                       std::chrono::milliseconds timeout)
    : endpoints_(std::move(endpoints)), tls_files_(std::move(tls)), timeout_(timeout) {
  // Spread the first attempts of many nodes over the members.
  if (!endpoints_.empty()) {
    next_ = static_cast<size_t>(getpid()) % endpoints_.size();
  }
}

Expected<std::string> EtcdClient::call(const std::string& path, const std::string& body) {
  if (endpoints_.empty()) {
    return Error(ErrorKind::kInvalidConfig, "no etcd endpoints configured");
  }
  auto deadline = Clock::now() + timeout_;
  auto time_left = [&] {
    return std::max<long long>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
  };
  std::vector<std::string> last(endpoints_.size());
  for (int round = 0;; ++round) {
    for (size_t i = 0; i < endpoints_.size(); ++i) {
      size_t at = (next_ + i) % endpoints_.size();
      const Endpoint& e = endpoints_[at];
      if (e.tls && !tls_) {
        TRY_ASSIGN(tls_, TlsContext::load(tls_files_, "etcd"));
      }
      auto answer = http_post(e, tls_ ? &*tls_ : nullptr, path, body, deadline,
                              share_of(deadline, endpoints_.size() - i));
      if (answer && answer->status == 200) {
        next_ = at;  // a member that answers is asked first next time
        return std::move(answer->body);
      }
      std::string failed;
      bool transient = true;
      if (!answer) {
        failed = answer.error().msg();
        transient = answer.error().kind() == ErrorKind::kTryAgainLater;
      } else {
        // grpc-gateway: {"error": ..., "message": ..., "code": <grpc code>}; 5xx is
        // unavailable / deadline exceeded / internal (no leader, leader changed).
        json doc = parse_json(answer->body);
        std::string message =
            doc.is_object() && doc.contains("message") && doc["message"].is_string()
                ? doc["message"].get<std::string>()
                : answer->body.substr(0, 200);
        failed = "HTTP " + std::to_string(answer->status) + ": " + message;
        transient = answer->status >= 500;
      }
      last[at] = failed;
      spdlog::debug("etcd {} {}: {}", e.url, path, failed);
      if (!transient) {
        // A request etcd refuses is refused by every member.
        return Error(ErrorKind::kIo, "etcd " + e.url + " refused " + path + ": " + failed);
      }
      if (time_left() == 0) {
        std::string all;
        for (size_t k = 0; k < endpoints_.size(); ++k) {
          all += (k ? "; " : "") + endpoints_[k].url + ": " +
                 (last[k].empty() ? "not tried" : last[k]);
        }
        return Error(
            ErrorKind::kTryAgainLater,
            "etcd unreachable for " + std::to_string(timeout_.count()) + " ms (" + all + ")");
      }
    }
    // Every member failed this round (an election takes ~1 s at most): back off a
    // little, never past the deadline.
    std::this_thread::sleep_for(std::chrono::milliseconds(
        std::min<long long>(std::min(50 * (round + 1), 250), time_left())));
  }
}

namespace {

json compare_json(const Compare& c) {
  json out = {{"key", base64_encode(c.key)}, {"result", "EQUAL"}};
  if (c.target == Compare::Target::kCreateRevision) {
    out["target"] = "CREATE";
    out["create_revision"] = std::to_string(c.revision);
  } else {
    out["target"] = "MOD";
    out["mod_revision"] = std::to_string(c.revision);
  }
  return out;
}

json op_json(const Op& op) {
  if (op.put_value) {
    return {
        {"request_put", {{"key", base64_encode(op.key)}, {"value", base64_encode(*op.put_value)}}}};
  }
  return {{"request_delete_range", {{"key", base64_encode(op.key)}}}};
}

}  // namespace

Expected<std::vector<KeyValue>> EtcdClient::range(const std::string& key,
                                                  const std::string& range_end) {
  json req = {{"key", base64_encode(key)}};
  if (!range_end.empty()) {
    req["range_end"] = base64_encode(range_end);
  }
  TRY_ASSIGN(std::string body, call("/v3/kv/range", req.dump()));
  return decode_range_response(body);
}

Expected<TxnResult> EtcdClient::txn(const std::vector<Compare>& compare,
                                    const std::vector<Op>& success) {
  json req = {{"compare", json::array()}, {"success", json::array()}};
  for (const auto& c : compare) {
    req["compare"].push_back(compare_json(c));
  }
  for (const auto& op : success) {
    req["success"].push_back(op_json(op));
  }
  TRY_ASSIGN(std::string body, call("/v3/kv/txn", req.dump()));
  return decode_txn_response(body);
}

Expected<int64_t> EtcdClient::lease_grant(int ttl_seconds) {
  json req = {{"TTL", std::to_string(ttl_seconds)}};
  TRY_ASSIGN(std::string body, call("/v3/lease/grant", req.dump()));
  json doc = parse_json(body);
  // 64-bit numbers come as strings from the gateway.
  const json id = doc.is_object() ? doc.value("ID", json()) : json();
  const std::string text = id.is_string() ? id.get<std::string>() : std::string();
  if (text.empty()) {
    return Error(ErrorKind::kIo, "etcd answered a lease grant without an ID");
  }
  char* end = nullptr;
  long long n = std::strtoll(text.c_str(), &end, 10);
  if (*end != '\0' || n <= 0) {
    return Error(ErrorKind::kIo, "etcd answered a lease grant with ID \"" + text + "\"");
  }
  return static_cast<int64_t>(n);
}

Status EtcdClient::put_with_lease(const std::string& key, const std::string& value, int64_t lease) {
  json req = {{"key", base64_encode(key)},
              {"value", base64_encode(value)},
              {"lease", std::to_string(lease)}};
  TRY(call("/v3/kv/put", req.dump()));
  return ok_status();
}

namespace {

Expected<int64_t> header_revision(const json& doc) {
  if (!doc.contains("header") || !doc["header"].is_object() ||
      !doc["header"].contains("revision")) {
    return Error(ErrorKind::kIo, "etcd answered without a header revision");
  }
  return to_int64(doc["header"]["revision"], "header revision");
}

}  // namespace

Expected<std::vector<KeyValue>> decode_range_response(const std::string& body) {
  json doc = parse_json(body);
  if (!doc.is_object()) {
    return Error(ErrorKind::kIo, "etcd answered a range with something that is not JSON");
  }
  TRY(header_revision(doc));
  std::vector<KeyValue> out;
  if (!doc.contains("kvs")) {
    return out;  // no key: the gateway omits the empty list
  }
  if (!doc["kvs"].is_array()) {
    return Error(ErrorKind::kIo, "etcd answered a range whose kvs is not a list");
  }
  for (const auto& item : doc["kvs"]) {
    if (!item.is_object() || !item.contains("key") || !item["key"].is_string()) {
      return Error(ErrorKind::kIo, "etcd answered a range entry without a key");
    }
    KeyValue kv;
    auto key = base64_decode(item["key"].get<std::string>());
    std::optional<std::string> value = std::string();
    if (item.contains("value")) {
      value = item["value"].is_string() ? base64_decode(item["value"].get<std::string>())
                                        : std::nullopt;
    }
    if (!key || !value) {
      return Error(ErrorKind::kIo, "etcd answered a range entry that is not base64");
    }
    kv.key = std::move(*key);
    kv.value = std::move(*value);
    for (auto [field, dest] : {std::pair{"create_revision", &kv.create_revision},
                               std::pair{"mod_revision", &kv.mod_revision}}) {
      if (item.contains(field)) {
        TRY_ASSIGN(*dest, to_int64(item[field], field));
      }
    }
    out.push_back(std::move(kv));
  }
  return out;
}

Expected<TxnResult> decode_txn_response(const std::string& body) {
  json doc = parse_json(body);
  if (!doc.is_object()) {
    return Error(ErrorKind::kIo, "etcd answered a txn with something that is not JSON");
  }
  TxnResult out;
  TRY_ASSIGN(out.revision, header_revision(doc));
  if (doc.contains("succeeded")) {
    if (!doc["succeeded"].is_boolean()) {
      return Error(ErrorKind::kIo, "etcd answered a txn whose succeeded is not a boolean");
    }
    out.succeeded = doc["succeeded"].get<bool>();
  }
  return out;
}

}  // namespace rdmanet::ipam
