#include "cni/json_fields.h"

#include <limits>

namespace rdmanet::cni {

using nlohmann::json;

const char* json_type_name(const json& value) {
  switch (value.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::object:
      return "object";
    case json::value_t::array:
      return "array";
    case json::value_t::string:
      return "string";
    case json::value_t::boolean:
      return "boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float:
      return "number";
    default:
      return "value";
  }
}

Fields::Fields(const json& obj, std::string where, ErrorKind kind)
    : obj_(obj), where_(std::move(where)), kind_(kind), is_object_(obj.is_object()) {}

const json* Fields::get(const std::string& key) const {
  if (!is_object_) {
    return nullptr;
  }
  auto it = obj_.find(key);
  if (it == obj_.end() || it->is_null()) {
    return nullptr;
  }
  return &*it;
}

bool Fields::has(const std::string& key) const { return get(key) != nullptr; }

std::string Fields::path(const std::string& key) const {
  return where_.empty() ? key : where_ + "." + key;
}

Error Fields::error(const std::string& key, const std::string& what) const {
  return {kind_, path(key) + " " + what};
}

Error Fields::type_error(const std::string& key, const char* wanted) const {
  return error(key, std::string("must be ") + wanted + ", got " + json_type_name(*get(key)));
}

Status Fields::string(const std::string& key, std::string* out) const {
  const json* v = get(key);
  if (v == nullptr) {
    return ok_status();
  }
  if (!v->is_string()) {
    return type_error(key, "a string");
  }
  *out = v->get<std::string>();
  return ok_status();
}

Status Fields::required_string(const std::string& key, std::string* out) const {
  if (!has(key)) {
    return error(key, "is missing");
  }
  return string(key, out);
}

Status Fields::integer64(const std::string& key, long long* out) const {
  const json* v = get(key);
  if (v == nullptr) {
    return ok_status();
  }
  if (v->is_number_integer()) {
    *out = v->get<long long>();
    return ok_status();
  }
  if (v->is_number_unsigned()) {
    auto u = v->get<unsigned long long>();
    if (u > static_cast<unsigned long long>(std::numeric_limits<long long>::max())) {
      return error(key, "is out of range");
    }
    *out = static_cast<long long>(u);
    return ok_status();
  }
  return type_error(key, "an integer");
}

Status Fields::integer(const std::string& key, int* out) const {
  long long value = *out;
  if (auto s = integer64(key, &value); !s) {
    return s;
  }
  if (value < std::numeric_limits<int>::min() || value > std::numeric_limits<int>::max()) {
    return error(key, "is out of range");
  }
  *out = static_cast<int>(value);
  return ok_status();
}

Status Fields::boolean(const std::string& key, bool* out) const {
  const json* v = get(key);
  if (v == nullptr) {
    return ok_status();
  }
  if (!v->is_boolean()) {
    return type_error(key, "a boolean");
  }
  *out = v->get<bool>();
  return ok_status();
}

Status Fields::string_list(const std::string& key, std::vector<std::string>* out) const {
  const json* v = get(key);
  if (v == nullptr) {
    return ok_status();
  }
  if (!v->is_array()) {
    return type_error(key, "an array of strings");
  }
  std::vector<std::string> items;
  for (size_t n = 0; n < v->size(); ++n) {
    if (!(*v)[n].is_string()) {
      return Error(kind_, path(key) + "[" + std::to_string(n) + "] must be a string, got " +
                              json_type_name((*v)[n]));
    }
    items.push_back((*v)[n].get<std::string>());
  }
  *out = std::move(items);
  return ok_status();
}

Status Fields::object_list(const std::string& key, std::vector<json>* out) const {
  out->clear();
  const json* v = get(key);
  if (v == nullptr) {
    return ok_status();
  }
  if (!v->is_array()) {
    return type_error(key, "an array of objects");
  }
  for (size_t n = 0; n < v->size(); ++n) {
    if (!(*v)[n].is_object()) {
      return Error(kind_, path(key) + "[" + std::to_string(n) + "] must be an object, got " +
                              json_type_name((*v)[n]));
    }
    out->push_back((*v)[n]);
  }
  return ok_status();
}

Status Fields::object(const std::string& key, json* out) const {
  const json* v = get(key);
  if (v == nullptr) {
    return ok_status();
  }
  if (!v->is_object()) {
    return type_error(key, "an object");
  }
  *out = *v;
  return ok_status();
}

}  // namespace rdmanet::cni
