// Search spaces for hyperparameter tuning, with Keras Tuner's parameter types, names and
// semantics (keras_tuner.HyperParameters): Choice, Int, Float, Boolean, Fixed, and conditional
// parameters active only while a parent has one of given values.
//
// JSON form (a list, in definition order; a parent must come before its children):
//   [{"name": "units", "type": "Int", "min_value": 32, "max_value": 512, "step": 32},
//    {"name": "learning_rate", "type": "Choice", "values": [0.01, 0.001, 0.0001]},
//    {"name": "lr", "type": "Float", "min_value": 1e-4, "max_value": 1e-2, "sampling": "log"},
//    {"name": "batchnorm", "type": "Boolean"},
//    {"name": "optimizer", "type": "Fixed", "value": "Adam"},
//    {"name": "momentum", "type": "Float", "min_value": 0, "max_value": 0.99,
//     "parent_name": "optimizer", "parent_values": ["SGD"]}]
// Optional on every type: "default" (Keras Tuner's default: min_value for Int/Float, the first
// value for Choice, false for Boolean). Choice: "ordered" (default: true when all values are
// numbers, as Keras Tuner). Int/Float: "step" (Int default 1; Float none = continuous),
// "sampling" "linear" (default) | "log" | "reverse_log" (log needs min_value > 0).
//
// Where we differ from Keras Tuner, on purpose: min_value and max_value are always reachable
// (Keras Tuner's Float without a step maps the half-open unit interval [0, 1) and never yields
// max_value; here the continuous draw is on the closed [0, 1]). As in Keras Tuner, a step that
// does not divide the range makes the last grid point the largest one <= max_value (Int 6..13
// step 3: 6, 9, 12), so max_value is then not a point of the space.
// With "log" / "reverse_log" sampling, "step" is a multiplier, as in Keras Tuner (Int 2..32
// step 2 log: 2, 4, 8, 16, 32); an Int with log sampling and step 1 has every integer of the
// range as a point, drawn log-uniformly (Keras Tuner's Int with step=None).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace tensorhub {

using Json = nlohmann::json;

enum class Sampling { kLinear, kLog, kReverseLog };

/// One hyperparameter and its domain.
struct Parameter {
  enum class Type { kChoice, kInt, kFloat, kBoolean, kFixed };
  std::string name;
  Type type = Type::kFixed;
  std::vector<Json> values;           ///< Choice: the values (numbers, strings or booleans)
  bool ordered = false;               ///< Choice: values have an order (numbers)
  double min_value = 0, max_value = 0;///< Int, Float
  std::optional<double> step;         ///< Int (default 1), Float (none: continuous)
  Sampling sampling = Sampling::kLinear;
  Json default_value;                 ///< Keras Tuner's default when not given
  std::string parent_name;            ///< conditional: active only while parent_name ...
  std::vector<Json> parent_values;    ///< ... has one of these values (empty: unconditional)
};

class SearchSpace {
 public:
  SearchSpace() = default;
  /// Parses the JSON form above. Throws InvalidArgument naming the parameter and field for an
  /// unknown type or field, min_value > max_value, log sampling with min_value <= 0, an empty
  /// Choice, a duplicate name, or a parent that is not defined before its child.
  static SearchSpace from_json(const Json& json);
  Json to_json() const;

  /// Adds a parameter (the C++ form of one JSON entry); same checks as from_json.
  SearchSpace& add(Parameter p);
  SearchSpace& Choice(const std::string& name, std::vector<Json> values);
  SearchSpace& Int(const std::string& name, std::int64_t min_value, std::int64_t max_value,
                   std::int64_t step = 1, Sampling sampling = Sampling::kLinear);
  SearchSpace& Float(const std::string& name, double min_value, double max_value,
                     std::optional<double> step = std::nullopt, Sampling sampling = Sampling::kLinear);
  SearchSpace& Boolean(const std::string& name);
  SearchSpace& Fixed(const std::string& name, Json value);
  /// Makes the last added parameter conditional on `parent` having one of `values`.
  SearchSpace& conditional_on(const std::string& parent, std::vector<Json> values);

  const std::vector<Parameter>& parameters() const { return params_; }
  const Parameter& parameter(const std::string& name) const;  ///< NotFound if unknown

  /// True when `p` is active for the (partial) assignment `values` (its parent is active and
  /// has one of parent_values).
  bool is_active(const Parameter& p, const Json& values) const;

  /// A random point: a JSON object holding exactly the active parameters, each drawn uniformly
  /// in its sampling's scale (log: uniform in log space), on the step grid when there is one.
  Json sample(std::mt19937_64& rng) const;
  /// Every parameter's default, active ones only.
  Json default_values() const;
  /// All points of a finite space, in grid order (the last parameter varies fastest), inactive
  /// parameters left out; nothing when a parameter is continuous (Float without step).
  /// Throws InvalidArgument above 1,000,000 points (use the grid cursor below).
  std::optional<std::vector<Json>> grid() const;
  /// Number of distinct points, or nothing if infinite (or above 2^63).
  std::optional<std::uint64_t> size() const;

  /// Maps a point to [0, 1]^d, one coordinate per parameter in definition order (the
  /// sampling's scale; Choice: index centred in its bin; inactive: 0.5), and back (rounding to
  /// the step or bin). from_unit(to_unit(v)) == v for every point of the space (exactly for
  /// discrete parameters; continuous Floats within rounding, about 1e-12 relative).
  /// Unit coordinates outside [0, 1] are clamped. to_unit throws InvalidArgument for a
  /// value that is not a point (as validate); from_unit for a vector of the wrong length.
  std::vector<double> to_unit(const Json& values) const;
  Json from_unit(const std::vector<double>& unit) const;

  /// Throws InvalidArgument naming the parameter when `values` is not a point of this space.
  /// Keys starting with "tuner/" (the oracles' own, see oracle.h) are allowed and not checked.
  void validate(const Json& values) const;

  // Discrete domains, used by the oracles (grid enumeration, Bayesian optimisation).
  /// Number of values `p` can take, or nothing when it is continuous (Float without step).
  static std::optional<std::uint64_t> value_count(const Parameter& p);
  /// The index-th value of a discrete `p` (ascending for numbers; Choice: list order;
  /// Boolean: false, true). Throws InvalidArgument for a continuous p or an index out of range.
  static Json value_at(const Parameter& p, std::uint64_t index);
  /// The index of `value` in p's discrete domain, or nothing if it is none of its values.
  static std::optional<std::uint64_t> index_of(const Parameter& p, const Json& value);

  /// Lazy grid enumeration, in grid() order, for spaces too large to list: a cursor holds one
  /// value index per parameter (ignored while the parameter is inactive). first_grid_cursor
  /// gives the first point's cursor, or nothing when the space has a continuous active
  /// parameter; next_grid_cursor advances it and returns false after the last point.
  std::optional<std::vector<std::uint64_t>> first_grid_cursor() const;
  bool next_grid_cursor(std::vector<std::uint64_t>& cursor) const;
  Json grid_point(const std::vector<std::uint64_t>& cursor) const;

 private:
  std::vector<Parameter> params_;
};

}  // namespace tensorhub
