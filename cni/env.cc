#include "cni/env.h"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <vector>

#include "base/hex.h"

namespace rdmanet::cni {

namespace {

struct Variable {
  const char* name;
  std::string Environment::*field;
  // Commands that require the variable to be set and non-empty.
  std::vector<Command> required_for;
};

const std::vector<Variable>& variables() {
  static const std::vector<Variable> vars = {
      {"CNI_CONTAINERID",
       &Environment::container_id,
       {Command::kAdd, Command::kDel, Command::kCheck}},
      {"CNI_NETNS", &Environment::netns, {Command::kAdd, Command::kCheck}},
      {"CNI_IFNAME", &Environment::ifname, {Command::kAdd, Command::kDel, Command::kCheck}},
      {"CNI_ARGS", &Environment::args, {}},
      {"CNI_PATH",
       &Environment::path,
       {Command::kAdd, Command::kDel, Command::kCheck, Command::kGc}},
  };
  return vars;
}

bool parse_bool(const std::string& text, bool* out) {
  // The spellings Go's strconv.ParseBool accepts, which is what libcni uses.
  static const char* truths[] = {"1", "t", "T", "true", "TRUE", "True"};
  static const char* falsehoods[] = {"0", "f", "F", "false", "FALSE", "False"};
  for (const char* t : truths) {
    if (text == t) {
      *out = true;
      return true;
    }
  }
  for (const char* f : falsehoods) {
    if (text == f) {
      *out = false;
      return true;
    }
  }
  return false;
}

}  // namespace

Getenv process_getenv() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());  // NOLINT(concurrency-mt-unsafe)
    if (value == nullptr) {
      return std::nullopt;
    }
    return std::string(value);
  };
}

std::string CniArgs::get(const std::string& key) const {
  auto it = values.find(key);
  return it == values.end() ? std::string() : it->second;
}

Expected<CniArgs> parse_cni_args(const std::string& text, const std::vector<std::string>& known) {
  CniArgs args;
  std::vector<std::string> unknown;
  bool ignore_unknown = false;
  size_t pos = 0;
  while (pos <= text.size() && !text.empty()) {
    size_t end = text.find(';', pos);
    if (end == std::string::npos) {
      end = text.size();
    }
    std::string pair = text.substr(pos, end - pos);
    pos = end + 1;
    if (pair.empty()) {
      continue;  // tolerate "A=1;;B=2" and a trailing ';'
    }
    size_t eq = pair.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Error(ErrorKind::kInvalidEnvironment, "CNI_ARGS: invalid pair \"" + pair + "\"");
    }
    std::string key = pair.substr(0, eq);
    std::string value = pair.substr(eq + 1);
    if (key == "IgnoreUnknown") {
      if (!parse_bool(value, &ignore_unknown)) {
        return Error(ErrorKind::kInvalidEnvironment,
                     "CNI_ARGS: IgnoreUnknown must be a boolean, got \"" + value + "\"");
      }
    } else if (key == "K8S_POD_NAMESPACE") {
      args.k8s_pod_namespace = value;
    } else if (key == "K8S_POD_NAME") {
      args.k8s_pod_name = value;
    } else if (key == "K8S_POD_INFRA_CONTAINER_ID") {
      args.k8s_pod_infra_container_id = value;
    } else if (key == "K8S_POD_UID") {
      args.k8s_pod_uid = value;
    } else if (std::find(known.begin(), known.end(), key) == known.end()) {
      unknown.push_back(key);
    }
    args.values[key] = value;
    if (end == text.size()) {
      break;
    }
  }
  if (!unknown.empty() && !ignore_unknown) {
    return Error(ErrorKind::kInvalidEnvironment,
                 "CNI_ARGS: unknown key \"" + unknown.front() + "\" (set IgnoreUnknown=true)");
  }
  return args;
}

namespace {

// The code points of a UTF-8 string; std::nullopt when it is not well-formed UTF-8 (an
// overlong form, a surrogate, a truncated or stray continuation byte).
std::optional<std::vector<char32_t>> utf8_code_points(const std::string& text) {
  std::vector<char32_t> out;
  for (size_t i = 0; i < text.size();) {
    auto c = static_cast<unsigned char>(text[i]);
    size_t len = c < 0x80           ? 1
                 : (c >> 5) == 0x6  ? 2
                 : (c >> 4) == 0xE  ? 3
                 : (c >> 3) == 0x1E ? 4
                                    : 0;
    if (len == 0 || i + len > text.size()) {
      return std::nullopt;
    }
    char32_t cp = len == 1 ? c : c & (0x7F >> len);
    for (size_t k = 1; k < len; ++k) {
      auto cont = static_cast<unsigned char>(text[i + k]);
      if ((cont >> 6) != 0x2) {
        return std::nullopt;
      }
      cp = (cp << 6) | (cont & 0x3F);
    }
    static constexpr char32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return std::nullopt;
    }
    out.push_back(cp);
    i += len;
  }
  return out;
}

// Go's unicode.IsSpace beyond ASCII, which libcni applies to interface names.
bool is_unicode_space(char32_t cp) {
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

}  // namespace

Status validate_ifname(const std::string& name) {
  if (name.empty()) {
    return Error(ErrorKind::kInvalidEnvironment, "CNI_IFNAME is empty");
  }
  auto code_points = utf8_code_points(name);
  if (!code_points) {
    // Not echoed: the error reply is JSON, which carries UTF-8 only.
    return Error(ErrorKind::kInvalidEnvironment,
                 "CNI_IFNAME (hex " + hex(name.substr(0, 32)) + ") is not UTF-8");
  }
  auto invalid = [&](const std::string& why) {
    return Error(ErrorKind::kInvalidEnvironment, "CNI_IFNAME \"" + name + "\": " + why);
  };
  if (name.size() > 15) {
    return invalid("longer than 15 bytes");
  }
  if (name == "." || name == "..") {
    return invalid("is . or ..");
  }
  for (unsigned char c : name) {
    // libcni's rules, and the kernel's dev_valid_name: its isspace() also holds for the
    // byte 0xA0, which appears inside some UTF-8 sequences.
    if (c == '/' || c == ':' || c == ' ' || (c >= '\t' && c <= '\r') || c == 0xA0 || c == 0) {
      return invalid("contains '/', ':' or white space");
    }
    // The kernel expands a '%' (net%d becomes net0): the pod would get another name.
    if (c == '%') {
      return invalid("contains '%', which the kernel replaces with a number");
    }
  }
  if (std::any_of(code_points->begin(), code_points->end(), is_unicode_space)) {
    return invalid("contains white space");
  }
  return ok_status();
}

Status validate_container_id(const std::string& id) {
  if (id.empty()) {
    return Error(ErrorKind::kUnknownContainer, "CNI_CONTAINERID is missing");
  }
  auto alnum = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  };
  bool valid = alnum(id[0]) && std::all_of(id.begin() + 1, id.end(), [&](char c) {
                 return alnum(c) || c == '_' || c == '.' || c == '-';
               });
  if (!valid) {
    std::string shown = id.size() > 64 ? id.substr(0, 64) + "..." : id;
    std::replace(shown.begin(), shown.end(), '\0', '?');
    return Error(ErrorKind::kInvalidEnvironment,
                 "CNI_CONTAINERID \"" + shown + "\" has invalid characters");
  }
  return ok_status();
}

Expected<Environment> read_environment(const Getenv& getenv) {
  auto command_text = getenv("CNI_COMMAND");
  if (!command_text || command_text->empty()) {
    return Error(ErrorKind::kInvalidEnvironment, "required env variable CNI_COMMAND is missing");
  }
  auto command = value_of(kCommandNames, *command_text);
  if (!command) {
    return Error(ErrorKind::kInvalidEnvironment, "unknown CNI_COMMAND \"" + *command_text + "\"");
  }
  Environment env;
  env.command = *command;
  std::string missing;
  for (const auto& var : variables()) {
    auto value = getenv(var.name);
    env.*var.field = value.value_or("");
    bool required = std::find(var.required_for.begin(), var.required_for.end(), *command) !=
                    var.required_for.end();
    if (required && (env.*var.field).empty()) {
      missing += missing.empty() ? var.name : std::string(", ") + var.name;
    }
  }
  if (!missing.empty()) {
    ErrorKind kind = missing == "CNI_CONTAINERID" ? ErrorKind::kUnknownContainer
                                                  : ErrorKind::kInvalidEnvironment;
    return Error(kind, "required env variables missing for " +
                           std::string(name_of(kCommandNames, *command)) + ": " + missing);
  }
  bool per_container =
      *command == Command::kAdd || *command == Command::kDel || *command == Command::kCheck;
  if (per_container) {
    TRY(validate_container_id(env.container_id));
    TRY(validate_ifname(env.ifname));
  }
  return env;
}

}  // namespace rdmanet::cni
