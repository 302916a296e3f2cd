// The Keras Tuner hyperparameter types (keras_tuner/engine/hyperparameters/hp_types) as
// classes: Choice, Int, Float, Boolean and Fixed, each with its own parsing, checks, value
// count, values by index, unit-cube mapping and sampling. Internal to tune/: SearchSpace
// (tensorhub/tune/search_space.h) builds them and holds them as `Parameter`s.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tensorhub/tune/search_space.h"

namespace tensorhub::detail {

/// Parses one JSON entry of a search space (docs/search-space.md): name, type, the type's own
/// fields, default and parent. Throws InvalidArgument naming the parameter and field for an
/// unknown type or field or a value of the wrong JSON type; the domain is checked by
/// SearchSpace::add (Parameter::check).
std::unique_ptr<Parameter> parse_parameter(const Json& entry);

/// Choice: one of a list of numbers, strings or booleans (all of one type), in list order.
class ChoiceParameter final : public Parameter {
 public:
  ChoiceParameter(std::string name, std::vector<Json> values);
  static std::unique_ptr<Parameter> parse(const std::string& name, const Json& entry);
  static const std::vector<std::string>& fields();

  std::string type_name() const override { return "Choice"; }
  std::optional<std::uint64_t> count() const override { return values_.size(); }
  std::optional<std::uint64_t> index_of(const Json& value) const override;
  std::string domain_text() const override { return "one of " + Json(values_).dump(); }
  std::unique_ptr<Parameter> clone() const override { return std::make_unique<ChoiceParameter>(*this); }
  void check_domain() const override;

 protected:
  Json value_of(std::uint64_t index) const override { return values_[index]; }
  Json keras_default() const override { return values_.front(); }
  void add_fields(Json& entry) const override;

 private:
  std::vector<Json> values_;
};

/// Int and Float: a range [min_value, max_value] with an optional step and a sampling
/// (keras_tuner's Numerical: linear steps, or multiplicative ones with log / reverse_log).
class NumericParameter : public Parameter {
 public:
  /// The fields of Int and Float entries.
  static const std::vector<std::string>& fields();
  std::optional<std::uint64_t> count() const override;
  std::optional<std::uint64_t> index_of(const Json& value) const override;
  std::string domain_text() const override;
  void check_domain() const override;

 protected:
  NumericParameter(std::string name, double min_value, double max_value, std::optional<double> step,
                   Sampling sampling);
  /// Reads min_value, max_value, step and sampling of `entry` (integers when `integral`).
  static void parse_range(NumericParameter& p, const Json& entry, bool integral);
  /// Int: values are integers (JSON integers, rounded).
  virtual bool integral() const = 0;
  /// Values on the step grid when the step divides the range as a linear one does.
  virtual std::uint64_t linear_count() const = 0;
  Json value_of(std::uint64_t index) const override;
  Json keras_default() const override { return number(min_value_); }
  void add_fields(Json& entry) const override;

  Json number(double v) const;
  bool multiplicative() const { return sampling_ != Sampling::kLinear; }
  std::uint64_t multiplicative_count() const;
  double unit_to_continuous(double u, double max_value) const;
  double continuous_to_unit(double v, double max_value) const;

  double min_value_ = 0, max_value_ = 0;
  std::optional<double> step_;
  Sampling sampling_ = Sampling::kLinear;
};

/// Int: integers of [min_value, max_value] with a step (default 1); with log sampling and step
/// 1, every integer of the range, drawn log-uniformly (Keras Tuner's Int with step=None).
class IntParameter final : public NumericParameter {
 public:
  IntParameter(std::string name, double min_value, double max_value, double step, Sampling sampling);
  static std::unique_ptr<Parameter> parse(const std::string& name, const Json& entry);

  std::string type_name() const override { return "Int"; }
  std::optional<std::uint64_t> count() const override;
  double to_unit(const Json& value) const override;
  Json from_unit(double u) const override;
  Json sample(std::mt19937_64& rng) const override;
  std::unique_ptr<Parameter> clone() const override { return std::make_unique<IntParameter>(*this); }
  void check_domain() const override;

 protected:
  bool integral() const override { return true; }
  std::uint64_t linear_count() const override;
  Json value_of(std::uint64_t index) const override;

 private:
  bool every_integer() const { return multiplicative() && (!step_ || *step_ <= 1); }
};

/// Float: a continuous range (no step), or its points on a step grid.
class FloatParameter final : public NumericParameter {
 public:
  FloatParameter(std::string name, double min_value, double max_value, std::optional<double> step,
                 Sampling sampling);
  static std::unique_ptr<Parameter> parse(const std::string& name, const Json& entry);

  std::string type_name() const override { return "Float"; }
  std::unique_ptr<Parameter> clone() const override { return std::make_unique<FloatParameter>(*this); }
  /// Without a step, every number of [min_value, max_value].
  bool contains(const Json& value) const override;
  double to_unit(const Json& value) const override;
  Json from_unit(double u) const override;
  Json sample(std::mt19937_64& rng) const override;
  void check_domain() const override;

 protected:
  bool integral() const override { return false; }
  std::uint64_t linear_count() const override;
};

/// Boolean: false, then true.
class BooleanParameter final : public Parameter {
 public:
  explicit BooleanParameter(std::string name);
  static std::unique_ptr<Parameter> parse(const std::string& name, const Json& entry);
  static const std::vector<std::string>& fields();

  std::string type_name() const override { return "Boolean"; }
  std::optional<std::uint64_t> count() const override { return 2; }
  std::optional<std::uint64_t> index_of(const Json& value) const override;
  std::string domain_text() const override { return "one of [false,true]"; }
  std::unique_ptr<Parameter> clone() const override { return std::make_unique<BooleanParameter>(*this); }
  void check_domain() const override {}

 protected:
  Json value_of(std::uint64_t index) const override { return index == 1; }
  Json keras_default() const override { return false; }
  void add_fields(Json&) const override {}
};

/// Fixed: one value.
class FixedParameter final : public Parameter {
 public:
  FixedParameter(std::string name, Json value);
  static std::unique_ptr<Parameter> parse(const std::string& name, const Json& entry);
  static const std::vector<std::string>& fields();

  std::string type_name() const override { return "Fixed"; }
  std::optional<std::uint64_t> count() const override { return 1; }
  std::optional<std::uint64_t> index_of(const Json& value) const override;
  std::string domain_text() const override { return "one of " + Json::array({value_}).dump(); }
  std::unique_ptr<Parameter> clone() const override { return std::make_unique<FixedParameter>(*this); }
  void check_domain() const override;

 protected:
  Json value_of(std::uint64_t) const override { return value_; }
  Json keras_default() const override { return value_; }
  void add_fields(Json& entry) const override { entry["value"] = value_; }

 private:
  Json value_;
};

}  // namespace tensorhub::detail
