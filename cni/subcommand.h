// A node binary's command line beside the CNI protocol (`rdmanet validate FILE...`,
// `rdmanet-ipam reconcile ...`), dispatched from one table as iproute2's tools do, so
// `--help` lists every subcommand and `version` is the same in both binaries.
#pragma once

#include <functional>
#include <iosfwd>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rdmanet::cni {

struct Subcommand {
  std::string_view name;
  std::string_view args;     // what follows the name: "FILE..."
  std::string_view summary;  // what it does, in a few words
  std::function<int(const std::vector<std::string>& args)> run;
};

// With no arguments the binary is a CNI plugin: returns nullopt, the caller runs the
// protocol (runtimes exec plugins without arguments). Otherwise runs the subcommand argv[1]
// names with the rest, or answers `version`/`--version` and `help`/`--help` itself, and
// returns the exit status; an unknown subcommand is a usage error (status 2).
std::optional<int> run_subcommand(std::string_view program, std::span<const Subcommand> table,
                                  std::span<char* const> argv, std::ostream& out,
                                  std::ostream& err);

}  // namespace rdmanet::cni
