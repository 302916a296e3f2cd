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
// (Keras Tuner's Float without a step maps the unit interval half-open and never yields
// max_value; its Int with a step that does not divide the range never yields max_value either,
// here max_value is then not a grid point and is never yielded, which is stated in the error
// of a grid search instead).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace tensorhub::tune {

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
  std::optional<std::vector<Json>> grid() const;
  /// Number of distinct points, or nothing if infinite (or above 2^63).
  std::optional<std::uint64_t> size() const;

  /// Maps a point to [0, 1]^d, one coordinate per parameter in definition order (the
  /// sampling's scale; Choice: index centred in its bin; inactive: 0.5), and back (rounding to
  /// the step or bin). from_unit(to_unit(v)) == v for every point of the space.
  std::vector<double> to_unit(const Json& values) const;
  Json from_unit(const std::vector<double>& unit) const;

  /// Throws InvalidArgument naming the parameter when `values` is not a point of this space.
  void validate(const Json& values) const;

 private:
  std::vector<Parameter> params_;
};

}  // namespace tensorhub::tune
