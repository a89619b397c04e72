#include "cni/version.h"

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>

namespace rdmanet::cni {

std::string SpecVersion::str() const {
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

Expected<SpecVersion> parse_version(std::string_view text) {
  SpecVersion v;
  int* parts[] = {&v.major, &v.minor, &v.patch};
  std::string_view rest = text;
  for (size_t i = 0; i < 3; ++i) {
    const char* begin = rest.data();
    const char* end = rest.data() + rest.size();
    auto [ptr, ec] = std::from_chars(begin, end, *parts[i]);
    bool want_dot = i < 2;
    if (ec != std::errc() || ptr == begin || *parts[i] < 0 ||
        (want_dot ? (ptr == end || *ptr != '.') : ptr != end)) {
      return Error(ErrorKind::kDecode, "invalid CNI version \"" + std::string(text) + "\"");
    }
    rest = std::string_view(ptr + (want_dot ? 1 : 0), end);
  }
  return v;
}

bool is_supported(std::string_view version) {
  return std::find(kSupportedVersions.begin(), kSupportedVersions.end(), version) !=
         kSupportedVersions.end();
}

std::string version_info_json() {
  nlohmann::json info = {{"cniVersion", kLatestVersion}, {"supportedVersions", kSupportedVersions}};
  return info.dump();
}

}  // namespace rdmanet::cni
