// ASHA, asynchronous successive halving (Li et al. 2020, "A System for Massively Parallel
// Hyperparameter Tuning", MLSys, Algorithm 2), with the median stopping rule of Google Vizier
// (Golovin et al. 2017, "Google Vizier: A Service for Black-Box Optimization", KDD, 3.2.2).
//
// Rungs k = 0, 1, ... train until min_epochs * factor^k epochs, up to max_epochs (the paper's
// r * eta^k <= R). create_trial() always has work while new configurations are allowed: from the
// highest rung down, the best trial of a rung that is in the top 1/factor of the rung's
// completed trials and not yet promoted goes to the next rung (a new trial resuming its model:
// "tuner/trial_id", "tuner/initial_epoch"); otherwise a new random configuration starts at rung
// 0. A rung's members are its completed trials with a finite score: stopped and failed trials
// are never promoted. Everything but the random generator is derived from the trials.
#include <algorithm>
#include <cmath>

#include "oracles.h"
#include "tensorhub/core/error.h"

namespace tensorhub {
namespace {

class AshaOracle : public SeededOracle {
 public:
  AshaOracle(SearchSpace space, OracleOptions options) : SeededOracle("asha", std::move(space), std::move(options)) {
    // Rungs: min_epochs * factor^k <= max_epochs (Li et al.: k up to floor(log_eta(R / r))).
    for (long long e = options_.min_epochs; e <= options_.max_epochs; e *= options_.factor) rung_epochs_.push_back(static_cast<int>(e));
  }

  TrialRequest create_trial() override {
    for (int k = static_cast<int>(rung_epochs_.size()) - 2; k >= 0; --k) {
      if (auto parent = promotable(k)) return promote(*parent, k);
    }
    TrialRequest r;
    const bool more_configs = options_.max_trials == 0 || configurations() < options_.max_trials;
    if (more_configs) {
      if (auto point = random_untried_point(space_, rng_, tried(), &r.reason)) return start(std::move(*point));
    } else {
      r.reason = "max_trials (" + std::to_string(options_.max_trials) + ") configurations started and none to promote";
    }
    if (running()) {
      r.kind = TrialRequest::Kind::kWait;
      r.reason += "; waiting for running trials, which may earn a promotion";
    }
    return r;
  }

  // The median stopping rule: stop when this epoch's value is worse than the median of the
  // other trials' values at the same epoch, once the grace of min_epochs epochs is over and at
  // least 3 other trials reached this epoch. `epoch` is Keras's 0-based epoch index.
  bool report(const std::string& trial_id, int epoch, double value) override {
    Oracle::report(trial_id, epoch, value);
    if (trial(trial_id).status != TrialStatus::kRunning) return true;
    if (epoch < options_.min_epochs) return true;  // epochs 0 .. min_epochs - 1 are the grace
    std::vector<double> others;
    for (const auto& [id, t] : trials_) {
      if (id == trial_id) continue;
      const auto it = t.epoch_values.find(epoch);
      if (it != t.epoch_values.end() && std::isfinite(it->second)) others.push_back(it->second);
    }
    if (others.size() < 3) return true;
    std::sort(others.begin(), others.end());
    const std::size_t n = others.size();
    const double median = n % 2 ? others[n / 2] : (others[n / 2 - 1] + others[n / 2]) / 2;
    return !options_.objective.better(median, value);
  }

 private:
  static int rung_of(const Trial& t) { return t.hyper_parameters.value("tuner/round", 0); }

  int configurations() const {
    return static_cast<int>(std::count_if(trials_.begin(), trials_.end(), [](const auto& kv) { return rung_of(kv.second) == 0; }));
  }
  bool running() const {
    return std::any_of(trials_.begin(), trials_.end(), [](const auto& kv) { return kv.second.status == TrialStatus::kRunning; });
  }
  std::set<std::string> tried() const {
    std::set<std::string> out;
    for (const auto& [id, t] : trials_) out.insert(point_key(t.hyper_parameters));
    return out;
  }

  // Li et al. Algorithm 2, get_job: a trial in top_k(rung k, |rung k| / eta) not yet promoted.
  std::optional<std::string> promotable(int k) const {
    std::vector<const Trial*> members;
    std::set<std::string> promoted;
    for (const auto& [id, t] : trials_) {
      if (rung_of(t) == k && t.status == TrialStatus::kCompleted && t.score && std::isfinite(*t.score)) members.push_back(&t);
      if (t.hyper_parameters.contains("tuner/trial_id")) promoted.insert(t.hyper_parameters["tuner/trial_id"].get<std::string>());
    }
    std::stable_sort(members.begin(), members.end(),
                     [&](const Trial* a, const Trial* b) { return options_.objective.better(*a->score, *b->score); });
    const std::size_t top = members.size() / static_cast<std::size_t>(options_.factor);
    for (std::size_t i = 0; i < top; ++i) {
      if (!promoted.count(members[i]->trial_id)) return members[i]->trial_id;
    }
    return std::nullopt;
  }

  TrialRequest promote(const std::string& parent, int k) {
    Json hp = trials_.at(parent).hyper_parameters;
    hp["tuner/trial_id"] = parent;
    hp["tuner/initial_epoch"] = rung_epochs_[static_cast<std::size_t>(k)];
    hp["tuner/epochs"] = rung_epochs_[static_cast<std::size_t>(k) + 1];
    hp["tuner/bracket"] = 0;
    hp["tuner/round"] = k + 1;
    TrialRequest r;
    r.kind = TrialRequest::Kind::kRun;
    r.trial = new_trial(std::move(hp));
    return r;
  }

  TrialRequest start(Json hp) {
    hp["tuner/epochs"] = rung_epochs_[0];
    hp["tuner/initial_epoch"] = 0;
    hp["tuner/bracket"] = 0;
    hp["tuner/round"] = 0;
    TrialRequest r;
    r.kind = TrialRequest::Kind::kRun;
    r.trial = new_trial(std::move(hp));
    return r;
  }

  std::vector<int> rung_epochs_;  // epochs trained by the end of each rung
};

}  // namespace

std::unique_ptr<Oracle> make_asha_oracle(SearchSpace space, OracleOptions options) {
  return std::make_unique<AshaOracle>(std::move(space), std::move(options));
}

}  // namespace tensorhub
