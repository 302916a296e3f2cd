// SearchSpace: Keras Tuner's parameter types and their documented examples, sampling
// distributions, conditional parameters, grids, the unit cube and input errors.
#include <algorithm>
#include <cmath>
#include <set>

#include "tensorhub/tune/search_space.h"
#include "test_util.h"

namespace tensorhub {
namespace {

std::vector<Json> grid_of(const SearchSpace& s, const std::string& name) {
  std::vector<Json> out;
  const auto grid = s.grid();  // kept alive: ranging over *s.grid() would dangle
  for (const auto& point : *grid) out.push_back(point.at(name));
  return out;
}

TEST(SearchSpace, IntWithStepYieldsOnlyMultiplesAndReachesBothEnds) {
  SearchSpace s;
  s.Int("units", 32, 512, 32);
  std::mt19937_64 rng(7);
  std::set<std::int64_t> seen;
  for (int i = 0; i < 2000; ++i) {
    const Json v = s.sample(rng).at("units");
    ASSERT_TRUE(v.is_number_integer()) << v;
    const auto u = v.get<std::int64_t>();
    EXPECT_EQ(u % 32, 0) << u;
    EXPECT_GE(u, 32);
    EXPECT_LE(u, 512);
    seen.insert(u);
  }
  EXPECT_TRUE(seen.count(32));
  EXPECT_TRUE(seen.count(512));
  EXPECT_EQ(seen.size(), 16u);  // (512 - 32) / 32 + 1 values, all drawn in 2000 tries
  EXPECT_EQ(*s.size(), 16u);
}

TEST(SearchSpace, KerasTunerDocumentedIntExamples) {
  // keras_tuner Int docstring: Int(6, 13, step=3) -> [6, 9, 12]; Int(2, 32, step=2, log) ->
  // [2, 4, 8, 16, 32]; Int(6, 12) -> [6 .. 12].
  SearchSpace a;
  a.Int("n", 6, 13, 3);
  EXPECT_EQ(grid_of(a, "n"), (std::vector<Json>{6, 9, 12}));
  SearchSpace b;
  b.Int("batch", 2, 32, 2, Sampling::kLog);
  EXPECT_EQ(grid_of(b, "batch"), (std::vector<Json>{2, 4, 8, 16, 32}));
  SearchSpace c;
  c.Int("layers", 6, 12);
  EXPECT_EQ(grid_of(c, "layers"), (std::vector<Json>{6, 7, 8, 9, 10, 11, 12}));
}

TEST(SearchSpace, FloatStepGridEndsExactlyAtMax) {
  SearchSpace s;
  s.Float("dropout", 0.0, 1.0, 0.1);
  const auto g = grid_of(s, "dropout");
  ASSERT_EQ(g.size(), 11u);  // 1 / 0.1 is 9.999... in binary: the tolerance keeps 11 points
  EXPECT_EQ(g.front().get<double>(), 0.0);
  EXPECT_EQ(g.back().get<double>(), 1.0);
  EXPECT_NEAR(g[3].get<double>(), 0.3, 1e-15);
}

TEST(SearchSpace, LogSamplingMedianIsTheGeometricMidpoint) {
  SearchSpace s;
  s.Float("lr", 1e-4, 1e-1, std::nullopt, Sampling::kLog);
  std::mt19937_64 rng(42);
  std::vector<double> logs;
  for (int i = 0; i < 20001; ++i) {
    const double v = s.sample(rng).at("lr").get<double>();
    ASSERT_GE(v, 1e-4);
    ASSERT_LE(v, 1e-1);
    logs.push_back(std::log10(v));
  }
  std::nth_element(logs.begin(), logs.begin() + 10000, logs.end());
  // log10 is uniform on [-4, -1]: median -2.5, standard error ~0.011 for 20001 draws; a linear
  // draw would give a median near log10(0.05) = -1.3.
  EXPECT_NEAR(logs[10000], -2.5, 0.1);
}

TEST(SearchSpace, ReverseLogAndLogIntEveryIntegerReachEnds) {
  SearchSpace s;
  s.Int("n", 1, 10, 1, Sampling::kLog);
  s.Float("beta", 0.9, 0.999, std::nullopt, Sampling::kReverseLog);
  std::mt19937_64 rng(3);
  std::set<std::int64_t> seen;
  for (int i = 0; i < 3000; ++i) {
    const Json p = s.sample(rng);
    seen.insert(p.at("n").get<std::int64_t>());
    EXPECT_GE(p.at("beta").get<double>(), 0.9);
    EXPECT_LE(p.at("beta").get<double>(), 0.999);
  }
  EXPECT_EQ(seen.size(), 10u);
  // The ends of the unit interval map to min_value and max_value exactly.
  EXPECT_EQ(s.from_unit({0.0, 0.0}), (Json{{"n", 1}, {"beta", 0.9}}));
  EXPECT_EQ(s.from_unit({1.0, 1.0}), (Json{{"n", 10}, {"beta", 0.999}}));
}

TEST(SearchSpace, DefaultsFollowKerasTuner) {
  SearchSpace s;
  s.Int("units", 32, 512, 32).Float("lr", 1e-4, 1e-2, std::nullopt, Sampling::kLog).Choice("act", {"relu", "tanh"});
  s.Boolean("bn").Fixed("opt", "Adam");
  EXPECT_EQ(s.default_values(), (Json{{"units", 32}, {"lr", 1e-4}, {"act", "relu"}, {"bn", false}, {"opt", "Adam"}}));
  EXPECT_TRUE(SearchSpace().Choice("c", {1, 2}).parameter("c").ordered);
  EXPECT_FALSE(SearchSpace().Choice("c", {"a", "b"}).parameter("c").ordered);
}

SearchSpace conditional_space() {
  return SearchSpace::from_json(Json::parse(R"([
    {"name": "optimizer", "type": "Choice", "values": ["adam", "sgd"]},
    {"name": "momentum", "type": "Choice", "values": [0.0, 0.9], "parent_name": "optimizer", "parent_values": ["sgd"]},
    {"name": "lr", "type": "Choice", "values": [0.1, 0.01]}])"));
}

TEST(SearchSpace, ConditionalParametersAbsentWhenInactive) {
  const SearchSpace s = conditional_space();
  std::mt19937_64 rng(1);
  int sgd = 0;
  for (int i = 0; i < 200; ++i) {
    const Json p = s.sample(rng);
    const bool is_sgd = p.at("optimizer") == "sgd";
    sgd += is_sgd;
    EXPECT_EQ(p.contains("momentum"), is_sgd) << p;
    EXPECT_TRUE(p.contains("lr"));
  }
  EXPECT_GT(sgd, 0);
  EXPECT_LT(sgd, 200);
  EXPECT_EQ(s.default_values(), (Json{{"optimizer", "adam"}, {"lr", 0.1}}));
  // Grid by hand: adam x 2 learning rates + sgd x 2 momenta x 2 learning rates = 6 points.
  EXPECT_EQ(*s.size(), 6u);
  const std::vector<Json> expected{
      {{"optimizer", "adam"}, {"lr", 0.1}},
      {{"optimizer", "adam"}, {"lr", 0.01}},
      {{"optimizer", "sgd"}, {"momentum", 0.0}, {"lr", 0.1}},
      {{"optimizer", "sgd"}, {"momentum", 0.0}, {"lr", 0.01}},
      {{"optimizer", "sgd"}, {"momentum", 0.9}, {"lr", 0.1}},
      {{"optimizer", "sgd"}, {"momentum", 0.9}, {"lr", 0.01}}};
  EXPECT_EQ(*s.grid(), expected);
  testing::expect_error([&] { s.validate({{"optimizer", "adam"}, {"momentum", 0.9}, {"lr", 0.1}}); },
                        ErrorKind::kInvalidArgument, {"momentum", "inactive"});
  testing::expect_error([&] { s.validate({{"optimizer", "sgd"}, {"lr", 0.1}}); }, ErrorKind::kInvalidArgument,
                        {"momentum", "missing"});
}

TEST(SearchSpace, SizeOfLargeConditionalSpaceWithoutEnumeration) {
  // A parent with 10^6 values of which one enables a child of 10 values: 999,999 + 10 points.
  SearchSpace s;
  s.Int("width", 1, 1'000'000).Choice("extra", {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}).conditional_on("width", {7});
  EXPECT_EQ(*s.size(), 1'000'009u);
  SearchSpace continuous;
  continuous.Float("x", 0, 1);
  EXPECT_FALSE(continuous.size().has_value());
  EXPECT_FALSE(continuous.grid().has_value());
}

TEST(SearchSpace, UnitCubeRoundTripAndKerasCentres) {
  const SearchSpace s = SearchSpace::from_json(Json::parse(R"([
    {"name": "units", "type": "Int", "min_value": 32, "max_value": 512, "step": 32},
    {"name": "n", "type": "Int", "min_value": 1, "max_value": 1000, "sampling": "log"},
    {"name": "batch", "type": "Int", "min_value": 2, "max_value": 64, "step": 2, "sampling": "log"},
    {"name": "lr", "type": "Float", "min_value": 1e-4, "max_value": 1e-1, "sampling": "log"},
    {"name": "beta", "type": "Float", "min_value": 0.9, "max_value": 0.999, "sampling": "reverse_log"},
    {"name": "drop", "type": "Float", "min_value": 0, "max_value": 0.5, "step": 0.1},
    {"name": "act", "type": "Choice", "values": ["relu", "tanh", "gelu", "elu"]},
    {"name": "bn", "type": "Boolean"},
    {"name": "opt", "type": "Fixed", "value": "Adam"},
    {"name": "momentum", "type": "Float", "min_value": 0, "max_value": 0.99, "parent_name": "act", "parent_values": ["tanh"]}])"));
  std::mt19937_64 rng(11);
  for (int i = 0; i < 500; ++i) {
    const Json v = s.sample(rng);
    const auto u = s.to_unit(v);
    ASSERT_EQ(u.size(), 10u);
    for (double x : u) ASSERT_TRUE(x >= 0 && x <= 1) << v;
    const Json back = s.from_unit(u);
    for (const auto& [key, value] : v.items()) {
      if (value.is_number_float() && (key == "lr" || key == "beta" || key == "momentum")) {
        EXPECT_NEAR(back.at(key).get<double>(), value.get<double>(), 1e-12 * std::abs(value.get<double>()) + 1e-15) << key;
      } else {
        EXPECT_EQ(back.at(key), value) << key << " in " << v;
      }
    }
    EXPECT_EQ(back.size(), v.size()) << v;
  }
  // Keras Tuner's index_to_prob centres: units 64 is index 1 of 16 -> 1.5 / 16; act "tanh" is
  // index 1 of 4 -> 0.375; lr 10^-2.5 is halfway in log scale; an inactive momentum is 0.5.
  const Json point{{"units", 64}, {"n", 1}, {"batch", 2}, {"lr", std::pow(10.0, -2.5)}, {"beta", 0.9},
                   {"drop", 0.0}, {"act", "relu"}, {"bn", true}, {"opt", "Adam"}};
  const auto u = s.to_unit(point);
  EXPECT_DOUBLE_EQ(u[0], 1.5 / 16);
  EXPECT_NEAR(u[3], 0.5, 1e-12);
  EXPECT_DOUBLE_EQ(u[6], 0.5 / 4);
  EXPECT_DOUBLE_EQ(u[7], 0.75);
  EXPECT_DOUBLE_EQ(u[8], 0.5);
  EXPECT_DOUBLE_EQ(u[9], 0.5);
}

TEST(SearchSpace, JsonRoundTrip) {
  const SearchSpace s = conditional_space();
  const SearchSpace t = SearchSpace::from_json(s.to_json());
  EXPECT_EQ(t.to_json(), s.to_json());
  EXPECT_EQ(t.parameter("momentum").parent_name, "optimizer");
}

void expect_bad(const char* json, const std::vector<std::string>& parts) {
  SCOPED_TRACE(json);
  testing::expect_error([&] { SearchSpace::from_json(Json::parse(json)); }, ErrorKind::kInvalidArgument, parts);
}

TEST(SearchSpace, BadJsonNamesParameterAndField) {
  expect_bad(R"([{"name": "u", "type": "Int", "min_value": 10, "max_value": 1}])", {"'u'", "min_value", "<= max_value"});
  expect_bad(R"([{"name": "lr", "type": "Float", "min_value": 0, "max_value": 1, "sampling": "log"}])",
             {"'lr'", "sampling", "min_value > 0"});
  expect_bad(R"([{"name": "u", "type": "Int", "min_value": 1, "max_value": 9, "stepp": 2}])", {"'u'", "stepp", "allowed"});
  expect_bad(R"([{"name": "u", "type": "Integer", "min_value": 1, "max_value": 9}])", {"'u'", "type", "Choice, Int, Float"});
  expect_bad(R"([{"name": "u", "type": "Int", "max_value": 9}])", {"'u'", "min_value", "missing"});
  expect_bad(R"([{"name": "u", "type": "Int", "min_value": 1.5, "max_value": 9}])", {"'u'", "min_value", "integer"});
  expect_bad(R"([{"name": "c", "type": "Choice", "values": []}])", {"'c'", "values", "empty"});
  expect_bad(R"([{"name": "c", "type": "Choice", "values": [1, "a"]}])", {"'c'", "values", "one type"});
  expect_bad(R"([{"name": "c", "type": "Boolean"}, {"name": "c", "type": "Boolean"}])", {"'c'", "duplicate"});
  expect_bad(R"([{"name": "m", "type": "Boolean", "parent_name": "opt", "parent_values": ["sgd"]}])",
             {"'m'", "parent_name", "not defined before"});
  expect_bad(R"([{"name": "opt", "type": "Choice", "values": ["adam"]},
                 {"name": "m", "type": "Boolean", "parent_name": "opt", "parent_values": ["sgd"]}])",
             {"'m'", "parent_values", "\"sgd\""});
  expect_bad(R"([{"name": "u", "type": "Float", "min_value": 1, "max_value": 9, "sampling": "exp"}])",
             {"'u'", "sampling", "linear, log, reverse_log"});
  expect_bad(R"([{"name": "u", "type": "Int", "min_value": 1, "max_value": 9, "step": 0}])", {"'u'", "step", "> 0"});
  expect_bad(R"([{"name": "u", "type": "Int", "min_value": 1, "max_value": 9, "default": 10}])", {"'u'", "default"});
  expect_bad(R"([{"name": "f", "type": "Fixed"}])", {"'f'", "value", "missing"});
  expect_bad(R"({"name": "f"})", {"list"});
}

TEST(SearchSpace, ValidateNamesTheParameter) {
  SearchSpace s;
  s.Int("units", 32, 512, 32);
  s.validate({{"units", 64}, {"tuner/epochs", 3}});
  testing::expect_error([&] { s.validate({{"units", 33}}); }, ErrorKind::kInvalidArgument, {"'units'", "33"});
  testing::expect_error([&] { s.validate({{"units", 64}, {"depth", 2}}); }, ErrorKind::kInvalidArgument, {"'depth'"});
  testing::expect_error([&] { s.parameter("depth"); }, ErrorKind::kNotFound, {"depth"});
}

}  // namespace
}  // namespace tensorhub
