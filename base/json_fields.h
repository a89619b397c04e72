// Typed access to the fields of a JSON object, with errors that name the field:
// `ipam.ranges[0][1].subnet must be a string, got number`. A reader keeps the first error
// it meets and then reads nothing more, so parsing code is a flat list of reads followed by
// one TRY(fields.status()):
//
//   Fields f(doc, "roce", ErrorKind::kInvalidConfig);
//   f.integer_in("tos", 0, 255, &conf.tos);
//   f.name("mode", kRoceModeNames, &conf.mode);
//   TRY(f.status());
//
// A missing field leaves its output as it was (null counts as missing); so does a field
// read after an error.
#pragma once

#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "base/error.h"
#include "base/names.h"

namespace rdmanet {

class Fields {
 public:
  // `where` is the path of `obj` in the document ("" for the top level); errors get
  // `kind` (kInvalidConfig for configs, kDecode for results, kState for state files).
  // `obj` must outlive the reader. Not an object: every field reads as missing.
  Fields(const nlohmann::json& obj, std::string where, ErrorKind kind = ErrorKind::kDecode);

  bool has(const std::string& key) const;
  // The path of a field, for messages: "ipam.subnet".
  std::string path(const std::string& key) const;
  // An error about a field: "<path> <what>", with the reader's kind (not recorded).
  Error error(const std::string& key, const std::string& what) const;

  Fields& string(const std::string& key, std::string* out);
  Fields& required_string(const std::string& key, std::string* out);
  Fields& integer(const std::string& key, int* out);
  Fields& integer(const std::string& key, std::optional<int>* out);
  Fields& integer64(const std::string& key, long long* out);
  // An integer within [min, max], into any integer type or std::optional of one.
  template <class T>
  Fields& integer_in(const std::string& key, long long min, long long max, T* out);
  Fields& boolean(const std::string& key, bool* out);
  Fields& boolean(const std::string& key, std::optional<bool>* out);
  Fields& string_list(const std::string& key, std::vector<std::string>* out);
  Fields& object_list(const std::string& key, std::vector<nlohmann::json>* out);
  // Copies an object-valued field (must be an object when present).
  Fields& object(const std::string& key, nlohmann::json* out);
  // A string that must be one of an enum's names (base/names.h), into E or
  // std::optional<E>: `mode: unsupported value "x" (use netdev or macvlan)`, with
  // `unknown` as the kind of that error (the reader's kind by default).
  template <class E, size_t N, class Out>
  Fields& name(const std::string& key, const Name<E> (&table)[N], Out* out,
               std::optional<ErrorKind> unknown = std::nullopt);

  // Records an error (unless one is recorded already): for checks beyond the type.
  Fields& fail(const std::string& key, const std::string& what);
  Fields& fail(Error error);

  bool ok() const { return !first_error_.has_value(); }
  // The first error met, or ok.
  Status status() const;

 private:
  const nlohmann::json* get(const std::string& key) const;
  // The field to read: nullptr when missing, or when an error is recorded already.
  const nlohmann::json* next(const std::string& key) const;
  Fields& type_error(const std::string& key, const char* wanted);
  std::optional<long long> read_integer(const std::string& key);

  const nlohmann::json& obj_;
  std::string where_;
  ErrorKind kind_;
  bool is_object_;
  std::optional<Error> first_error_;
};

// "string", "number", ... for messages.
const char* json_type_name(const nlohmann::json& value);

// How deep a document rdmanet reads may nest. CNI configs, results and rdmanet's own files
// are a few levels deep; the limit is far below where copying or destroying a document
// would exhaust the stack (about 70,000 levels of objects, inside the 4 MiB stdin limit).
inline constexpr size_t kMaxJsonDepth = 64;

// Whether `text` opens more than `max_depth` objects or arrays inside each other. Linear,
// without recursion; strings (and escapes in them) are skipped.
bool json_nested_deeper_than(std::string_view text, size_t max_depth = kMaxJsonDepth);

// json::parse without exceptions: a discarded value when `text` is not JSON or nests
// deeper than kMaxJsonDepth. Every document rdmanet reads goes through here.
nlohmann::json parse_json(std::string_view text);

template <class T>
Fields& Fields::integer_in(const std::string& key, long long min, long long max, T* out) {
  std::optional<long long> value = read_integer(key);
  if (!value) {
    return *this;
  }
  if (*value < min || *value > max) {
    return fail(key, "must be " + std::to_string(min) + ".." + std::to_string(max) + ", got " +
                         std::to_string(*value));
  }
  if constexpr (std::is_integral_v<T>) {
    *out = static_cast<T>(*value);
  } else {
    *out = static_cast<typename T::value_type>(*value);
  }
  return *this;
}

template <class E, size_t N, class Out>
Fields& Fields::name(const std::string& key, const Name<E> (&table)[N], Out* out,
                     std::optional<ErrorKind> unknown) {
  const nlohmann::json* v = next(key);
  if (v == nullptr) {
    return *this;
  }
  if (!v->is_string()) {
    return type_error(key, "a string");
  }
  auto text = v->get<std::string>();
  auto value = value_of(table, text);
  if (!value) {
    return fail(Error(unknown.value_or(kind_), path(key) + ": unsupported value \"" + text +
                                                   "\" (use " + names_of(table) + ")"));
  }
  *out = *value;
  return *this;
}

}  // namespace rdmanet
