// Typed access to the fields of a JSON object with errors that name the
// field: `ipam.ranges[0][1].subnet must be a string, got number`. Missing
// optional fields leave the output untouched; null counts as missing.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cni/error.h"

namespace rdmanet::cni {

class Fields {
 public:
  // `where` is the path of `obj` in the document ("" for the top level);
  // type errors get `kind` (kInvalidConfig for configs, kDecode for results).
  Fields(const nlohmann::json& obj, std::string where, ErrorKind kind = ErrorKind::kDecode);

  bool has(const std::string& key) const;
  // The path of a field, for messages: "ipam.subnet".
  std::string path(const std::string& key) const;
  Error error(const std::string& key, const std::string& what) const;

  Status string(const std::string& key, std::string* out) const;
  Status required_string(const std::string& key, std::string* out) const;
  Status integer(const std::string& key, int* out) const;
  Status integer64(const std::string& key, long long* out) const;
  Status boolean(const std::string& key, bool* out) const;
  Status string_list(const std::string& key, std::vector<std::string>* out) const;
  Status object_list(const std::string& key, std::vector<nlohmann::json>* out) const;
  // Copies an object-valued field (must be an object when present).
  Status object(const std::string& key, nlohmann::json* out) const;

 private:
  const nlohmann::json* get(const std::string& key) const;
  Error type_error(const std::string& key, const char* wanted) const;

  const nlohmann::json& obj_;
  std::string where_;
  ErrorKind kind_;
  bool is_object_;
};

// "string", "number", ... for messages.
const char* json_type_name(const nlohmann::json& value);

}  // namespace rdmanet::cni
