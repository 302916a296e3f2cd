// Optuna's percentile and median pruners over the trials' epoch values (tune/pruner.h).
#include "tensorhub/tune/pruner.h"

#include <algorithm>
#include <cmath>

#include "tensorhub/core/error.h"

namespace tensorhub {
namespace {

// Optuna's _is_first_in_interval_step: the check runs at the first step reported at or after
// each multiple of interval_steps past the warm-up, so a trial reporting every other epoch
// is still checked once per interval.
bool first_in_interval(int step, const std::map<int, double>& steps, int warmup, int interval) {
  const int nearest_lower = (step - warmup) / interval * interval + warmup;
  int second_last = -1;
  for (const auto& [s, value] : steps)
    if (s > second_last && s != step) second_last = s;
  return second_last < nearest_lower;
}

// The trial's best value over its steps, NaNs ignored; NaN when every value is NaN.
double best_so_far(const Trial& trial, const Objective& objective) {
  double best = std::nan("");
  for (const auto& [step, value] : trial.epoch_values) {
    if (std::isnan(value)) continue;
    if (std::isnan(best) || objective.better(value, best)) best = value;
  }
  return best;
}

}  // namespace

Json PrunerOptions::to_json() const {
  if (!enabled()) return nullptr;
  return {{"name", name},
          {"percentile", percentile},
          {"n_startup_trials", n_startup_trials},
          {"n_warmup_steps", n_warmup_steps},
          {"interval_steps", interval_steps},
          {"n_min_trials", n_min_trials}};
}

PrunerOptions PrunerOptions::from_json(const Json& j) {
  PrunerOptions o;
  if (j.is_null()) return o;
  if (!j.is_object()) throw InvalidArgument("pruner: must be a JSON object or null, got " + j.dump());
  auto get = [&](const char* key, auto& out) {
    if (!j.contains(key)) throw InvalidArgument(std::string("pruner: field '") + key + "' is missing");
    try {
      j.at(key).get_to(out);
    } catch (const Json::exception&) {
      throw InvalidArgument(std::string("pruner: field '") + key + "' has the wrong type: " + j.at(key).dump());
    }
  };
  get("name", o.name);
  get("percentile", o.percentile);
  get("n_startup_trials", o.n_startup_trials);
  get("n_warmup_steps", o.n_warmup_steps);
  get("interval_steps", o.interval_steps);
  get("n_min_trials", o.n_min_trials);
  o.check();
  return o;
}

void PrunerOptions::check() const {
  if (name != "none" && name != "median" && name != "percentile")
    throw InvalidArgument("pruner '" + name + "': must be none, median or percentile");
  if (name == "median" && percentile != 50)
    throw InvalidArgument("the median pruner's percentile is 50; use the percentile pruner for " + std::to_string(percentile));
  if (!(percentile >= 0 && percentile <= 100))
    throw InvalidArgument("pruner: percentile must be in [0, 100], got " + std::to_string(percentile));
  if (n_startup_trials < 0)
    throw InvalidArgument("pruner: n_startup_trials must be >= 0, got " + std::to_string(n_startup_trials));
  if (n_warmup_steps < 0) throw InvalidArgument("pruner: n_warmup_steps must be >= 0, got " + std::to_string(n_warmup_steps));
  if (interval_steps < 1) throw InvalidArgument("pruner: interval_steps must be >= 1, got " + std::to_string(interval_steps));
  if (n_min_trials < 1) throw InvalidArgument("pruner: n_min_trials must be >= 1, got " + std::to_string(n_min_trials));
}

double linear_percentile(std::vector<double> values, double q) {
  if (values.empty()) throw InvalidArgument("percentile of no values");
  std::sort(values.begin(), values.end());
  const double rank = q / 100.0 * static_cast<double>(values.size() - 1);
  const auto below = static_cast<std::size_t>(std::floor(rank));
  const std::size_t above = std::min(below + 1, values.size() - 1);
  const double frac = rank - static_cast<double>(below);
  return values[below] + (values[above] - values[below]) * frac;
}

bool should_prune(const PrunerOptions& o, const Objective& objective, const Trial& trial,
                  const std::map<std::string, Trial>& trials) {
  if (!o.enabled() || trial.status != TrialStatus::kRunning || trial.epoch_values.empty()) return false;
  std::vector<const Trial*> completed;
  for (const auto& [id, t] : trials)
    if (t.status == TrialStatus::kCompleted) completed.push_back(&t);
  if (completed.empty() || static_cast<int>(completed.size()) < o.n_startup_trials) return false;
  const int step = trial.epoch_values.rbegin()->first;  // the last reported step
  if (step < o.n_warmup_steps) return false;
  if (!first_in_interval(step, trial.epoch_values, o.n_warmup_steps, o.interval_steps)) return false;
  const double best = best_so_far(trial, objective);
  if (std::isnan(best)) return true;  // a curve of NaNs only: diverged
  std::vector<double> at_step;
  int reported = 0;  // NaNs count towards n_min_trials, as in Optuna, but not in the percentile
  for (const Trial* t : completed) {
    const auto it = t->epoch_values.find(step);
    if (it == t->epoch_values.end()) continue;
    ++reported;
    if (!std::isnan(it->second)) at_step.push_back(it->second);
  }
  if (reported < o.n_min_trials || at_step.empty()) return false;
  const double p = linear_percentile(std::move(at_step), objective.maximize ? 100 - o.percentile : o.percentile);
  return objective.maximize ? best < p : best > p;
}

}  // namespace tensorhub
