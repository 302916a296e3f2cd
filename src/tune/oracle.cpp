// Oracle base: trial bookkeeping, ranking and the common state, as Keras Tuner's Oracle
// (keras_tuner/engine/oracle.py: create_trial, update_trial, end_trial, get_best_trials,
// get_state/set_state), plus make_oracle() and the helpers the oracles share (oracles.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <utility>

#include "oracles.h"
#include "tensorhub/core/error.h"
#include "tensorhub/tune/oracle.h"
#include "tensorhub/tune/pareto.h"

namespace tensorhub {
namespace {

constexpr int kMaxCollisions = 20;                    // keras_tuner Oracle._max_collisions
constexpr std::uint64_t kEnumerateLimit = 1'000'000;  // finite spaces listed after collisions

bool finite_score(const std::optional<double>& s) { return s && std::isfinite(*s); }

const Json& field(const Json& j, const char* name, const char* what) {
  if (!j.is_object() || !j.contains(name)) {
    throw InvalidArgument(std::string(what) + ": field '" + name + "' is missing");
  }
  return j.at(name);
}

template <typename T>
T typed_field(const Json& j, const char* name, const char* what) {
  const Json& v = field(j, name, what);
  try {
    return v.get<T>();
  } catch (const Json::exception&) {
    throw InvalidArgument(std::string(what) + ": field '" + name + "' has the wrong type: " + v.dump());
  }
}

}  // namespace

// --- TrialStatus, Trial -----------------------------------------------------------------------

// Each status with its name in stored states, in the order the error message lists them.
constexpr std::pair<TrialStatus, const char*> kTrialStatusNames[] = {{TrialStatus::kRunning, "running"},
                                                                     {TrialStatus::kCompleted, "completed"},
                                                                     {TrialStatus::kStopped, "stopped"},
                                                                     {TrialStatus::kFailed, "failed"},
                                                                     {TrialStatus::kPruned, "pruned"}};

std::string to_string(TrialStatus s) {
  for (const auto& [status, name] : kTrialStatusNames)
    if (status == s) return name;
  return "?";
}

TrialStatus trial_status_from_string(const std::string& s) {
  for (const auto& [status, name] : kTrialStatusNames)
    if (s == name) return status;
  throw InvalidArgument("trial status '" + s + "': must be one of running, completed, stopped, failed, pruned");
}

Json Trial::to_json() const {
  Json j{{"trial_id", trial_id}, {"hyper_parameters", hyper_parameters}, {"status", to_string(status)}};
  j["score"] = finite_score(score) ? Json(*score) : Json(nullptr);
  Json epochs = Json::object();
  // JSON has no NaN: a NaN epoch value is written as null and read back as NaN.
  for (const auto& [epoch, value] : epoch_values) epochs[std::to_string(epoch)] = std::isfinite(value) ? Json(value) : Json(nullptr);
  j["epoch_values"] = std::move(epochs);
  if (!values.empty()) {
    Json v = Json::array();
    for (double x : values) v.push_back(std::isfinite(x) ? Json(x) : Json(nullptr));
    j["values"] = std::move(v);
  }
  return j;
}

Trial Trial::from_json(const Json& j) {
  if (!j.is_object()) throw InvalidArgument("trial: must be a JSON object, got " + j.dump());
  Trial t;
  t.trial_id = typed_field<std::string>(j, "trial_id", "trial");
  t.hyper_parameters = field(j, "hyper_parameters", "trial");
  if (!t.hyper_parameters.is_object()) throw InvalidArgument("trial " + t.trial_id + ": field 'hyper_parameters' must be an object");
  t.status = trial_status_from_string(typed_field<std::string>(j, "status", "trial"));
  if (j.contains("score") && !j["score"].is_null()) {
    if (!j["score"].is_number()) throw InvalidArgument("trial " + t.trial_id + ": field 'score' must be a number or null");
    t.score = j["score"].get<double>();
  }
  if (j.contains("epoch_values")) {
    const Json& e = j["epoch_values"];
    if (!e.is_object()) throw InvalidArgument("trial " + t.trial_id + ": field 'epoch_values' must be an object");
    for (const auto& [key, value] : e.items()) {
      int epoch = 0;
      std::size_t used = 0;
      try {
        epoch = std::stoi(key, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != key.size() || key.empty()) {
        throw InvalidArgument("trial " + t.trial_id + ": field 'epoch_values': key '" + key + "' is not an epoch number");
      }
      if (!value.is_null() && !value.is_number()) {
        throw InvalidArgument("trial " + t.trial_id + ": field 'epoch_values': epoch " + key + " must be a number or null");
      }
      t.epoch_values[epoch] = value.is_null() ? std::nan("") : value.get<double>();
    }
  }
  if (j.contains("values")) {
    const Json& v = j["values"];
    if (!v.is_array()) throw InvalidArgument("trial " + t.trial_id + ": field 'values' must be a list");
    for (const auto& x : v) {
      if (!x.is_null() && !x.is_number()) throw InvalidArgument("trial " + t.trial_id + ": field 'values' holds " + x.dump());
      t.values.push_back(x.is_null() ? std::nan("") : x.get<double>());
    }
  }
  return t;
}

// --- shared helpers (oracles.h) ---------------------------------------------------------------

Json options_to_json(const OracleOptions& o, const std::string& oracle) {
  Json j{{"objective", o.objective.to_string()},
              {"max_trials", o.max_trials},
              {"seed", o.seed},
              {"max_epochs", o.max_epochs},
              {"min_epochs", o.min_epochs},
              {"factor", o.factor},
              {"hyperband_iterations", o.hyperband_iterations},
              {"num_initial_points", o.num_initial_points},
              {"acquisition", o.acquisition},
              {"alpha", o.alpha},
              {"beta", o.beta}};
  // Written only where they are used, so that a stored search of one objective and another
  // oracle reads as it did before they existed.
  if (o.multi_objective()) j["objectives"] = objectives_to_string(o.objectives);
  if (oracle == "nsga2" || oracle == "*") {
    j["population_size"] = o.population_size;
    j["mutation_prob"] = o.mutation_prob;
    j["crossover_prob"] = o.crossover_prob;
    j["swapping_prob"] = o.swapping_prob;
  }
  if (oracle == "pbt" || oracle == "*") {
    j["population"] = o.population;
    j["perturbation_interval"] = o.perturbation_interval;
    j["quantile"] = o.quantile;
    j["resample_probability"] = o.resample_probability;
  }
  return j;
}

OracleOptions options_from_json(const Json& j) {
  const char* what = "oracle options";
  OracleOptions o;
  o.objective = Objective::parse(typed_field<std::string>(j, "objective", what));
  o.max_trials = typed_field<int>(j, "max_trials", what);
  o.seed = typed_field<std::uint64_t>(j, "seed", what);
  o.max_epochs = typed_field<int>(j, "max_epochs", what);
  o.min_epochs = typed_field<int>(j, "min_epochs", what);
  o.factor = typed_field<int>(j, "factor", what);
  o.hyperband_iterations = typed_field<int>(j, "hyperband_iterations", what);
  o.num_initial_points = typed_field<int>(j, "num_initial_points", what);
  o.acquisition = typed_field<std::string>(j, "acquisition", what);
  o.alpha = typed_field<double>(j, "alpha", what);
  o.beta = typed_field<double>(j, "beta", what);
  if (j.contains("objectives")) o.objectives = parse_objectives(typed_field<std::string>(j, "objectives", what));
  if (j.contains("population_size")) {
    o.population_size = typed_field<int>(j, "population_size", what);
    o.mutation_prob = typed_field<double>(j, "mutation_prob", what);
    o.crossover_prob = typed_field<double>(j, "crossover_prob", what);
    o.swapping_prob = typed_field<double>(j, "swapping_prob", what);
  }
  if (j.contains("population")) {
    o.population = typed_field<int>(j, "population", what);
    o.perturbation_interval = typed_field<int>(j, "perturbation_interval", what);
    o.quantile = typed_field<double>(j, "quantile", what);
    o.resample_probability = typed_field<double>(j, "resample_probability", what);
  }
  return o;
}

void check_probability(double p, const char* oracle, const char* name) {
  if (!(p >= 0 && p <= 1))
    throw InvalidArgument(std::string("oracle ") + oracle + ": " + name + " must be in [0, 1], got " + std::to_string(p));
}

std::string rng_state(const std::mt19937_64& rng) {
  std::ostringstream out;
  out << rng;
  return out.str();
}

SeededOracle::SeededOracle(std::string name, SearchSpace space, OracleOptions options)
    : Oracle(std::move(space), std::move(options)), name_(std::move(name)) {
  rng_.seed(options_.seed);
}

Json SeededOracle::get_state() const {
  Json state = Oracle::get_state();
  state["oracle"] = name_;
  state["rng"] = rng_state(rng_);
  return state;
}

void SeededOracle::set_state(const Json& state) {
  Oracle::set_state(state);
  restore_rng(state, rng_);
}

bool SeededOracle::stop_at_max_trials(TrialRequest& r) const {
  if (!max_trials_reached()) return false;
  r.reason = "max_trials (" + std::to_string(options_.max_trials) + ") reached";
  return true;
}

void restore_rng(const Json& oracle_state, std::mt19937_64& rng) {
  if (!oracle_state.contains("rng") || !oracle_state["rng"].is_string())
    throw InvalidArgument("oracle state: field 'rng' is missing");
  set_rng_state(rng, oracle_state["rng"].get<std::string>());
}

void set_rng_state(std::mt19937_64& rng, const std::string& state) {
  std::istringstream in(state);
  std::mt19937_64 restored;
  in >> restored;
  if (in.fail()) throw InvalidArgument("oracle state: field 'rng' is not a mt19937_64 state");
  rng = restored;
}

std::string point_key(const Json& hyper_parameters) {
  Json point = Json::object();
  for (const auto& [key, value] : hyper_parameters.items()) {
    if (key.rfind("tuner/", 0) != 0) point[key] = value;
  }
  return point.dump();
}

std::optional<Json> random_untried_point(const SearchSpace& space, std::mt19937_64& rng, const std::set<std::string>& tried,
                                         std::string* reason) {
  const auto size = space.size();
  if (size && tried.size() >= *size) {
    if (reason) *reason = "all " + std::to_string(*size) + " points of the search space have been tried";
    return std::nullopt;
  }
  for (int attempt = 0; attempt < kMaxCollisions; ++attempt) {
    Json point = space.sample(rng);
    if (!tried.count(point.dump())) return point;
  }
  if (size && *size <= kEnumerateLimit) {
    // A nearly used-up finite space: list what is left and draw from it.
    std::vector<Json> left;
    auto grid = space.grid();  // kept alive: ranging over *space.grid() would dangle
    for (auto& point : *grid) {
      if (!tried.count(point.dump())) left.push_back(std::move(point));
    }
    if (!left.empty()) {
      std::uniform_int_distribution<std::size_t> pick(0, left.size() - 1);
      return left[pick(rng)];
    }
    if (reason) *reason = "all " + std::to_string(*size) + " points of the search space have been tried";
    return std::nullopt;
  }
  if (reason) {
    *reason = std::to_string(kMaxCollisions) + " random draws in a row gave points already tried (Keras Tuner's limit); "
              "the space looks used up";
  }
  return std::nullopt;
}

// --- Oracle -----------------------------------------------------------------------------------

Oracle::Oracle(SearchSpace space, OracleOptions options) : space_(std::move(space)), options_(std::move(options)) {
  if (options_.seed == 0) {
    // 0 asks for a random seed; the one drawn is kept in the options and so in the state.
    std::random_device device;
    options_.seed = (static_cast<std::uint64_t>(device()) << 32 | device()) | 1;
  }
}

Oracle::~Oracle() = default;

bool Oracle::report(const std::string& trial_id, int epoch, double value) {
  Trial& t = trial(trial_id);
  if (t.status != TrialStatus::kRunning) return true;  // a late report of an ended trial
  t.epoch_values[epoch] = value;
  return true;
}

void Oracle::end_trial(const std::string& trial_id, TrialStatus status, std::optional<double> score) {
  Trial& t = trial(trial_id);
  if (t.status != TrialStatus::kRunning) return;  // replayed after a restart: already ended
  if (status == TrialStatus::kRunning) {
    throw InvalidArgument("end_trial " + trial_id + ": status must be completed, stopped, failed or pruned, not running");
  }
  if (status == TrialStatus::kPruned) {
    t.status = status;
    t.score = finite_score(score) ? score : std::nullopt;
    return;
  }
  if (status == TrialStatus::kFailed || !finite_score(score)) {
    t.status = TrialStatus::kFailed;
    t.score.reset();
    return;
  }
  t.status = status;
  t.score = score;
}

void Oracle::end_trial(const std::string& trial_id, TrialStatus status, const std::vector<double>& values) {
  const auto objectives = options_.all_objectives();
  if (values.size() != objectives.size())
    throw InvalidArgument("end_trial " + trial_id + ": " + std::to_string(values.size()) + " values for " +
                          std::to_string(objectives.size()) + " objectives (" + objectives_to_string(objectives) + ")");
  Trial& t = trial(trial_id);
  if (t.status != TrialStatus::kRunning) return;  // replayed after a restart: already ended
  const bool finite = std::all_of(values.begin(), values.end(), [](double v) { return std::isfinite(v); });
  end_trial(trial_id, finite ? status : TrialStatus::kFailed, values.front());  // never empty: one objective at least
  if (t.status != TrialStatus::kFailed) t.values = values;
}

std::vector<Trial> Oracle::pareto_front() const {
  const auto objectives = options_.all_objectives();
  std::vector<const Trial*> completed;
  std::vector<std::vector<double>> points;
  for (const auto& [id, t] : trials_) {
    if (t.status != TrialStatus::kCompleted || !finite_score(t.score)) continue;
    completed.push_back(&t);
    points.push_back(t.values.empty() ? std::vector<double>{*t.score} : t.values);
  }
  std::vector<Trial> front;
  if (points.empty()) return front;
  const auto fronts = non_dominated_fronts(points, objectives);  // kept: a range-for over .front() of a temporary dangles
  for (std::size_t i : fronts.front()) front.push_back(*completed[i]);
  std::stable_sort(front.begin(), front.end(),
                   [&](const Trial& a, const Trial& b) { return options_.objective.better(*a.score, *b.score); });
  return front;
}

Json Oracle::get_state() const {
  Json trials = Json::array();
  for (const auto& [id, t] : trials_) trials.push_back(t.to_json());
  return Json{{"space", space_.to_json()},
              {"options", options_to_json(options_, "*")},
              {"trials", std::move(trials)},
              {"next_id", next_id_}};
}

void Oracle::set_state(const Json& state) {
  if (!state.is_object()) throw InvalidArgument("oracle state: must be a JSON object");
  SearchSpace space = SearchSpace::from_json(field(state, "space", "oracle state"));
  OracleOptions options = options_from_json(field(state, "options", "oracle state"));
  const Json& list = field(state, "trials", "oracle state");
  if (!list.is_array()) throw InvalidArgument("oracle state: field 'trials' must be a list");
  std::map<std::string, Trial> trials;
  for (const auto& j : list) {
    Trial t = Trial::from_json(j);
    trials[t.trial_id] = std::move(t);
  }
  const auto next_id = typed_field<std::uint64_t>(state, "next_id", "oracle state");
  space_ = std::move(space);
  options_ = std::move(options);
  trials_ = std::move(trials);
  next_id_ = next_id;
}

std::vector<Trial> Oracle::best_trials(std::size_t n) const {
  std::vector<Trial> ranked;
  for (const auto& [id, t] : trials_) {
    if ((t.status == TrialStatus::kCompleted || t.status == TrialStatus::kStopped) && finite_score(t.score)) {
      ranked.push_back(t);
    }
  }
  // Stable: equal scores keep trial-id (creation) order.
  std::stable_sort(ranked.begin(), ranked.end(),
                   [&](const Trial& a, const Trial& b) { return options_.objective.better(*a.score, *b.score); });
  if (n > 0 && ranked.size() > n) ranked.resize(n);
  return ranked;
}

Trial& Oracle::new_trial(Json hyper_parameters) {
  char id[32];
  std::snprintf(id, sizeof id, "%04llu", static_cast<unsigned long long>(next_id_++));
  Trial t;
  t.trial_id = id;
  t.hyper_parameters = std::move(hyper_parameters);
  auto [it, inserted] = trials_.emplace(t.trial_id, std::move(t));
  if (!inserted) throw Internal("oracle: trial id " + it->first + " used twice");
  return it->second;
}

Trial& Oracle::trial(const std::string& trial_id) {
  const auto it = trials_.find(trial_id);
  if (it == trials_.end()) throw NotFound("oracle: no trial '" + trial_id + "'");
  return it->second;
}

bool Oracle::max_trials_reached() const {
  return options_.max_trials > 0 && trials_.size() >= static_cast<std::size_t>(options_.max_trials);
}

// --- make_oracle ------------------------------------------------------------------------------

namespace {

void check_options(const OracleOptions& o) {
  if (o.max_trials < 0) throw InvalidArgument("oracle: max_trials must be >= 0 (0 = no limit), got " + std::to_string(o.max_trials));
  if (o.max_epochs < 1) throw InvalidArgument("oracle: max_epochs must be >= 1, got " + std::to_string(o.max_epochs));
  if (o.min_epochs < 1 || o.min_epochs > o.max_epochs) {
    throw InvalidArgument("oracle: min_epochs must be in [1, max_epochs = " + std::to_string(o.max_epochs) + "], got " +
                          std::to_string(o.min_epochs));
  }
  if (o.factor < 2) throw InvalidArgument("oracle: factor must be an integer >= 2, got " + std::to_string(o.factor));
  if (o.hyperband_iterations < 1) {
    throw InvalidArgument("oracle: hyperband_iterations must be >= 1, got " + std::to_string(o.hyperband_iterations));
  }
  if (!o.objectives.empty() && o.objectives.front().to_string() != o.objective.to_string())
    throw InvalidArgument("oracle: the first of the objectives (" + o.objectives.front().to_string() +
                          ") must be the objective (" + o.objective.to_string() + ")");
}

// The oracles that rank by one score: several objectives would be searched as the first alone.
void check_single_objective(const std::string& name, const OracleOptions& o) {
  if (!o.multi_objective()) return;
  throw InvalidArgument("oracle '" + name + "' optimises one objective; for several (" + objectives_to_string(o.objectives) +
                        ") use nsga2, random or grid");
}

}  // namespace

std::unique_ptr<Oracle> make_oracle(const std::string& name, SearchSpace space, OracleOptions options) {
  check_options(options);
  if (name == "grid") return make_grid_oracle(std::move(space), std::move(options));
  if (name == "random") return make_random_oracle(std::move(space), std::move(options));
  if (name == "nsga2") return make_nsga2_oracle(std::move(space), std::move(options));
  if (name == "hyperband" || name == "asha" || name == "bayesian" || name == "pbt") check_single_objective(name, options);
  if (name == "pbt") return make_pbt_oracle(std::move(space), std::move(options));
  if (name == "hyperband") return make_hyperband_oracle(std::move(space), std::move(options));
  if (name == "asha") return make_asha_oracle(std::move(space), std::move(options));
  if (name == "bayesian") return make_bayesian_oracle(std::move(space), std::move(options));
  throw InvalidArgument("oracle '" + name + "': must be one of grid, random, hyperband, bayesian, asha, nsga2, pbt");
}

}  // namespace tensorhub
