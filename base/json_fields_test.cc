#include "base/json_fields.h"

#include <gtest/gtest.h>

namespace rdmanet {
namespace {

using nlohmann::json;

enum class Color { kRed, kBlue };
constexpr Name<Color> kColorNames[] = {{Color::kRed, "red"}, {Color::kBlue, "blue"}};

TEST(Fields, ReadsEachTypeAndLeavesMissingAndNullFieldsAlone) {
  json doc = {{"s", "x"},        {"i", 7},          {"b", true},
              {"l", {"a", "b"}}, {"o", {{"k", 1}}}, {"n", nullptr}};
  Fields f(doc, "top", ErrorKind::kInvalidConfig);
  std::string s;
  int i = 0;
  bool b = false;
  std::vector<std::string> l;
  json o;
  std::string untouched = "kept";
  f.string("s", &s).integer("i", &i).boolean("b", &b).string_list("l", &l).object("o", &o);
  f.string("n", &untouched).string("missing", &untouched);
  ASSERT_TRUE(f.status()) << f.status().error().msg();
  EXPECT_EQ(s, "x");
  EXPECT_EQ(i, 7);
  EXPECT_TRUE(b);
  EXPECT_EQ(l, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(o["k"], 1);
  EXPECT_EQ(untouched, "kept");
  EXPECT_TRUE(f.has("s"));
  EXPECT_FALSE(f.has("n"));
}

TEST(Fields, KeepsTheFirstErrorAndReadsNothingAfterIt) {
  json doc = {{"a", 1}, {"b", "not a number"}, {"c", 3}};
  Fields f(doc, "ipam", ErrorKind::kInvalidConfig);
  int a = 0;
  int b = 0;
  int c = 0;
  std::string wrong;
  f.integer("a", &a).integer("b", &b).string("a", &wrong).integer("c", &c);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().error().msg(), "ipam.b must be an integer, got string");
  EXPECT_EQ(f.status().error().kind(), ErrorKind::kInvalidConfig);
  EXPECT_EQ(a, 1);
  EXPECT_EQ(c, 0) << "read after the first error";
}

TEST(Fields, RequiredStringsAndListsNameTheElement) {
  json doc = {{"l", {"a", 2}}};
  Fields f(doc, "");
  std::string name;
  f.required_string("name", &name);
  EXPECT_EQ(f.status().error().msg(), "name is missing");
  EXPECT_EQ(f.status().error().kind(), ErrorKind::kDecode);

  Fields g(doc, "x", ErrorKind::kState);
  std::vector<std::string> l;
  g.string_list("l", &l);
  EXPECT_EQ(g.status().error().msg(), "x.l[1] must be a string, got number");
  EXPECT_EQ(g.status().error().kind(), ErrorKind::kState);
}

TEST(Fields, IntegersInRangeIntoPlainAndOptionalTargets) {
  json doc = {{"vlan", 4095}, {"qos", 9}, {"big", 1ULL << 63}};
  Fields f(doc, "", ErrorKind::kInvalidConfig);
  uint32_t vlan = 0;
  std::optional<uint32_t> opt;
  f.integer_in("vlan", 0, 4095, &vlan).integer_in("vlan", 0, 4095, &opt);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(vlan, 4095U);
  EXPECT_EQ(opt, 4095U);
  std::optional<uint32_t> qos;
  f.integer_in("qos", 0, 7, &qos);
  EXPECT_EQ(f.status().error().msg(), "qos must be 0..7, got 9");
  EXPECT_FALSE(qos);

  Fields g(doc, "");
  long long big = 0;
  g.integer64("big", &big);
  EXPECT_EQ(g.status().error().msg(), "big is out of range");
}

TEST(Fields, NamesComeFromTheEnumsTable) {
  json doc = {{"good", "blue"}, {"bad", "green"}};
  Fields f(doc, "paint", ErrorKind::kInvalidConfig);
  Color color = Color::kRed;
  std::optional<Color> maybe;
  f.name("good", kColorNames, &color).name("good", kColorNames, &maybe);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(color, Color::kBlue);
  EXPECT_EQ(maybe, Color::kBlue);
  f.name("bad", kColorNames, &color, ErrorKind::kUnsupportedField);
  EXPECT_EQ(f.status().error().msg(), "paint.bad: unsupported value \"green\" (use red or blue)");
  EXPECT_EQ(f.status().error().kind(), ErrorKind::kUnsupportedField);
}

TEST(Fields, FailRecordsOnlyTheFirst) {
  json doc = json::object();
  Fields f(doc, "");
  f.fail("mtu", "is outside 68..65535").fail("mac", "is not unicast");
  EXPECT_EQ(f.status().error().msg(), "mtu is outside 68..65535");
}

TEST(Fields, ANonObjectHasNoFields) {
  json doc = json::array({1, 2});
  Fields f(doc, "");
  std::string s = "kept";
  f.string("0", &s);
  EXPECT_TRUE(f.ok());
  EXPECT_EQ(s, "kept");
}

// Deep nesting would exhaust the stack when a document is copied or destroyed (about 70,000
// levels crashed both binaries): refused before parsing, in linear time.
TEST(ParseJson, RefusesDocumentsNestedTooDeep) {
  auto nested = [](size_t depth, char open, char close) {
    return std::string(depth, open) + std::string(depth, close);
  };
  EXPECT_FALSE(parse_json(nested(kMaxJsonDepth, '[', ']')).is_discarded());
  EXPECT_TRUE(parse_json(nested(kMaxJsonDepth + 1, '[', ']')).is_discarded());
  std::string deep;
  for (int i = 0; i < 70000; ++i) {
    deep += "{\"a\":";
  }
  deep += "1" + std::string(70000, '}');
  EXPECT_TRUE(json_nested_deeper_than(deep));
  EXPECT_TRUE(parse_json(deep).is_discarded());
  // Brackets inside strings (and escaped quotes) are not nesting.
  EXPECT_FALSE(json_nested_deeper_than("{\"k\": \"" + std::string(1000, '[') + "\\\"\"}"));
  EXPECT_EQ(parse_json("{\"k\": \"[[[\"}")["k"], "[[[");
  EXPECT_TRUE(parse_json("{").is_discarded());
}

}  // namespace
}  // namespace rdmanet
