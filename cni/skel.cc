#include "cni/skel.h"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <iostream>
#include <istream>
#include <nlohmann/json.hpp>
#include <ostream>

#include "cni/error_code.h"
#include "cni/log.h"
#include "cni/version.h"

namespace rdmanet::cni {

namespace {

// The one size limit of a network config, however it arrives.
Status check_config_size(size_t size) {
  if (size > kMaxStdin) {
    return Error(ErrorKind::kDecode,
                 "network config on stdin exceeds 4 MiB (" + std::to_string(kMaxStdin) + " bytes)");
  }
  return ok_status();
}

Expected<std::string> read_stdin(std::istream& in) {
  std::string text;
  char buf[65536];
  while (in) {
    in.read(buf, sizeof(buf));
    text.append(buf, static_cast<size_t>(in.gcount()));
    TRY(check_config_size(text.size()));
  }
  // std::cin reads through stdio (synced by default), whose read errors end the stream
  // like EOF does; only ferror tells them apart. A config cut short by a failed read is
  // an I/O error (5), not a config that is no JSON (6, which DEL takes as permanent).
  if (in.bad() || (&in == &std::cin && std::ferror(stdin) != 0)) {
    return Error(ErrorKind::kIo, "error reading the network config from stdin");
  }
  return text;
}

// The version rules of the spec: CHECK needs 0.4.0, STATUS and GC need 1.1.0.
Status check_command_version(Command command, const std::string& cni_version) {
  TRY_ASSIGN(SpecVersion version, parse_version(cni_version));
  auto require = [&](SpecVersion min, const char* min_text) -> Status {
    if (version < min) {
      return Error(ErrorKind::kIncompatibleVersion,
                   "config version " + cni_version + " does not allow " +
                       std::string(name_of(kCommandNames, command)) + " (needs " + min_text +
                       " or later)");
    }
    return ok_status();
  };
  switch (command) {
    case Command::kCheck:
      return require({0, 4, 0}, "0.4.0");
    case Command::kStatus:
    case Command::kGc:
      return require({1, 1, 0}, "1.1.0");
    default:
      return ok_status();
  }
}

Expected<std::string> dispatch(const Plugin& plugin, const Call& call) {
  auto run = [&](const std::function<Status(const Call&)>& handler) -> Expected<std::string> {
    if (handler) {
      TRY(handler(call));
    }
    return std::string();
  };
  switch (call.env.command) {
    case Command::kAdd: {
      TRY_ASSIGN(Result result, plugin.add(call));
      return encode_result_string(result, call.conf.cni_version);
    }
    case Command::kDel:
      return run(plugin.del);
    case Command::kCheck:
      return run(plugin.check);
    case Command::kStatus:
      return run(plugin.status);
    case Command::kGc:
      return run(plugin.gc);
    case Command::kVersion:
      return version_info_json();
  }
  return Error(ErrorKind::kInternal, "unhandled command");
}

// The call of an environment and a config, as the plugin's handlers get it.
Expected<Call> make_call(const Plugin& plugin, Environment env, std::string stdin_text) {
  Call call;
  call.env = std::move(env);
  call.stdin_text = std::move(stdin_text);
  TRY_ASSIGN(call.conf, parse_netconf(call.stdin_text));
  TRY(check_command_version(call.env.command, call.conf.cni_version));
  TRY_ASSIGN(call.args, parse_cni_args(call.env.args, plugin.known_args));
  return call;
}

Expected<std::string> handle(const Plugin& plugin, const Getenv& getenv, std::istream& in,
                             std::string* reply_version) {
  auto env = read_environment(getenv);
  if (!env) {
    // Read stdin anyway so the error can carry the config's version.
    if (auto text = read_stdin(in)) {
      *reply_version = peek_cni_version(*text);
    }
    return std::move(env).error();
  }
  if (env->command == Command::kVersion) {
    return version_info_json();
  }
  TRY_ASSIGN(std::string text, read_stdin(in));
  *reply_version = peek_cni_version(text);
  TRY_ASSIGN(Call call, make_call(plugin, std::move(*env), std::move(text)));

  std::string context =
      std::string(name_of(kCommandNames, call.env.command)) + " " + call.conf.name;
  if (!call.env.container_id.empty()) {
    context += " " + call.env.container_id.substr(0, 12) + "/" + call.env.ifname;
  }
  configure_logging(call.conf, context);
  auto reply = dispatch(plugin, call);
  if (!reply) {
    spdlog::error("{} (code {})", reply.error().msg(), error_code(reply.error()));
  } else {
    spdlog::debug("done");
  }
  return reply;
}

}  // namespace

Expected<std::string> run_in_process(const Plugin& plugin, const Getenv& getenv,
                                     const std::string& stdin_text) {
  try {
    TRY_ASSIGN(Environment env, read_environment(getenv));
    if (env.command == Command::kVersion) {
      return version_info_json();
    }
    TRY(check_config_size(stdin_text.size()));
    TRY_ASSIGN(Call call, make_call(plugin, std::move(env), stdin_text));
    TRY_ASSIGN(std::string reply, dispatch(plugin, call));
    return reply.empty() ? reply : reply + "\n";  // as plugin_main prints it
  } catch (const std::exception& e) {
    return Error(ErrorKind::kInternal, std::string("internal error: ") + e.what());
  }
}

std::string error_json(const Error& error, const std::string& cni_version) {
  nlohmann::json doc = {
      {"cniVersion", cni_version.empty() ? std::string(kLatestVersion) : cni_version},
      {"code", error_code(error)},
      {"msg", error.msg()},
  };
  if (!error.details().empty()) {
    doc["details"] = error.details();
  }
  // Messages may quote hostile input; replace invalid UTF-8 rather than throw.
  return doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

int plugin_main(const Plugin& plugin, const Getenv& getenv, std::istream& in, std::ostream& out) {
  init_logging(plugin.name);
  std::string reply_version;
  Expected<std::string> reply = Error(ErrorKind::kInternal, "not run");
  try {
    reply = handle(plugin, getenv, in, &reply_version);
  } catch (const std::exception& e) {
    reply = Error(ErrorKind::kInternal, std::string("internal error: ") + e.what());
  }
  if (!reply) {
    out << error_json(reply.error(), reply_version) << "\n";
    out.flush();
    return 1;
  }
  if (!reply->empty()) {
    out << *reply << "\n";
  }
  out.flush();
  return out.good() ? 0 : 1;
}

}  // namespace rdmanet::cni
