// Errors as plain values. Every layer returns an Error with a kind and a
// message that says what failed and where; the CNI error code is derived from
// the kind in exactly one place (cni/error_code.h). TRY and TRY_ASSIGN pass an
// error up to the caller.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace rdmanet {

// What went wrong, in domain terms. The comment gives the CNI code it becomes.
enum class ErrorKind {
  kIncompatibleVersion,  // 1
  kUnsupportedField,     // 2
  kUnknownContainer,     // 3
  kInvalidEnvironment,   // 4
  kIo,                   // 5
  kDecode,               // 6
  kInvalidConfig,        // 7
  kTryAgainLater,        // 11
  kNotAvailable,         // 50
  kLimitedConnectivity,  // 51
  kDeviceNotFound,       // 100
  kDeviceBusy,           // 101
  kKernel,               // 102: a kernel operation (netlink, sysfs) failed
  kDelegateFailed,       // 103: a delegated plugin failed, or answered something unusable,
                         // without a CNI error of its own
  kPluginNotFound,       // 103: a delegated plugin is not in CNI_PATH
  kAddressUnavailable,   // 104: pool exhausted or requested address taken
  kRdmaIsolation,        // 105: RDMA isolation requested but not possible
  kGidTimeout,           // 106: RoCE GID did not appear in time
  kPortNotActive,        // 108: the rail had no carrier or its RDMA port was not ACTIVE in time
  kState,                // 107: attachment state unreadable or inconsistent
  kInternal,             // 199: a bug in rdmanet
  kDelegateReported,     // the CNI error a delegated plugin reported: its code, passed on
};

class Error {
 public:
  Error(ErrorKind kind, std::string msg, std::string details = {})
      : kind_(kind), msg_(std::move(msg)), details_(std::move(details)) {}

  // An error a delegated plugin reported with its own CNI code.
  static Error delegated(int code, std::string msg, std::string details) {
    Error e(ErrorKind::kDelegateReported, std::move(msg), std::move(details));
    e.delegated_code_ = code;
    return e;
  }

  ErrorKind kind() const { return kind_; }
  const std::string& msg() const { return msg_; }
  const std::string& details() const { return details_; }
  int delegated_code() const { return delegated_code_; }
  // The errno behind a failed system call (sys_error), 0 otherwise.
  int sys_errno() const { return sys_errno_; }

  // Appends to the message, keeping kind and errno: "<msg> (<why>)".
  Error& append(const std::string& more) {
    msg_ += more;
    return *this;
  }

  // Prefixes the message with what the caller was doing: "ADD net1: <msg>".
  Error& context(const std::string& what) {
    msg_ = what + ": " + msg_;
    return *this;
  }

 private:
  ErrorKind kind_;
  std::string msg_;
  std::string details_;
  int delegated_code_ = 0;
  int sys_errno_ = 0;
  friend Error sys_error(const std::string& what, int err);
  friend Error io_error(const std::string& what, int err);
};

// Builds an error for a failed system call: "<what>: <strerror(err)>", with
// the kind chosen from errno (ENOENT/ENODEV -> device not found, EBUSY ->
// busy, otherwise kernel).
Error sys_error(const std::string& what, int err);
// The same for a file operation: always kIo (5), "<what>: <strerror(err)>".
Error io_error(const std::string& what, int err);

// Whether an error says nothing about what is there, only that the call could not look
// now (out of descriptors, memory or locks, an I/O error, a lock still held): the same call
// may work later. Callers that skip what they find odd never skip these.
bool is_transient(const Error& error);

// Either a value or an Error. Like std::expected (C++23), kept minimal.
template <class T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}      // NOLINT(google-explicit-constructor)
  Expected(Error error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & {
    assert(ok());
    return std::get<0>(v_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<0>(v_);
  }
  T&& value() && {
    assert(ok());
    return std::get<0>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const Error& error() const& {
    assert(!ok());
    return std::get<1>(v_);
  }
  Error&& error() && {
    assert(!ok());
    return std::get<1>(std::move(v_));
  }

  // The same result, its error (if any) prefixed with what the caller was doing.
  Expected with_context(const std::string& what) && {
    if (!ok()) {
      std::get<1>(v_).context(what);
    }
    return std::move(*this);
  }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Expected<void> {
 public:
  Expected() = default;
  Expected(Error error) : error_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return !error_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Error& error() const& {
    assert(!ok());
    return *error_;
  }
  Error&& error() && {
    assert(!ok());
    return std::move(*error_);
  }

  Expected with_context(const std::string& what) && {
    if (error_) {
      error_->context(what);
    }
    return std::move(*this);
  }

 private:
  std::optional<Error> error_;
};

using Status = Expected<void>;

inline Status ok_status() { return {}; }

// A value as error messages show it: in double quotes.
inline std::string in_quotes(std::string_view s) { return "\"" + std::string(s) + "\""; }

}  // namespace rdmanet

// TRY(expr): evaluates expr, a Status or an Expected<T>; when it holds an error,
// returns that error from the calling function (which returns a Status or any
// Expected<U>).
#define TRY(expr)                                    \
  do {                                               \
    auto rdmanet_try_result_ = (expr);               \
    if (!rdmanet_try_result_) {                      \
      return std::move(rdmanet_try_result_).error(); \
    }                                                \
  } while (false)

// TRY_ASSIGN(lhs, expr): evaluates expr, an Expected<T>; returns its error from
// the calling function, else moves its value into lhs, which may declare a
// variable: TRY_ASSIGN(auto link, find_link_by_name(rtnl, name)); It declares a temporary,
// so inside a switch its case needs braces.
#define TRY_ASSIGN(lhs, expr) \
  RDMANET_TRY_ASSIGN_(RDMANET_TRY_CONCAT_(rdmanet_try_, __LINE__), lhs, expr)

#define RDMANET_TRY_CONCAT_INNER_(a, b) a##b
#define RDMANET_TRY_CONCAT_(a, b) RDMANET_TRY_CONCAT_INNER_(a, b)
// NOLINTBEGIN(bugprone-macro-parentheses): lhs may be a declaration.
#define RDMANET_TRY_ASSIGN_(tmp, lhs, expr) \
  auto tmp = (expr);                        \
  if (!tmp) {                               \
    return std::move(tmp).error();          \
  }                                         \
  lhs = std::move(*tmp)
// NOLINTEND(bugprone-macro-parentheses)
