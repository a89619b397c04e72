// CNI spec versions: parsing, comparison and the set rdmanet supports.
#pragma once

#include <array>
#include <compare>
#include <string>
#include <string_view>

#include "base/error.h"

namespace rdmanet::cni {

struct SpecVersion {
  int major = 0;
  int minor = 0;
  int patch = 0;

  // clang-tidy 14 takes the 0 the defaulted <=> compares with for a null pointer
  // (llvm-project#53961, fixed in clang-tidy 18).
  auto operator<=>(const SpecVersion&) const = default;  // NOLINT(modernize-use-nullptr)
  std::string str() const;
};

// Parses "MAJOR.MINOR.PATCH" (digits only). Errors name the text.
Expected<SpecVersion> parse_version(std::string_view text);

inline constexpr std::array<std::string_view, 5> kSupportedVersions = {"0.3.0", "0.3.1", "0.4.0",
                                                                       "1.0.0", "1.1.0"};
inline constexpr std::string_view kLatestVersion = "1.1.0";

bool is_supported(std::string_view version);

// The JSON answer to CNI_COMMAND=VERSION.
std::string version_info_json();

}  // namespace rdmanet::cni
