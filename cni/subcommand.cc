#include "cni/subcommand.h"

#include <algorithm>
#include <ostream>
#include <utility>

#include "base/build_info.h"

namespace rdmanet::cni {
namespace {

void print_usage(std::string_view program, std::span<const Subcommand> table, std::ostream& os) {
  std::vector<std::pair<std::string, std::string_view>> lines;
  lines.emplace_back("", "the CNI plugin: CNI_* variables in the environment, the config on stdin");
  for (const auto& c : table) {
    lines.emplace_back(std::string(c.name) + " " + std::string(c.args), c.summary);
  }
  lines.emplace_back("version", "this build's version");
  size_t width = 0;
  for (const auto& [call, summary] : lines) {
    width = std::max(width, call.size());
  }
  std::string_view lead = "usage: ";
  for (const auto& [call, summary] : lines) {
    os << lead << program << " " << call << std::string(width - call.size() + 2, ' ') << summary
       << "\n";
    lead = "       ";
  }
}

}  // namespace

std::optional<int> run_subcommand(std::string_view program, std::span<const Subcommand> table,
                                  std::span<char* const> argv, std::ostream& out,
                                  std::ostream& err) {
  if (argv.size() < 2) {
    return std::nullopt;
  }
  std::string_view name = argv[1];
  if (name == "version" || name == "--version") {
    out << program << " " << build_version() << "\n";
    return 0;
  }
  if (name == "help" || name == "--help" || name == "-h") {
    print_usage(program, table, out);
    return 0;
  }
  for (const auto& c : table) {
    if (c.name == name) {
      return c.run({argv.begin() + 2, argv.end()});
    }
  }
  err << program << ": unknown subcommand \"" << name << "\"\n";
  print_usage(program, table, err);
  return 2;
}

}  // namespace rdmanet::cni
