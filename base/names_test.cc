#include "base/names.h"

#include <gtest/gtest.h>

namespace rdmanet {
namespace {

enum class Mode { kOne, kTwo, kThree };
constexpr Name<Mode> kModes[] = {{Mode::kOne, "one"}, {Mode::kTwo, "two"}, {Mode::kThree, "three"}};
constexpr Name<Mode> kOnlyOne[] = {{Mode::kOne, "one"}};

TEST(Names, MapBothWaysAndListTheChoices) {
  EXPECT_EQ(name_of(kModes, Mode::kTwo), "two");
  EXPECT_EQ(value_of(kModes, "three"), Mode::kThree);
  EXPECT_EQ(value_of(kModes, "four"), std::nullopt);
  EXPECT_EQ(value_of(kModes, "One"), std::nullopt) << "names are exact";
  EXPECT_EQ(name_of(kOnlyOne, Mode::kTwo), "?");
  EXPECT_EQ(names_of(kModes), "one, two or three");
  EXPECT_EQ(names_of(kOnlyOne), "one");
  static_assert(name_of(kModes, Mode::kOne) == "one");
}

}  // namespace
}  // namespace rdmanet
