#include "cni/subcommand.h"

#include <gtest/gtest.h>

#include <sstream>

#include "base/build_info.h"

namespace rdmanet::cni {
namespace {

struct Outcome {
  std::optional<int> status;
  std::string out, err;
};

Outcome call(std::vector<std::string> argv, std::vector<std::string>* seen = nullptr) {
  const Subcommand table[] = {
      {"echo", "WORD...", "prints nothing, keeps its arguments",
       [seen](const std::vector<std::string>& args) {
         if (seen != nullptr) {
           *seen = args;
         }
         return 7;
       }},
  };
  std::vector<char*> raw;
  raw.reserve(argv.size());
  for (auto& a : argv) {
    raw.push_back(a.data());
  }
  std::ostringstream out, err;
  Outcome r;
  r.status = run_subcommand("prog", table, raw, out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

TEST(Subcommand, NoArgumentsIsTheCniProtocol) {
  Outcome r = call({"prog"});
  EXPECT_FALSE(r.status.has_value());
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "");
}

TEST(Subcommand, RunsTheNamedCommandWithTheRest) {
  std::vector<std::string> seen;
  Outcome r = call({"prog", "echo", "a", "b"}, &seen);
  EXPECT_EQ(r.status, 7);
  EXPECT_EQ(seen, (std::vector<std::string>{"a", "b"}));
}

TEST(Subcommand, VersionPrintsTheStampedVersion) {
  for (const char* v : {"version", "--version"}) {
    Outcome r = call({"prog", v});
    EXPECT_EQ(r.status, 0);
    EXPECT_EQ(r.out, "prog " + std::string(build_version()) + "\n");
  }
  EXPECT_FALSE(build_version().empty());
}

TEST(Subcommand, HelpListsEveryCommand) {
  Outcome r = call({"prog", "--help"});
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("prog echo WORD..."), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("prog version"), std::string::npos) << r.out;
}

TEST(Subcommand, AnUnknownCommandIsAUsageError) {
  Outcome r = call({"prog", "ecko"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("unknown subcommand \"ecko\""), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("prog echo WORD..."), std::string::npos) << r.err;
}

}  // namespace
}  // namespace rdmanet::cni
