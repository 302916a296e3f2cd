// Search spaces for hyperparameter tuning, with Keras Tuner's parameter types, names and
// semantics (keras_tuner.HyperParameters): Choice, Int, Float, Boolean, Fixed, and conditional
// parameters active only while a parent has one of given values. The JSON form, the types'
// fields and defaults, and where we differ from Keras Tuner: docs/search-space.md.
//
// A SearchSpace is a value: copies share their (immutable) parameters. Not thread-safe to
// modify; const methods may be called from several threads.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace tensorhub {

using Json = nlohmann::json;

enum class Sampling { kLinear, kLog, kReverseLog };

/// One hyperparameter (Keras Tuner's HyperParameter): its name, default and condition, and the
/// domain of its type (Choice, Int, Float, Boolean or Fixed; the classes are tune/'s own,
/// src/tune/parameter_types.h). Values are JSON numbers, strings or booleans.
class Parameter {
 public:
  virtual ~Parameter() = default;

  std::string name;
  Json default_value;               ///< Keras Tuner's default when not given
  bool ordered = false;             ///< Choice: values have an order (Keras Tuner's `ordered`)
  std::string parent_name;          ///< conditional: active only while parent_name ...
  std::vector<Json> parent_values;  ///< ... has one of these values (empty: unconditional)

  /// "Choice", "Int", "Float", "Boolean" or "Fixed".
  virtual std::string type_name() const = 0;
  /// Number of values, or nothing when continuous (Float without step).
  virtual std::optional<std::uint64_t> count() const = 0;
  /// The index-th value (ascending for numbers; Choice: list order; Boolean: false, true).
  /// Throws InvalidArgument for a continuous parameter or an index out of range.
  Json value_at(std::uint64_t index) const;
  /// The index of `value` among the values, or nothing if it is none of them.
  virtual std::optional<std::uint64_t> index_of(const Json& value) const = 0;
  /// True when `value` is a value of this parameter (a continuous Float: a number in range).
  virtual bool contains(const Json& value) const { return index_of(value).has_value(); }

  /// Maps a value (one that contains() accepts) to [0, 1] in the sampling's scale (a discrete
  /// value: its index centred in its bin), and u in [0, 1] back to a value (rounding to the
  /// step or bin); from_unit(to_unit(v)) == v.
  virtual double to_unit(const Json& value) const;
  virtual Json from_unit(double u) const;
  /// A value drawn uniformly in the sampling's scale, on the step grid when there is one.
  virtual Json sample(std::mt19937_64& rng) const;

  /// The JSON entry: name, type, the type's fields, default, and the parent if any.
  Json to_json() const;
  /// The domain for messages: "Int in [32, 512] step 32 (linear)", "one of [\"a\",\"b\"]".
  virtual std::string domain_text() const = 0;
  virtual std::unique_ptr<Parameter> clone() const = 0;

  /// Checks the domain and the default (and sets Keras Tuner's default when none is given:
  /// min_value, the first value, false, the value). Throws InvalidArgument naming the parameter
  /// and the field.
  void check();

 protected:
  explicit Parameter(std::string parameter_name) : name(std::move(parameter_name)) {}
  Parameter(const Parameter&) = default;
  Parameter& operator=(const Parameter&) = default;

  virtual void check_domain() const = 0;
  virtual Json value_of(std::uint64_t index) const = 0;  ///< index < *count()
  virtual Json keras_default() const = 0;
  virtual void add_fields(Json& entry) const = 0;
};

class SearchSpace {
 public:
  SearchSpace() = default;
  /// Parses the JSON form (docs/search-space.md). Throws InvalidArgument naming the parameter
  /// and field for an unknown type or field, min_value > max_value, log sampling with
  /// min_value <= 0, an empty Choice, a duplicate name, or a parent that is not defined before
  /// its child.
  static SearchSpace from_json(const Json& json);
  Json to_json() const;

  /// The C++ form of the JSON entries; same checks as from_json.
  SearchSpace& Choice(const std::string& name, std::vector<Json> values);
  SearchSpace& Int(const std::string& name, std::int64_t min_value, std::int64_t max_value,
                   std::int64_t step = 1, Sampling sampling = Sampling::kLinear);
  SearchSpace& Float(const std::string& name, double min_value, double max_value,
                     std::optional<double> step = std::nullopt, Sampling sampling = Sampling::kLinear);
  SearchSpace& Boolean(const std::string& name);
  SearchSpace& Fixed(const std::string& name, Json value);
  /// Makes the last added parameter conditional on `parent` having one of `values`; on an
  /// error the space is left as it was.
  SearchSpace& conditional_on(const std::string& parent, std::vector<Json> values);

  /// The parameters in definition order.
  const std::vector<std::shared_ptr<const Parameter>>& parameters() const { return params_; }
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

  /// Lazy grid enumeration, in grid() order, for spaces too large to list: a cursor holds one
  /// value index per parameter (ignored while the parameter is inactive). first_grid_cursor
  /// gives the first point's cursor, or nothing when the space has a continuous active
  /// parameter; next_grid_cursor advances it and returns false after the last point.
  std::optional<std::vector<std::uint64_t>> first_grid_cursor() const;
  bool next_grid_cursor(std::vector<std::uint64_t>& cursor) const;
  Json grid_point(const std::vector<std::uint64_t>& cursor) const;

 private:
  /// Checks `p` against the space (name, domain, default, parent) and appends it.
  SearchSpace& add(std::unique_ptr<Parameter> p);

  std::vector<std::shared_ptr<const Parameter>> params_;
};

}  // namespace tensorhub
