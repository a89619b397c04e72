// One name table per enum, as iproute2 keeps them: the value <-> text mapping of an enum
// is written once, and parsing, printing and the "use a, b or c" of error messages all
// come from it.
//
//   inline constexpr Name<Mode> kModeNames[] = {{Mode::kNetdev, "netdev"}, ...};
//   name_of(kModeNames, mode)          -> "netdev"
//   value_of(kModeNames, "macvlan")    -> Mode::kMacvlan (std::nullopt when unknown)
//   names_of(kModeNames)               -> "netdev or macvlan"
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace rdmanet {

template <class E>
struct Name {
  E value;
  std::string_view name;
};

template <class E, size_t N>
constexpr std::string_view name_of(const Name<E> (&table)[N], E value) {
  for (const auto& entry : table) {
    if (entry.value == value) {
      return entry.name;
    }
  }
  return "?";
}

template <class E, size_t N>
constexpr std::optional<E> value_of(const Name<E> (&table)[N], std::string_view name) {
  for (const auto& entry : table) {
    if (entry.name == name) {
      return entry.value;
    }
  }
  return std::nullopt;
}

// "a", "a or b", "a, b or c": for "use ..." in messages.
template <class E, size_t N>
std::string names_of(const Name<E> (&table)[N]) {
  std::string out;
  for (size_t i = 0; i < N; ++i) {
    if (i > 0) {
      out += i + 1 == N ? " or " : ", ";
    }
    out += table[i].name;
  }
  return out;
}

}  // namespace rdmanet
