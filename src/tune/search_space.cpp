// SearchSpace: an ordered list of Keras Tuner parameters (parameter_types.h) with conditional
// parameters (keras_tuner conditions.Parent: active while the parent is active and has one of
// the values), and what is built on the points: sampling, grids, sizes, the unit cube.
#include "tensorhub/tune/search_space.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "parameter_types.h"
#include "tensorhub/core/error.h"

namespace tensorhub {
namespace {

constexpr std::uint64_t kMaxGridPoints = 1'000'000;
constexpr std::uint64_t kSizeCap = std::uint64_t{1} << 63;

[[noreturn]] void fail(const std::string& param, const std::string& field, const std::string& what) {
  throw InvalidArgument("search space: parameter '" + param + "', field '" + field + "': " + what);
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
  for (const auto& entry : json) space.add(detail::parse_parameter(entry));
  return space;
}

Json SearchSpace::to_json() const {
  Json out = Json::array();
  for (const auto& p : params_) out.push_back(p->to_json());
  return out;
}

SearchSpace& SearchSpace::add(std::unique_ptr<Parameter> p) {
  if (p->name.empty()) throw InvalidArgument("search space: a parameter needs a non-empty name");
  for (const auto& q : params_) {
    if (q->name == p->name) fail(p->name, "name", "duplicate parameter name");
  }
  p->check();
  if (!p->parent_name.empty()) {
    const auto parent =
        std::find_if(params_.begin(), params_.end(), [&](const auto& q) { return q->name == p->parent_name; });
    if (parent == params_.end()) fail(p->name, "parent_name", "'" + p->parent_name + "' is not defined before this parameter");
    if (p->parent_values.empty()) fail(p->name, "parent_values", "must not be empty");
    for (const auto& v : p->parent_values) {
      // A continuous parent (a Float without step) takes any number as a parent value.
      if (!(*parent)->index_of(v) && !(!(*parent)->count() && v.is_number())) {
        fail(p->name, "parent_values", v.dump() + " is not a value of '" + p->parent_name + "'");
      }
    }
  }
  params_.push_back(std::move(p));
  return *this;
}

SearchSpace& SearchSpace::Choice(const std::string& name, std::vector<Json> values) {
  return add(std::make_unique<detail::ChoiceParameter>(name, std::move(values)));
}

SearchSpace& SearchSpace::Int(const std::string& name, std::int64_t min_value, std::int64_t max_value, std::int64_t step,
                              Sampling sampling) {
  return add(std::make_unique<detail::IntParameter>(name, static_cast<double>(min_value),
                                                    static_cast<double>(max_value), static_cast<double>(step),
                                                    sampling));
}

SearchSpace& SearchSpace::Float(const std::string& name, double min_value, double max_value, std::optional<double> step,
                                Sampling sampling) {
  return add(std::make_unique<detail::FloatParameter>(name, min_value, max_value, step, sampling));
}

SearchSpace& SearchSpace::Boolean(const std::string& name) {
  return add(std::make_unique<detail::BooleanParameter>(name));
}

SearchSpace& SearchSpace::Fixed(const std::string& name, Json value) {
  return add(std::make_unique<detail::FixedParameter>(name, std::move(value)));
}

SearchSpace& SearchSpace::conditional_on(const std::string& parent, std::vector<Json> values) {
  if (params_.empty()) throw InvalidArgument("search space: conditional_on needs a parameter added before it");
  const std::shared_ptr<const Parameter> before = params_.back();
  std::unique_ptr<Parameter> p = before->clone();
  params_.pop_back();
  p->parent_name = parent;
  p->parent_values = std::move(values);
  try {
    return add(std::move(p));
  } catch (...) {
    params_.push_back(before);  // keep the space as it was
    throw;
  }
}

const Parameter& SearchSpace::parameter(const std::string& name) const {
  for (const auto& p : params_) {
    if (p->name == name) return *p;
  }
  throw NotFound("search space: no parameter '" + name + "'");
}

bool SearchSpace::is_active(const Parameter& p, const Json& values) const {
  if (p.parent_name.empty()) return true;
  const Parameter& parent = parameter(p.parent_name);
  if (!is_active(parent, values)) return false;
  return values.is_object() && values.contains(p.parent_name) && contains(p.parent_values, values.at(p.parent_name));
}

// --- points ---------------------------------------------------------------------------------

Json SearchSpace::sample(std::mt19937_64& rng) const {
  Json out = Json::object();
  for (const auto& p : params_) {
    if (is_active(*p, out)) out[p->name] = p->sample(rng);
  }
  return out;
}

Json SearchSpace::default_values() const {
  Json out = Json::object();
  for (const auto& p : params_) {
    if (is_active(*p, out)) out[p->name] = p->default_value;
  }
  return out;
}

std::optional<std::vector<std::uint64_t>> SearchSpace::first_grid_cursor() const {
  // Every parameter is reachable (parent values are checked against the parent's domain), so
  // one continuous parameter makes the grid infinite.
  for (const auto& p : params_) {
    if (!p->count()) return std::nullopt;
  }
  return std::vector<std::uint64_t>(params_.size(), 0);
}

bool SearchSpace::next_grid_cursor(std::vector<std::uint64_t>& cursor) const {
  if (cursor.size() != params_.size()) throw InvalidArgument("search space: grid cursor has the wrong length");
  // Which parameters are active at the current point (activity depends on earlier ones only).
  std::vector<bool> active(params_.size());
  Json point = Json::object();
  for (std::size_t i = 0; i < params_.size(); ++i) {
    active[i] = is_active(*params_[i], point);
    if (active[i]) point[params_[i]->name] = params_[i]->value_at(cursor[i]);
  }
  // Odometer: the last active parameter that can advance does; all after it restart at 0.
  for (std::size_t i = params_.size(); i-- > 0;) {
    if (!active[i] || cursor[i] + 1 >= *params_[i]->count()) continue;
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
    if (is_active(*params_[i], point)) point[params_[i]->name] = params_[i]->value_at(cursor[i]);
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
    if (p->parent_name.empty()) continue;
    for (std::size_t i = 0; i < params_.size(); ++i) {
      if (params_[i]->name != p->parent_name) continue;
      is_parent[i] = true;
      for (const auto& v : p->parent_values) {
        if (!contains(listed[i], v) && params_[i]->index_of(v)) listed[i].push_back(v);
      }
    }
  }
  std::function<std::uint64_t(std::size_t, Json&)> count = [&](std::size_t i, Json& point) -> std::uint64_t {
    if (i == params_.size()) return 1;
    const Parameter& p = *params_[i];
    if (!is_active(p, point)) return count(i + 1, point);
    const auto n = p.count();
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
    if (is_active(*params_[i], values)) unit[i] = params_[i]->to_unit(values.at(params_[i]->name));
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
    const Parameter& p = *params_[i];
    if (!is_active(p, out)) continue;
    out[p.name] = p.from_unit(std::isnan(unit[i]) ? 0.5 : std::clamp(unit[i], 0.0, 1.0));
  }
  return out;
}

void SearchSpace::validate(const Json& values) const {
  if (!values.is_object()) throw InvalidArgument("hyperparameters: must be a JSON object, got " + values.dump());
  for (const auto& item : values.items()) {
    const std::string& key = item.key();
    if (key.rfind("tuner/", 0) == 0) continue;
    const bool known = std::any_of(params_.begin(), params_.end(), [&](const auto& p) { return p->name == key; });
    if (!known) throw InvalidArgument("hyperparameters: '" + key + "' is not a parameter of the search space");
  }
  for (const auto& p : params_) {
    if (!is_active(*p, values)) {
      if (values.contains(p->name)) {
        throw InvalidArgument("hyperparameters: '" + p->name + "' is inactive (needs " + p->parent_name + " in " +
                              Json(p->parent_values).dump() + ") and must be left out");
      }
      continue;
    }
    if (!values.contains(p->name)) throw InvalidArgument("hyperparameters: '" + p->name + "' is missing");
    const Json& v = values.at(p->name);
    if (!p->contains(v)) {
      throw InvalidArgument("hyperparameters: '" + p->name + "' = " + v.dump() + " is not " + p->domain_text());
    }
  }
}

}  // namespace tensorhub
