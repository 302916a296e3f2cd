// SearchSpace: Keras Tuner's hyperparameter types (keras_tuner/engine/hyperparameters/hp_types:
// Choice, Int, Float, Boolean, Fixed) with their defaults, step and sampling semantics
// (numerical.py: _sample_numerical_value, _sample_with_step, _numerical_to_prob,
// _to_prob_with_step; hp_utils.py: prob_to_index, index_to_prob), and conditional parameters
// (keras_tuner conditions.Parent: active while the parent is active and has one of the values).
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <set>
#include <sstream>

#include "tensorhub/core/config.h"
#include "tensorhub/core/error.h"
#include "tensorhub/tune/search_space.h"

namespace tensorhub {
namespace {

using Type = Parameter::Type;

constexpr std::uint64_t kMaxGridPoints = 1'000'000;
constexpr std::uint64_t kSizeCap = std::uint64_t{1} << 63;

std::string type_name(Type t) {
  switch (t) {
    case Type::kChoice: return "Choice";
    case Type::kInt: return "Int";
    case Type::kFloat: return "Float";
    case Type::kBoolean: return "Boolean";
    case Type::kFixed: return "Fixed";
  }
  return "?";
}

std::string sampling_name(Sampling s) {
  switch (s) {
    case Sampling::kLinear: return "linear";
    case Sampling::kLog: return "log";
    case Sampling::kReverseLog: return "reverse_log";
  }
  return "?";
}

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

// Int with log/reverse_log sampling and step <= 1 is Keras Tuner's Int(step=None, sampling=log):
// every integer of the range is a point.
bool multiplicative(const Parameter& p) { return p.sampling != Sampling::kLinear; }
bool int_every_integer(const Parameter& p) {
  return p.type == Type::kInt && multiplicative(p) && (!p.step || *p.step <= 1);
}

// Number of multiplicative steps min * step^k <= max, k = 0..n-1 (numerical.py: int(log(max /
// min, step)) + 1), computed by multiplying so that exact powers are not lost to rounding.
std::uint64_t multiplicative_count(const Parameter& p) {
  std::uint64_t n = 1;
  double v = p.min_value;
  const double tol = 1e-9 * p.max_value;
  while (v * *p.step <= p.max_value + tol) {
    v *= *p.step;
    ++n;
  }
  return n;
}

// Continuous [0, 1] -> value in the sampling's scale (numerical.py _sample_numerical_value), with
// the ends mapped exactly to min_value and max_value.
double unit_to_continuous(const Parameter& p, double u, double max_value) {
  if (u <= 0) return p.min_value;
  if (u >= 1) return max_value;
  const double lo = p.min_value;
  switch (p.sampling) {
    case Sampling::kLinear: return lo + u * (max_value - lo);
    case Sampling::kLog: return lo * std::pow(max_value / lo, u);
    case Sampling::kReverseLog: return max_value + lo - lo * std::pow(max_value / lo, 1 - u);
  }
  return lo;
}

// The inverse (numerical.py _numerical_to_prob); 0.5 for an empty range as Keras Tuner.
double continuous_to_unit(const Parameter& p, double v, double max_value) {
  const double lo = p.min_value;
  if (max_value == lo) return 0.5;
  double u = 0;
  switch (p.sampling) {
    case Sampling::kLinear: u = (v - lo) / (max_value - lo); break;
    case Sampling::kLog: u = std::log(v / lo) / std::log(max_value / lo); break;
    case Sampling::kReverseLog: u = 1.0 - std::log((max_value + lo - v) / lo) / std::log(max_value / lo); break;
  }
  return std::clamp(u, 0.0, 1.0);
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

Json number_json(const Parameter& p, double v) {
  if (p.type == Type::kInt) return Json(static_cast<std::int64_t>(std::llround(v)));
  return Json(v);
}

const std::set<std::string>& allowed_fields(Type t) {
  static const std::set<std::string> choice{"name", "type", "default", "parent_name", "parent_values", "values", "ordered"};
  static const std::set<std::string> numeric{"name", "type", "default", "parent_name", "parent_values",
                                             "min_value", "max_value", "step", "sampling"};
  static const std::set<std::string> boolean{"name", "type", "default", "parent_name", "parent_values"};
  static const std::set<std::string> fixed{"name", "type", "default", "parent_name", "parent_values", "value"};
  switch (t) {
    case Type::kChoice: return choice;
    case Type::kInt:
    case Type::kFloat: return numeric;
    case Type::kBoolean: return boolean;
    case Type::kFixed: return fixed;
  }
  return fixed;
}

double number_field(const std::string& name, const Json& j, const char* field, bool integral) {
  if (!j.contains(field)) fail(name, field, "missing");
  const Json& v = j.at(field);
  if (!v.is_number() || !std::isfinite(v.get<double>())) fail(name, field, "must be a finite number, got " + v.dump());
  if (integral && !is_integral(v)) fail(name, field, "must be an integer, got " + v.dump());
  return v.get<double>();
}

Sampling parse_sampling(const std::string& name, const Json& v) {
  const std::string s = v.is_string() ? v.get<std::string>() : v.dump();
  if (s == "linear") return Sampling::kLinear;
  if (s == "log") return Sampling::kLog;
  if (s == "reverse_log") return Sampling::kReverseLog;
  fail(name, "sampling", "must be one of linear, log, reverse_log; got " + v.dump());
}

Parameter parse_parameter(const Json& j) {
  if (!j.is_object()) throw InvalidArgument("search space: each entry must be a JSON object, got " + j.dump());
  if (!j.contains("name") || !j["name"].is_string() || j["name"].get<std::string>().empty()) {
    throw InvalidArgument("search space: entry " + j.dump() + ": field 'name' must be a non-empty string");
  }
  Parameter p;
  p.name = j["name"].get<std::string>();
  if (!j.contains("type") || !j["type"].is_string()) fail(p.name, "type", "missing; one of Choice, Int, Float, Boolean, Fixed");
  const std::string type = j["type"].get<std::string>();
  if (type == "Choice") p.type = Type::kChoice;
  else if (type == "Int") p.type = Type::kInt;
  else if (type == "Float") p.type = Type::kFloat;
  else if (type == "Boolean") p.type = Type::kBoolean;
  else if (type == "Fixed") p.type = Type::kFixed;
  else fail(p.name, "type", "must be one of Choice, Int, Float, Boolean, Fixed; got '" + type + "'");
  const auto& allowed = allowed_fields(p.type);
  ConfigObject(j, "search space: parameter '" + p.name + "' (type " + type + ")", {allowed.begin(), allowed.end()});
  switch (p.type) {
    case Type::kChoice:
      if (!j.contains("values") || !j["values"].is_array()) fail(p.name, "values", "must be a list of values");
      p.values = j["values"].get<std::vector<Json>>();
      if (j.contains("ordered")) {
        if (!j["ordered"].is_boolean()) fail(p.name, "ordered", "must be true or false");
        p.ordered = j["ordered"].get<bool>();
      } else {
        // Keras Tuner's Choice: ordered defaults to True when every value is a number.
        p.ordered = !p.values.empty() &&
                    std::all_of(p.values.begin(), p.values.end(), [](const Json& v) { return v.is_number(); });
      }
      break;
    case Type::kInt:
    case Type::kFloat: {
      const bool integral = p.type == Type::kInt;
      p.min_value = number_field(p.name, j, "min_value", integral);
      p.max_value = number_field(p.name, j, "max_value", integral);
      if (j.contains("sampling")) p.sampling = parse_sampling(p.name, j["sampling"]);
      if (j.contains("step") && !j["step"].is_null()) p.step = number_field(p.name, j, "step", integral);
      else if (integral) p.step = 1;  // Keras Tuner's Int: step None means 1 with linear sampling
      break;
    }
    case Type::kBoolean: break;
    case Type::kFixed:
      if (!j.contains("value")) fail(p.name, "value", "missing");
      p.values = {j["value"]};
      break;
  }
  if (j.contains("default")) p.default_value = j["default"];
  if (j.contains("parent_name")) {
    if (!j["parent_name"].is_string()) fail(p.name, "parent_name", "must be a string");
    p.parent_name = j["parent_name"].get<std::string>();
    if (!j.contains("parent_values") || !j["parent_values"].is_array()) {
      fail(p.name, "parent_values", "must be a list of the parent's values when parent_name is given");
    }
    p.parent_values = j["parent_values"].get<std::vector<Json>>();
  } else if (j.contains("parent_values")) {
    fail(p.name, "parent_values", "needs parent_name");
  }
  return p;
}

// Keras Tuner's default when none was given: min_value, the first value, false, the value.
Json keras_default(const Parameter& p) {
  switch (p.type) {
    case Type::kChoice: return p.values.front();
    case Type::kInt:
    case Type::kFloat: return number_json(p, p.min_value);
    case Type::kBoolean: return false;
    case Type::kFixed: return p.values.front();
  }
  return nullptr;
}

// Checks one parameter on its own (its domain and default).
void check_parameter(Parameter& p) {
  switch (p.type) {
    case Type::kChoice: {
      if (p.values.empty()) fail(p.name, "values", "must not be empty");
      for (std::size_t i = 0; i < p.values.size(); ++i) {
        const Json& v = p.values[i];
        if (!is_scalar(v)) fail(p.name, "values", "must hold numbers, strings or booleans, got " + v.dump());
        if (v.is_number() && !std::isfinite(v.get<double>())) fail(p.name, "values", "must be finite numbers");
        // Keras Tuner's Choice requires one type for all values.
        const bool same = (v.is_number() && p.values[0].is_number()) || v.type() == p.values[0].type();
        if (!same) fail(p.name, "values", "must all be of one type (numbers, strings or booleans), got " + Json(p.values).dump());
        for (std::size_t k = 0; k < i; ++k) {
          if (p.values[k] == v) fail(p.name, "values", "duplicate value " + v.dump());
        }
      }
      break;
    }
    case Type::kInt:
    case Type::kFloat:
      if (!std::isfinite(p.min_value) || !std::isfinite(p.max_value)) fail(p.name, "min_value", "must be finite");
      if (p.type == Type::kInt && (p.min_value != std::floor(p.min_value) || p.max_value != std::floor(p.max_value))) {
        fail(p.name, "min_value", "Int bounds must be integers");
      }
      if (p.min_value > p.max_value) {
        fail(p.name, "min_value", "must be <= max_value (" + Json(p.min_value).dump() + " > " + Json(p.max_value).dump() + ")");
      }
      if (multiplicative(p) && p.min_value <= 0) {
        fail(p.name, "sampling", sampling_name(p.sampling) + " sampling needs min_value > 0, got " + Json(p.min_value).dump());
      }
      if (p.type == Type::kInt && !p.step) p.step = 1;
      if (p.step) {
        const double s = *p.step;
        if (!std::isfinite(s) || s <= 0) fail(p.name, "step", "must be > 0, got " + Json(s).dump());
        if (p.type == Type::kInt && s != std::floor(s)) fail(p.name, "step", "must be an integer for Int");
        if (p.type == Type::kFloat && multiplicative(p) && s <= 1) {
          fail(p.name, "step", "with " + sampling_name(p.sampling) + " sampling the step is a multiplier and must be > 1");
        }
      }
      break;
    case Type::kBoolean: break;
    case Type::kFixed:
      if (p.values.size() != 1) fail(p.name, "value", "missing");
      if (!is_scalar(p.values[0])) fail(p.name, "value", "must be a number, string or boolean");
      break;
  }
  if (p.default_value.is_null()) {
    p.default_value = keras_default(p);
  } else if (!SearchSpace::index_of(p, p.default_value) &&
             !(p.type == Type::kFloat && !p.step && p.default_value.is_number() &&
               p.default_value.get<double>() >= p.min_value && p.default_value.get<double>() <= p.max_value)) {
    fail(p.name, "default", p.default_value.dump() + " is not one of its values");
  }
}

bool contains(const std::vector<Json>& values, const Json& v) {
  return std::find(values.begin(), values.end(), v) != values.end();
}

// Saturating product and sum at 2^63 (size() answers nothing above).
std::uint64_t sat_mul(std::uint64_t a, std::uint64_t b) {
  const unsigned __int128 r = static_cast<unsigned __int128>(a) * b;
  return r > kSizeCap ? kSizeCap : static_cast<std::uint64_t>(r);
}
std::uint64_t sat_add(std::uint64_t a, std::uint64_t b) { return std::min<std::uint64_t>(kSizeCap, a + b); }

}  // namespace

// --- building -------------------------------------------------------------------------------

SearchSpace SearchSpace::from_json(const Json& json) {
  if (!json.is_array()) throw InvalidArgument("search space: must be a JSON list of parameters, got " + json.dump());
  SearchSpace space;
  for (const auto& entry : json) space.add(parse_parameter(entry));
  return space;
}

Json SearchSpace::to_json() const {
  Json out = Json::array();
  for (const auto& p : params_) {
    Json j{{"name", p.name}, {"type", type_name(p.type)}};
    switch (p.type) {
      case Type::kChoice: j["values"] = p.values; j["ordered"] = p.ordered; break;
      case Type::kInt:
      case Type::kFloat:
        j["min_value"] = number_json(p, p.min_value);
        j["max_value"] = number_json(p, p.max_value);
        if (p.step) j["step"] = number_json(p, *p.step);
        j["sampling"] = sampling_name(p.sampling);
        break;
      case Type::kBoolean: break;
      case Type::kFixed: j["value"] = p.values.front(); break;
    }
    j["default"] = p.default_value;
    if (!p.parent_name.empty()) {
      j["parent_name"] = p.parent_name;
      j["parent_values"] = p.parent_values;
    }
    out.push_back(std::move(j));
  }
  return out;
}

SearchSpace& SearchSpace::add(Parameter p) {
  if (p.name.empty()) throw InvalidArgument("search space: a parameter needs a non-empty name");
  for (const auto& q : params_) {
    if (q.name == p.name) fail(p.name, "name", "duplicate parameter name");
  }
  check_parameter(p);
  if (!p.parent_name.empty()) {
    const auto parent = std::find_if(params_.begin(), params_.end(), [&](const Parameter& q) { return q.name == p.parent_name; });
    if (parent == params_.end()) fail(p.name, "parent_name", "'" + p.parent_name + "' is not defined before this parameter");
    if (p.parent_values.empty()) fail(p.name, "parent_values", "must not be empty");
    for (const auto& v : p.parent_values) {
      if (!index_of(*parent, v) && !(parent->type == Type::kFloat && !parent->step && v.is_number())) {
        fail(p.name, "parent_values", v.dump() + " is not a value of '" + p.parent_name + "'");
      }
    }
  }
  params_.push_back(std::move(p));
  return *this;
}

SearchSpace& SearchSpace::Choice(const std::string& name, std::vector<Json> values) {
  Parameter p;
  p.name = name;
  p.type = Type::kChoice;
  p.ordered = !values.empty() && std::all_of(values.begin(), values.end(), [](const Json& v) { return v.is_number(); });
  p.values = std::move(values);
  return add(std::move(p));
}

SearchSpace& SearchSpace::Int(const std::string& name, std::int64_t min_value, std::int64_t max_value, std::int64_t step,
                              Sampling sampling) {
  Parameter p;
  p.name = name;
  p.type = Type::kInt;
  p.min_value = static_cast<double>(min_value);
  p.max_value = static_cast<double>(max_value);
  p.step = static_cast<double>(step);
  p.sampling = sampling;
  return add(std::move(p));
}

SearchSpace& SearchSpace::Float(const std::string& name, double min_value, double max_value, std::optional<double> step,
                                Sampling sampling) {
  Parameter p;
  p.name = name;
  p.type = Type::kFloat;
  p.min_value = min_value;
  p.max_value = max_value;
  p.step = step;
  p.sampling = sampling;
  return add(std::move(p));
}

SearchSpace& SearchSpace::Boolean(const std::string& name) {
  Parameter p;
  p.name = name;
  p.type = Type::kBoolean;
  return add(std::move(p));
}

SearchSpace& SearchSpace::Fixed(const std::string& name, Json value) {
  Parameter p;
  p.name = name;
  p.type = Type::kFixed;
  p.values = {std::move(value)};
  return add(std::move(p));
}

SearchSpace& SearchSpace::conditional_on(const std::string& parent, std::vector<Json> values) {
  if (params_.empty()) throw InvalidArgument("search space: conditional_on needs a parameter added before it");
  Parameter p = params_.back();
  params_.pop_back();
  p.parent_name = parent;
  p.parent_values = std::move(values);
  try {
    return add(std::move(p));
  } catch (...) {
    // Keep the space as it was: the unconditional parameter is put back.
    Parameter q = p;
    q.parent_name.clear();
    q.parent_values.clear();
    params_.push_back(std::move(q));
    throw;
  }
}

const Parameter& SearchSpace::parameter(const std::string& name) const {
  for (const auto& p : params_) {
    if (p.name == name) return p;
  }
  throw NotFound("search space: no parameter '" + name + "'");
}

bool SearchSpace::is_active(const Parameter& p, const Json& values) const {
  if (p.parent_name.empty()) return true;
  const Parameter& parent = parameter(p.parent_name);
  if (!is_active(parent, values)) return false;
  return values.is_object() && values.contains(p.parent_name) && contains(p.parent_values, values.at(p.parent_name));
}

// --- discrete domains -----------------------------------------------------------------------

std::optional<std::uint64_t> SearchSpace::value_count(const Parameter& p) {
  switch (p.type) {
    case Type::kChoice: return p.values.size();
    case Type::kBoolean: return 2;
    case Type::kFixed: return 1;
    case Type::kInt:
      if (int_every_integer(p)) return static_cast<std::uint64_t>(p.max_value - p.min_value) + 1;
      if (multiplicative(p)) return multiplicative_count(p);
      return static_cast<std::uint64_t>((p.max_value - p.min_value) / *p.step) + 1;
    case Type::kFloat:
      if (!p.step) return std::nullopt;
      if (multiplicative(p)) return multiplicative_count(p);
      // The tolerance keeps 0..1 step 0.1 at 11 points despite 1 / 0.1 = 9.999... in binary.
      return static_cast<std::uint64_t>(std::floor((p.max_value - p.min_value) / *p.step + 1e-9)) + 1;
  }
  return std::nullopt;
}

Json SearchSpace::value_at(const Parameter& p, std::uint64_t index) {
  const auto n = value_count(p);
  if (!n) fail(p.name, "step", "a continuous Float has no discrete values");
  if (index >= *n) fail(p.name, "values", "index " + std::to_string(index) + " out of range (" + std::to_string(*n) + " values)");
  switch (p.type) {
    case Type::kChoice:
    case Type::kFixed: return p.values[index];
    case Type::kBoolean: return index == 1;
    case Type::kInt:
    case Type::kFloat: break;
  }
  const double i = static_cast<double>(index);
  const bool last = index + 1 == *n;
  double v = 0;
  if (int_every_integer(p)) {
    v = p.min_value + i;
  } else if (multiplicative(p)) {
    // log: min * step^k, ascending; reverse_log: max + min - min * step^k, listed ascending too
    // (k = n - 1 - index), so that index order is value order for every sampling.
    const std::uint64_t k = p.sampling == Sampling::kLog ? index : *n - 1 - index;
    double m = p.min_value;
    for (std::uint64_t t = 0; t < k; ++t) m *= *p.step;
    v = p.sampling == Sampling::kLog ? m : p.max_value + p.min_value - m;
  } else {
    v = p.min_value + i * *p.step;
  }
  // The last point is max_value itself when the step divides the range (up to rounding).
  if (last && std::abs(v - p.max_value) <= 1e-9 * std::max(1.0, std::abs(p.max_value))) v = p.max_value;
  if (index == 0 && p.sampling != Sampling::kReverseLog) v = p.min_value;
  return number_json(p, v);
}

std::optional<std::uint64_t> SearchSpace::index_of(const Parameter& p, const Json& value) {
  switch (p.type) {
    case Type::kChoice:
    case Type::kFixed: {
      const auto it = std::find(p.values.begin(), p.values.end(), value);
      if (it == p.values.end()) return std::nullopt;
      return static_cast<std::uint64_t>(it - p.values.begin());
    }
    case Type::kBoolean:
      if (!value.is_boolean()) return std::nullopt;
      return value.get<bool>() ? 1 : 0;
    case Type::kInt:
    case Type::kFloat: break;
  }
  if (!value.is_number()) return std::nullopt;
  if (p.type == Type::kInt && !is_integral(value)) return std::nullopt;
  const auto n = value_count(p);
  if (!n) return std::nullopt;
  const double v = value.get<double>();
  const double tol = 1e-9 * std::max(1.0, std::abs(v));
  if (v < p.min_value - tol || v > p.max_value + tol) return std::nullopt;
  std::uint64_t guess = 0;
  if (int_every_integer(p)) {
    guess = static_cast<std::uint64_t>(v - p.min_value);
  } else if (multiplicative(p)) {
    const double m = p.sampling == Sampling::kLog ? v : p.max_value + p.min_value - v;
    const double k = std::round(std::log(m / p.min_value) / std::log(*p.step));
    if (k < 0 || k >= static_cast<double>(*n)) return std::nullopt;
    guess = p.sampling == Sampling::kLog ? static_cast<std::uint64_t>(k) : *n - 1 - static_cast<std::uint64_t>(k);
  } else {
    const double k = std::round((v - p.min_value) / *p.step);
    if (k < 0 || k >= static_cast<double>(*n)) return std::nullopt;
    guess = static_cast<std::uint64_t>(k);
  }
  if (guess >= *n) return std::nullopt;
  const double at = value_at(p, guess).get<double>();
  if (std::abs(at - v) > tol) return std::nullopt;
  return guess;
}

// --- points ---------------------------------------------------------------------------------

Json SearchSpace::sample(std::mt19937_64& rng) const {
  Json out = Json::object();
  for (const auto& p : params_) {
    if (!is_active(p, out)) continue;
    if (p.type == Type::kFloat && !p.step) {
      out[p.name] = unit_to_continuous(p, closed_unit(rng), p.max_value);
    } else if (int_every_integer(p)) {
      // Keras Tuner's Int(step=None, sampling=log): int(value in [min, max + 1)) so that every
      // integer, max_value included, can be drawn with its log-scale share.
      const double x = unit_to_continuous(p, closed_unit(rng), p.max_value + 1);
      out[p.name] = static_cast<std::int64_t>(std::clamp(std::floor(x), p.min_value, p.max_value));
    } else {
      // Keras Tuner draws prob_to_index(uniform, n): uniform over the step grid (over the
      // exponent k for log/reverse_log steps).
      std::uniform_int_distribution<std::uint64_t> d(0, *value_count(p) - 1);
      out[p.name] = value_at(p, d(rng));
    }
  }
  return out;
}

Json SearchSpace::default_values() const {
  Json out = Json::object();
  for (const auto& p : params_) {
    if (is_active(p, out)) out[p.name] = p.default_value;
  }
  return out;
}

std::optional<std::vector<std::uint64_t>> SearchSpace::first_grid_cursor() const {
  // Every parameter is reachable (parent values are checked against the parent's domain), so
  // one continuous parameter makes the grid infinite.
  for (const auto& p : params_) {
    if (!value_count(p)) return std::nullopt;
  }
  return std::vector<std::uint64_t>(params_.size(), 0);
}

bool SearchSpace::next_grid_cursor(std::vector<std::uint64_t>& cursor) const {
  if (cursor.size() != params_.size()) throw InvalidArgument("search space: grid cursor has the wrong length");
  // Which parameters are active at the current point (activity depends on earlier ones only).
  std::vector<bool> active(params_.size());
  Json point = Json::object();
  for (std::size_t i = 0; i < params_.size(); ++i) {
    active[i] = is_active(params_[i], point);
    if (active[i]) point[params_[i].name] = value_at(params_[i], cursor[i]);
  }
  // Odometer: the last active parameter that can advance does; all after it restart at 0.
  for (std::size_t i = params_.size(); i-- > 0;) {
    if (!active[i] || cursor[i] + 1 >= *value_count(params_[i])) continue;
    ++cursor[i];
    std::fill(cursor.begin() + static_cast<std::ptrdiff_t>(i) + 1, cursor.end(), 0);
    return true;
  }
  return false;
}

Json SearchSpace::grid_point(const std::vector<std::uint64_t>& cursor) const {
  if (cursor.size() != params_.size()) throw InvalidArgument("search space: grid cursor has the wrong length");
  Json point = Json::object();
  for (std::size_t i = 0; i < params_.size(); ++i) {
    if (is_active(params_[i], point)) point[params_[i].name] = value_at(params_[i], cursor[i]);
  }
  return point;
}

std::optional<std::vector<Json>> SearchSpace::grid() const {
  const auto n = size();
  if (!n) return std::nullopt;
  if (*n > kMaxGridPoints) {
    throw InvalidArgument("search space: grid of " + std::to_string(*n) + " points is above the " +
                          std::to_string(kMaxGridPoints) + " that grid() lists; enumerate with grid cursors");
  }
  std::vector<Json> out;
  auto cursor = first_grid_cursor();
  if (!cursor) return std::nullopt;
  do {
    out.push_back(grid_point(*cursor));
  } while (next_grid_cursor(*cursor));
  return out;
}

std::optional<std::uint64_t> SearchSpace::size() const {
  // Counts points depth first over the parameters that other parameters depend on; the values
  // of a parent that no child lists all lead to the same sub-space and are counted once,
  // weighted. Returns kSizeCap for an infinite (continuous) branch.
  std::vector<bool> is_parent(params_.size(), false);
  std::vector<std::vector<Json>> listed(params_.size());
  for (const auto& p : params_) {
    if (p.parent_name.empty()) continue;
    for (std::size_t i = 0; i < params_.size(); ++i) {
      if (params_[i].name != p.parent_name) continue;
      is_parent[i] = true;
      for (const auto& v : p.parent_values) {
        if (!contains(listed[i], v) && index_of(params_[i], v)) listed[i].push_back(v);
      }
    }
  }
  std::function<std::uint64_t(std::size_t, Json&)> count = [&](std::size_t i, Json& point) -> std::uint64_t {
    if (i == params_.size()) return 1;
    const Parameter& p = params_[i];
    if (!is_active(p, point)) return count(i + 1, point);
    const auto n = value_count(p);
    if (!n) return kSizeCap;
    if (!is_parent[i]) return sat_mul(*n, count(i + 1, point));
    std::uint64_t total = 0;
    for (const auto& v : listed[i]) {
      point[p.name] = v;
      total = sat_add(total, count(i + 1, point));
    }
    if (*n > listed[i].size()) {
      point[p.name] = nullptr;  // stands for every value that no child lists
      total = sat_add(total, sat_mul(*n - listed[i].size(), count(i + 1, point)));
    }
    point.erase(p.name);
    return total;
  };
  Json point = Json::object();
  const std::uint64_t n = count(0, point);
  if (n >= kSizeCap) return std::nullopt;
  return n;
}

// --- unit cube ------------------------------------------------------------------------------

std::vector<double> SearchSpace::to_unit(const Json& values) const {
  validate(values);
  std::vector<double> unit(params_.size(), 0.5);
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const Parameter& p = params_[i];
    if (!is_active(p, values)) continue;
    const Json& v = values.at(p.name);
    if (p.type == Type::kFloat && !p.step) {
      unit[i] = continuous_to_unit(p, v.get<double>(), p.max_value);
    } else if (int_every_integer(p)) {
      // Keras Tuner's Int.value_to_prob without step: value + 0.5 on the [min, max + 1) scale.
      unit[i] = continuous_to_unit(p, v.get<double>() + 0.5, p.max_value + 1);
    } else {
      unit[i] = index_to_unit(*index_of(p, v), *value_count(p));
    }
  }
  return unit;
}

Json SearchSpace::from_unit(const std::vector<double>& unit) const {
  if (unit.size() != params_.size()) {
    throw InvalidArgument("search space: from_unit needs " + std::to_string(params_.size()) + " coordinates, got " +
                          std::to_string(unit.size()));
  }
  Json out = Json::object();
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const Parameter& p = params_[i];
    if (!is_active(p, out)) continue;
    const double u = std::isnan(unit[i]) ? 0.5 : std::clamp(unit[i], 0.0, 1.0);
    if (p.type == Type::kFloat && !p.step) {
      out[p.name] = unit_to_continuous(p, u, p.max_value);
    } else if (int_every_integer(p)) {
      const double x = unit_to_continuous(p, u, p.max_value + 1);
      out[p.name] = static_cast<std::int64_t>(std::clamp(std::floor(x), p.min_value, p.max_value));
    } else {
      out[p.name] = value_at(p, unit_to_index(u, *value_count(p)));
    }
  }
  return out;
}

void SearchSpace::validate(const Json& values) const {
  if (!values.is_object()) throw InvalidArgument("hyperparameters: must be a JSON object, got " + values.dump());
  for (const auto& [key, value] : values.items()) {
    if (key.rfind("tuner/", 0) == 0) continue;
    const bool known = std::any_of(params_.begin(), params_.end(), [&](const Parameter& p) { return p.name == key; });
    if (!known) throw InvalidArgument("hyperparameters: '" + key + "' is not a parameter of the search space");
  }
  for (const auto& p : params_) {
    const bool active = is_active(p, values);
    if (!active) {
      if (values.contains(p.name)) {
        throw InvalidArgument("hyperparameters: '" + p.name + "' is inactive (needs " + p.parent_name + " in " +
                              Json(p.parent_values).dump() + ") and must be left out");
      }
      continue;
    }
    if (!values.contains(p.name)) throw InvalidArgument("hyperparameters: '" + p.name + "' is missing");
    const Json& v = values.at(p.name);
    bool ok = false;
    if (p.type == Type::kFloat && !p.step) {
      ok = v.is_number() && v.get<double>() >= p.min_value && v.get<double>() <= p.max_value;
    } else {
      ok = index_of(p, v).has_value();
    }
    if (!ok) {
      std::ostringstream domain;
      if (p.type == Type::kInt || p.type == Type::kFloat) {
        domain << type_name(p.type) << " in [" << Json(p.min_value).dump() << ", " << Json(p.max_value).dump() << "]";
        if (p.step) domain << " step " << Json(*p.step).dump() << " (" << sampling_name(p.sampling) << ")";
      } else {
        domain << "one of " << (p.type == Type::kBoolean ? std::string("[false,true]") : Json(p.values).dump());
      }
      throw InvalidArgument("hyperparameters: '" + p.name + "' = " + v.dump() + " is not " + domain.str());
    }
  }
}

}  // namespace tensorhub
