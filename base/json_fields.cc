#include "base/json_fields.h"

namespace rdmanet {

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

bool json_nested_deeper_than(std::string_view text, size_t max_depth) {
  size_t depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > max_depth) {
        return true;
      }
    } else if ((c == '}' || c == ']') && depth > 0) {
      --depth;
    }
  }
  return false;
}

json parse_json(std::string_view text) {
  if (json_nested_deeper_than(text)) {
    return json(json::value_t::discarded);
  }
  return json::parse(text, nullptr, /*allow_exceptions=*/false);
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

const json* Fields::next(const std::string& key) const { return ok() ? get(key) : nullptr; }

bool Fields::has(const std::string& key) const { return get(key) != nullptr; }

std::string Fields::path(const std::string& key) const {
  return where_.empty() ? key : where_ + "." + key;
}

Error Fields::error(const std::string& key, const std::string& what) const {
  return {kind_, path(key) + " " + what};
}

Fields& Fields::fail(const std::string& key, const std::string& what) {
  return fail(error(key, what));
}

Fields& Fields::fail(Error error) {
  if (!first_error_) {
    first_error_ = std::move(error);
  }
  return *this;
}

Status Fields::status() const {
  if (first_error_) {
    return *first_error_;
  }
  return ok_status();
}

Fields& Fields::type_error(const std::string& key, const char* wanted) {
  return fail(key, std::string("must be ") + wanted + ", got " + json_type_name(*get(key)));
}

Fields& Fields::string(const std::string& key, std::string* out) {
  const json* v = next(key);
  if (v == nullptr) {
    return *this;
  }
  if (!v->is_string()) {
    return type_error(key, "a string");
  }
  *out = v->get<std::string>();
  return *this;
}

Fields& Fields::required_string(const std::string& key, std::string* out) {
  if (ok() && !has(key)) {
    return fail(key, "is missing");
  }
  return string(key, out);
}

std::optional<long long> Fields::read_integer(const std::string& key) {
  const json* v = next(key);
  if (v == nullptr) {
    return std::nullopt;
  }
  // nlohmann's is_number_integer() holds for unsigned numbers too: test those first.
  if (v->is_number_unsigned()) {
    auto u = v->get<unsigned long long>();
    if (u > static_cast<unsigned long long>(std::numeric_limits<long long>::max())) {
      fail(key, "is out of range");
      return std::nullopt;
    }
    return static_cast<long long>(u);
  }
  if (v->is_number_integer()) {
    return v->get<long long>();
  }
  type_error(key, "an integer");
  return std::nullopt;
}

Fields& Fields::integer64(const std::string& key, long long* out) {
  if (auto value = read_integer(key)) {
    *out = *value;
  }
  return *this;
}

Fields& Fields::integer(const std::string& key, int* out) {
  auto value = read_integer(key);
  if (!value) {
    return *this;
  }
  if (*value < std::numeric_limits<int>::min() || *value > std::numeric_limits<int>::max()) {
    return fail(key, "is out of range");
  }
  *out = static_cast<int>(*value);
  return *this;
}

Fields& Fields::integer(const std::string& key, std::optional<int>* out) {
  if (!ok() || !has(key)) {
    return *this;
  }
  int value = 0;
  if (integer(key, &value).ok()) {
    *out = value;
  }
  return *this;
}

Fields& Fields::boolean(const std::string& key, bool* out) {
  const json* v = next(key);
  if (v == nullptr) {
    return *this;
  }
  if (!v->is_boolean()) {
    return type_error(key, "a boolean");
  }
  *out = v->get<bool>();
  return *this;
}

Fields& Fields::boolean(const std::string& key, std::optional<bool>* out) {
  bool value = false;
  if (ok() && has(key) && boolean(key, &value).ok()) {
    *out = value;
  }
  return *this;
}

Fields& Fields::string_list(const std::string& key, std::vector<std::string>* out) {
  const json* v = next(key);
  if (v == nullptr) {
    return *this;
  }
  if (!v->is_array()) {
    return type_error(key, "an array of strings");
  }
  std::vector<std::string> items;
  for (size_t n = 0; n < v->size(); ++n) {
    if (!(*v)[n].is_string()) {
      return fail(Error(kind_, path(key) + "[" + std::to_string(n) + "] must be a string, got " +
                                   json_type_name((*v)[n])));
    }
    items.push_back((*v)[n].get<std::string>());
  }
  *out = std::move(items);
  return *this;
}

Fields& Fields::object_list(const std::string& key, std::vector<json>* out) {
  const json* v = next(key);
  if (v == nullptr) {
    if (ok()) {
      out->clear();
    }
    return *this;
  }
  if (!v->is_array()) {
    return type_error(key, "an array of objects");
  }
  std::vector<json> items;
  for (size_t n = 0; n < v->size(); ++n) {
    if (!(*v)[n].is_object()) {
      return fail(Error(kind_, path(key) + "[" + std::to_string(n) + "] must be an object, got " +
                                   json_type_name((*v)[n])));
    }
    items.push_back((*v)[n]);
  }
  *out = std::move(items);
  return *this;
}

Fields& Fields::object(const std::string& key, json* out) {
  const json* v = next(key);
  if (v == nullptr) {
    return *this;
  }
  if (!v->is_object()) {
    return type_error(key, "an object");
  }
  *out = *v;
  return *this;
}

}  // namespace rdmanet
