// The Keras Tuner types with their defaults, step and sampling semantics
// (keras_tuner/engine/hyperparameters/hp_types; numerical.py: _sample_numerical_value,
// _sample_with_step, _numerical_to_prob, _to_prob_with_step; hp_utils.py: prob_to_index,
// index_to_prob).
#include "parameter_types.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "tensorhub/core/config_object.h"
#include "tensorhub/core/error.h"

namespace tensorhub {
namespace {

[[noreturn]] void fail(const std::string& param, const std::string& field, const std::string& what) {
  throw InvalidArgument("search space: parameter '" + param + "', field '" + field + "': " + what);
}

bool is_scalar(const Json& v) { return v.is_number() || v.is_string() || v.is_boolean(); }

bool is_integral(const Json& v) {
  if (v.is_number_integer()) return true;
  if (!v.is_number_float()) return false;
  const double d = v.get<double>();
  return std::isfinite(d) && d == std::floor(d) && std::abs(d) < 9.0e15;
}

std::string sampling_name(Sampling s) {
  switch (s) {
    case Sampling::kLinear: return "linear";
    case Sampling::kLog: return "log";
    case Sampling::kReverseLog: return "reverse_log";
  }
  return "?";
}

Sampling parse_sampling(const std::string& name, const Json& v) {
  const std::string s = v.is_string() ? v.get<std::string>() : v.dump();
  if (s == "linear") return Sampling::kLinear;
  if (s == "log") return Sampling::kLog;
  if (s == "reverse_log") return Sampling::kReverseLog;
  fail(name, "sampling", "must be one of linear, log, reverse_log; got " + v.dump());
}

double number_field(const std::string& name, const Json& j, const char* field, bool integral) {
  if (!j.contains(field)) fail(name, field, "missing");
  const Json& v = j.at(field);
  if (!v.is_number() || !std::isfinite(v.get<double>())) fail(name, field, "must be a finite number, got " + v.dump());
  if (integral && !is_integral(v)) fail(name, field, "must be an integer, got " + v.dump());
  return v.get<double>();
}

// hp_utils.prob_to_index / index_to_prob: index i owns [i/n, (i+1)/n), centred at (i+0.5)/n.
std::uint64_t unit_to_index(double u, std::uint64_t n) {
  u = std::clamp(u, 0.0, 1.0);
  const auto i = static_cast<std::uint64_t>(std::floor(u * static_cast<double>(n)));
  return std::min(i, n - 1);
}
double index_to_unit(std::uint64_t i, std::uint64_t n) {
  return (static_cast<double>(i) + 0.5) / static_cast<double>(n);
}

// A uniform draw on the closed [0, 1], so that max_value is reachable (Keras Tuner: [0, 1)).
double closed_unit(std::mt19937_64& rng) {
  constexpr std::uint64_t kOne = std::uint64_t{1} << 53;
  std::uniform_int_distribution<std::uint64_t> d(0, kOne);
  return static_cast<double>(d(rng)) / static_cast<double>(kOne);
}

// The fields every type has, and a type's own: sorted, as the unknown-field error lists them.
std::vector<std::string> fields_with(std::initializer_list<const char*> own) {
  std::set<std::string> all{"name", "type", "default", "parent_name", "parent_values"};
  all.insert(own.begin(), own.end());
  return {all.begin(), all.end()};
}

// One entry per type: its name, fields and parser.
struct TypeEntry {
  const char* name;
  const std::vector<std::string>& (*fields)();
  std::unique_ptr<Parameter> (*parse)(const std::string& name, const Json& entry);
};

const TypeEntry kTypes[] = {
    {"Choice", &detail::ChoiceParameter::fields, &detail::ChoiceParameter::parse},
    {"Int", &detail::NumericParameter::fields, &detail::IntParameter::parse},
    {"Float", &detail::NumericParameter::fields, &detail::FloatParameter::parse},
    {"Boolean", &detail::BooleanParameter::fields, &detail::BooleanParameter::parse},
    {"Fixed", &detail::FixedParameter::fields, &detail::FixedParameter::parse},
};

}  // namespace

// --- Parameter: what every type shares ------------------------------------------------------

Json Parameter::value_at(std::uint64_t index) const {
  const auto n = count();
  if (!n) fail(name, "step", "a continuous Float has no discrete values");
  if (index >= *n) fail(name, "values", "index " + std::to_string(index) + " out of range (" + std::to_string(*n) + " values)");
  return value_of(index);
}

double Parameter::to_unit(const Json& value) const { return index_to_unit(*index_of(value), *count()); }

Json Parameter::from_unit(double u) const { return value_at(unit_to_index(u, *count())); }

Json Parameter::sample(std::mt19937_64& rng) const {
  // Keras Tuner draws prob_to_index(uniform, n): uniform over the step grid (over the exponent k
  // for log/reverse_log steps).
  std::uniform_int_distribution<std::uint64_t> d(0, *count() - 1);
  return value_at(d(rng));
}

Json Parameter::to_json() const {
  Json j{{"name", name}, {"type", type_name()}};
  add_fields(j);
  j["default"] = default_value;
  if (!parent_name.empty()) {
    j["parent_name"] = parent_name;
    j["parent_values"] = parent_values;
  }
  return j;
}

void Parameter::check() {
  check_domain();
  if (default_value.is_null()) {
    default_value = keras_default();
  } else if (!contains(default_value)) {
    fail(name, "default", default_value.dump() + " is not one of its values");
  }
}

namespace detail {

std::unique_ptr<Parameter> parse_parameter(const Json& j) {
  if (!j.is_object()) throw InvalidArgument("search space: each entry must be a JSON object, got " + j.dump());
  if (!j.contains("name") || !j["name"].is_string() || j["name"].get<std::string>().empty()) {
    throw InvalidArgument("search space: entry " + j.dump() + ": field 'name' must be a non-empty string");
  }
  const std::string name = j["name"].get<std::string>();
  if (!j.contains("type") || !j["type"].is_string()) fail(name, "type", "missing; one of Choice, Int, Float, Boolean, Fixed");
  const std::string type = j["type"].get<std::string>();
  const auto entry = std::find_if(std::begin(kTypes), std::end(kTypes), [&](const TypeEntry& t) { return type == t.name; });
  if (entry == std::end(kTypes)) fail(name, "type", "must be one of Choice, Int, Float, Boolean, Fixed; got '" + type + "'");
  ConfigObject(j, "search space: parameter '" + name + "' (type " + type + ")", entry->fields());
  std::unique_ptr<Parameter> p = entry->parse(name, j);
  if (j.contains("default")) p->default_value = j["default"];
  if (j.contains("parent_name")) {
    if (!j["parent_name"].is_string()) fail(name, "parent_name", "must be a string");
    p->parent_name = j["parent_name"].get<std::string>();
    if (!j.contains("parent_values") || !j["parent_values"].is_array()) {
      fail(name, "parent_values", "must be a list of the parent's values when parent_name is given");
    }
    p->parent_values = j["parent_values"].get<std::vector<Json>>();
  } else if (j.contains("parent_values")) {
    fail(name, "parent_values", "needs parent_name");
  }
  return p;
}

// --- Choice ---------------------------------------------------------------------------------

ChoiceParameter::ChoiceParameter(std::string name, std::vector<Json> values)
    : Parameter(std::move(name)), values_(std::move(values)) {
  // Keras Tuner's Choice: ordered defaults to True when every value is a number.
  ordered = !values_.empty() && std::all_of(values_.begin(), values_.end(), [](const Json& v) { return v.is_number(); });
}

const std::vector<std::string>& ChoiceParameter::fields() {
  static const auto f = fields_with({"values", "ordered"});
  return f;
}

std::unique_ptr<Parameter> ChoiceParameter::parse(const std::string& name, const Json& j) {
  if (!j.contains("values") || !j["values"].is_array()) fail(name, "values", "must be a list of values");
  auto p = std::make_unique<ChoiceParameter>(name, j["values"].get<std::vector<Json>>());
  if (j.contains("ordered")) {
    if (!j["ordered"].is_boolean()) fail(name, "ordered", "must be true or false");
    p->ordered = j["ordered"].get<bool>();
  }
  return p;
}

void ChoiceParameter::check_domain() const {
  if (values_.empty()) fail(name, "values", "must not be empty");
  for (std::size_t i = 0; i < values_.size(); ++i) {
    const Json& v = values_[i];
    if (!is_scalar(v)) fail(name, "values", "must hold numbers, strings or booleans, got " + v.dump());
    if (v.is_number() && !std::isfinite(v.get<double>())) fail(name, "values", "must be finite numbers");
    // Keras Tuner's Choice requires one type for all values.
    const bool same = (v.is_number() && values_[0].is_number()) || v.type() == values_[0].type();
    if (!same) fail(name, "values", "must all be of one type (numbers, strings or booleans), got " + Json(values_).dump());
    for (std::size_t k = 0; k < i; ++k) {
      if (values_[k] == v) fail(name, "values", "duplicate value " + v.dump());
    }
  }
}

std::optional<std::uint64_t> ChoiceParameter::index_of(const Json& value) const {
  const auto it = std::find(values_.begin(), values_.end(), value);
  if (it == values_.end()) return std::nullopt;
  return static_cast<std::uint64_t>(it - values_.begin());
}

void ChoiceParameter::add_fields(Json& j) const {
  j["values"] = values_;
  j["ordered"] = ordered;
}

// --- Int and Float --------------------------------------------------------------------------

NumericParameter::NumericParameter(std::string name, double min_value, double max_value, std::optional<double> step,
                                   Sampling sampling)
    : Parameter(std::move(name)), min_value_(min_value), max_value_(max_value), step_(step), sampling_(sampling) {}

const std::vector<std::string>& NumericParameter::fields() {
  static const auto f = fields_with({"min_value", "max_value", "step", "sampling"});
  return f;
}

void NumericParameter::parse_range(NumericParameter& p, const Json& j, bool integral) {
  p.min_value_ = number_field(p.name, j, "min_value", integral);
  p.max_value_ = number_field(p.name, j, "max_value", integral);
  if (j.contains("sampling")) p.sampling_ = parse_sampling(p.name, j["sampling"]);
  if (j.contains("step") && !j["step"].is_null()) p.step_ = number_field(p.name, j, "step", integral);
}

Json NumericParameter::number(double v) const {
  if (integral()) return Json(static_cast<std::int64_t>(std::llround(v)));
  return Json(v);
}

void NumericParameter::check_domain() const {
  if (!std::isfinite(min_value_) || !std::isfinite(max_value_)) fail(name, "min_value", "must be finite");
  if (min_value_ > max_value_) {
    fail(name, "min_value", "must be <= max_value (" + Json(min_value_).dump() + " > " + Json(max_value_).dump() + ")");
  }
  if (multiplicative() && min_value_ <= 0) {
    fail(name, "sampling", sampling_name(sampling_) + " sampling needs min_value > 0, got " + Json(min_value_).dump());
  }
  if (step_ && (!std::isfinite(*step_) || *step_ <= 0)) fail(name, "step", "must be > 0, got " + Json(*step_).dump());
}

// Number of multiplicative steps min * step^k <= max, k = 0..n-1 (numerical.py: int(log(max /
// min, step)) + 1), computed by multiplying so that exact powers are not lost to rounding.
std::uint64_t NumericParameter::multiplicative_count() const {
  std::uint64_t n = 1;
  double v = min_value_;
  const double tol = 1e-9 * max_value_;
  while (v * *step_ <= max_value_ + tol) {
    v *= *step_;
    ++n;
  }
  return n;
}

std::optional<std::uint64_t> NumericParameter::count() const {
  if (!step_) return std::nullopt;
  if (multiplicative()) return multiplicative_count();
  return linear_count();
}

Json NumericParameter::value_of(std::uint64_t index) const {
  const std::uint64_t n = *count();
  double v = 0;
  if (multiplicative()) {
    // log: min * step^k, ascending; reverse_log: max + min - min * step^k, listed ascending too
    // (k = n - 1 - index), so that index order is value order for every sampling.
    const std::uint64_t k = sampling_ == Sampling::kLog ? index : n - 1 - index;
    double m = min_value_;
    for (std::uint64_t t = 0; t < k; ++t) m *= *step_;
    v = sampling_ == Sampling::kLog ? m : max_value_ + min_value_ - m;
  } else {
    v = min_value_ + static_cast<double>(index) * *step_;
  }
  // The last point is max_value itself when the step divides the range (up to rounding).
  if (index + 1 == n && std::abs(v - max_value_) <= 1e-9 * std::max(1.0, std::abs(max_value_))) v = max_value_;
  if (index == 0 && sampling_ != Sampling::kReverseLog) v = min_value_;
  return number(v);
}

std::optional<std::uint64_t> NumericParameter::index_of(const Json& value) const {
  if (!value.is_number()) return std::nullopt;
  if (integral() && !is_integral(value)) return std::nullopt;
  const auto n = count();
  if (!n) return std::nullopt;
  const double v = value.get<double>();
  const double tol = 1e-9 * std::max(1.0, std::abs(v));
  if (v < min_value_ - tol || v > max_value_ + tol) return std::nullopt;
  std::uint64_t guess = 0;
  if (integral() && multiplicative() && *step_ <= 1) {  // Int: every integer of the range
    guess = static_cast<std::uint64_t>(v - min_value_);
  } else if (multiplicative()) {
    const double m = sampling_ == Sampling::kLog ? v : max_value_ + min_value_ - v;
    const double k = std::round(std::log(m / min_value_) / std::log(*step_));
    if (k < 0 || k >= static_cast<double>(*n)) return std::nullopt;
    guess = sampling_ == Sampling::kLog ? static_cast<std::uint64_t>(k) : *n - 1 - static_cast<std::uint64_t>(k);
  } else {
    const double k = std::round((v - min_value_) / *step_);
    if (k < 0 || k >= static_cast<double>(*n)) return std::nullopt;
    guess = static_cast<std::uint64_t>(k);
  }
  if (guess >= *n) return std::nullopt;
  const double at = value_at(guess).get<double>();
  if (std::abs(at - v) > tol) return std::nullopt;
  return guess;
}

// Continuous [0, 1] -> value in the sampling's scale (numerical.py _sample_numerical_value), with
// the ends mapped exactly to min_value and max_value.
double NumericParameter::unit_to_continuous(double u, double max_value) const {
  if (u <= 0) return min_value_;
  if (u >= 1) return max_value;
  const double lo = min_value_;
  switch (sampling_) {
    case Sampling::kLinear: return lo + u * (max_value - lo);
    case Sampling::kLog: return lo * std::pow(max_value / lo, u);
    case Sampling::kReverseLog: return max_value + lo - lo * std::pow(max_value / lo, 1 - u);
  }
  return lo;
}

// The inverse (numerical.py _numerical_to_prob); 0.5 for an empty range as Keras Tuner.
double NumericParameter::continuous_to_unit(double v, double max_value) const {
  const double lo = min_value_;
  if (max_value == lo) return 0.5;
  double u = 0;
  switch (sampling_) {
    case Sampling::kLinear: u = (v - lo) / (max_value - lo); break;
    case Sampling::kLog: u = std::log(v / lo) / std::log(max_value / lo); break;
    case Sampling::kReverseLog: u = 1.0 - std::log((max_value + lo - v) / lo) / std::log(max_value / lo); break;
  }
  return std::clamp(u, 0.0, 1.0);
}

std::string NumericParameter::domain_text() const {
  std::ostringstream out;
  out << type_name() << " in [" << Json(min_value_).dump() << ", " << Json(max_value_).dump() << "]";
  if (step_) out << " step " << Json(*step_).dump() << " (" << sampling_name(sampling_) << ")";
  return out.str();
}

void NumericParameter::add_fields(Json& j) const {
  j["min_value"] = number(min_value_);
  j["max_value"] = number(max_value_);
  if (step_) j["step"] = number(*step_);
  j["sampling"] = sampling_name(sampling_);
}

// --- Int ------------------------------------------------------------------------------------

IntParameter::IntParameter(std::string name, double min_value, double max_value, double step, Sampling sampling)
    : NumericParameter(std::move(name), min_value, max_value, step, sampling) {}

std::unique_ptr<Parameter> IntParameter::parse(const std::string& name, const Json& j) {
  auto p = std::make_unique<IntParameter>(name, 0, 0, 1, Sampling::kLinear);
  p->step_.reset();
  parse_range(*p, j, /*integral=*/true);
  if (!p->step_) p->step_ = 1;  // Keras Tuner's Int: step None means 1 with linear sampling
  return p;
}

void IntParameter::check_domain() const {
  if (!std::isfinite(min_value_) || !std::isfinite(max_value_)) fail(name, "min_value", "must be finite");
  if (min_value_ != std::floor(min_value_) || max_value_ != std::floor(max_value_)) {
    fail(name, "min_value", "Int bounds must be integers");
  }
  NumericParameter::check_domain();
  if (*step_ != std::floor(*step_)) fail(name, "step", "must be an integer for Int");
}

std::uint64_t IntParameter::linear_count() const {
  return static_cast<std::uint64_t>((max_value_ - min_value_) / *step_) + 1;
}

// Int with log/reverse_log sampling and step <= 1 is Keras Tuner's Int(step=None, sampling=log):
// every integer of the range is a point.
std::optional<std::uint64_t> IntParameter::count() const {
  if (every_integer()) return static_cast<std::uint64_t>(max_value_ - min_value_) + 1;
  return NumericParameter::count();
}

Json IntParameter::value_of(std::uint64_t index) const {
  if (!every_integer()) return NumericParameter::value_of(index);
  double v = min_value_ + static_cast<double>(index);
  if (index + 1 == *count() && std::abs(v - max_value_) <= 1e-9 * std::max(1.0, std::abs(max_value_))) v = max_value_;
  if (index == 0) v = min_value_;
  return number(v);
}

double IntParameter::to_unit(const Json& value) const {
  if (!every_integer()) return NumericParameter::to_unit(value);
  // Keras Tuner's Int.value_to_prob without step: value + 0.5 on the [min, max + 1) scale.
  return continuous_to_unit(value.get<double>() + 0.5, max_value_ + 1);
}

Json IntParameter::from_unit(double u) const {
  if (!every_integer()) return NumericParameter::from_unit(u);
  const double x = unit_to_continuous(u, max_value_ + 1);
  return static_cast<std::int64_t>(std::clamp(std::floor(x), min_value_, max_value_));
}

Json IntParameter::sample(std::mt19937_64& rng) const {
  if (!every_integer()) return NumericParameter::sample(rng);
  // Keras Tuner's Int(step=None, sampling=log): int(value in [min, max + 1)) so that every
  // integer, max_value included, can be drawn with its log-scale share.
  return from_unit(closed_unit(rng));
}

// --- Float ----------------------------------------------------------------------------------

FloatParameter::FloatParameter(std::string name, double min_value, double max_value, std::optional<double> step,
                               Sampling sampling)
    : NumericParameter(std::move(name), min_value, max_value, step, sampling) {}

std::unique_ptr<Parameter> FloatParameter::parse(const std::string& name, const Json& j) {
  auto p = std::make_unique<FloatParameter>(name, 0, 0, std::nullopt, Sampling::kLinear);
  parse_range(*p, j, /*integral=*/false);
  return p;
}

void FloatParameter::check_domain() const {
  NumericParameter::check_domain();
  if (step_ && multiplicative() && *step_ <= 1) {
    fail(name, "step", "with " + sampling_name(sampling_) + " sampling the step is a multiplier and must be > 1");
  }
}

std::uint64_t FloatParameter::linear_count() const {
  // The tolerance keeps 0..1 step 0.1 at 11 points despite 1 / 0.1 = 9.999... in binary.
  return static_cast<std::uint64_t>(std::floor((max_value_ - min_value_) / *step_ + 1e-9)) + 1;
}

bool FloatParameter::contains(const Json& value) const {
  if (step_) return NumericParameter::contains(value);
  return value.is_number() && value.get<double>() >= min_value_ && value.get<double>() <= max_value_;
}

double FloatParameter::to_unit(const Json& value) const {
  if (step_) return NumericParameter::to_unit(value);
  return continuous_to_unit(value.get<double>(), max_value_);
}

Json FloatParameter::from_unit(double u) const {
  if (step_) return NumericParameter::from_unit(u);
  return unit_to_continuous(u, max_value_);
}

Json FloatParameter::sample(std::mt19937_64& rng) const {
  if (step_) return NumericParameter::sample(rng);
  return unit_to_continuous(closed_unit(rng), max_value_);
}

// --- Boolean and Fixed ----------------------------------------------------------------------

BooleanParameter::BooleanParameter(std::string name) : Parameter(std::move(name)) {}

const std::vector<std::string>& BooleanParameter::fields() {
  static const auto f = fields_with({});
  return f;
}

std::unique_ptr<Parameter> BooleanParameter::parse(const std::string& name, const Json&) {
  return std::make_unique<BooleanParameter>(name);
}

std::optional<std::uint64_t> BooleanParameter::index_of(const Json& value) const {
  if (!value.is_boolean()) return std::nullopt;
  return value.get<bool>() ? 1 : 0;
}

FixedParameter::FixedParameter(std::string name, Json value) : Parameter(std::move(name)), value_(std::move(value)) {}

const std::vector<std::string>& FixedParameter::fields() {
  static const auto f = fields_with({"value"});
  return f;
}

std::unique_ptr<Parameter> FixedParameter::parse(const std::string& name, const Json& j) {
  if (!j.contains("value")) fail(name, "value", "missing");
  return std::make_unique<FixedParameter>(name, j["value"]);
}

void FixedParameter::check_domain() const {
  if (!is_scalar(value_)) fail(name, "value", "must be a number, string or boolean");
}

std::optional<std::uint64_t> FixedParameter::index_of(const Json& value) const {
  if (value == value_) return 0;
  return std::nullopt;
}

}  // namespace detail
}  // namespace tensorhub
