// Oracles decide which hyperparameters to try next, as Keras Tuner's Oracle does: the tuner
// (tuner.h) asks create_trial() for trials, runs them as hub tasks, reports per-epoch values
// with report() and final scores with end_trial(). An oracle holds no hub or queue: its whole
// state is get_state() JSON, which the tuner stores in the hub so a killed tuner resumes.
//
// Oracles (make_oracle names): "grid", "random", "hyperband" (Li et al. 2018, with Keras
// Tuner's schedule), "bayesian" (Gaussian process, Matern 5/2, EI or UCB), "asha"
// (asynchronous successive halving, Li et al. 2020, with a median-stopping rule), "nsga2"
// (Deb et al. 2002, as Optuna's NSGAIISampler: one or several objectives), "pbt"
// (population-based training, Jaderberg et al. 2017, as Ray Tune's scheduler).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tensorhub/tune/search_space.h"

namespace tensorhub {

/// What is optimised: a metric name and a direction.
struct Objective {
  std::string name = "val_loss";
  bool maximize = false;

  /// "val_accuracy:max", "val_loss:min", or a bare name whose direction Keras infers:
  /// ending in "loss" -> min; "acc", "accuracy" or ending in "_acc"/"_accuracy" -> max.
  /// Throws InvalidArgument asking for ":min" or ":max" when it cannot be inferred.
  static Objective parse(const std::string& text);
  /// True when score a is strictly better than b (a NaN is never better; anything beats NaN).
  bool better(double a, double b) const;
  std::string to_string() const;  ///< "val_accuracy:max"
};

/// kStopped: stopped early by the oracle (ASHA's median rule), ranked by its best epoch;
/// kPruned: stopped by the tuner's pruner (pruner.h), never ranked, its score its last value.
enum class TrialStatus { kRunning, kCompleted, kStopped, kFailed, kPruned };
std::string to_string(TrialStatus s);  ///< "running", "completed", "stopped", "failed", "pruned"
TrialStatus trial_status_from_string(const std::string& s);

/// One trial: a point of the space (plus the oracle's "tuner/..." keys) and its outcome.
struct Trial {
  std::string trial_id;   ///< "0000", "0001", ... in creation order
  /// The active parameters' values; Hyperband and ASHA add "tuner/epochs" (train until this
  /// epoch), "tuner/initial_epoch" (resume at), "tuner/bracket", "tuner/round" and, for a
  /// promoted trial, "tuner/trial_id" (the trial whose model to resume from).
  Json hyper_parameters = Json::object();
  TrialStatus status = TrialStatus::kRunning;
  std::optional<double> score;           ///< objective value; nothing or NaN never ranks
  /// With several objectives (OracleOptions::objectives): one value per objective, in their
  /// order (score is the first); empty with one objective.
  std::vector<double> values;
  std::map<int, double> epoch_values;    ///< per-epoch objective values from report()
  Json to_json() const;
  static Trial from_json(const Json& j);
};

/// What create_trial() answers.
struct TrialRequest {
  enum class Kind {
    kRun,   ///< run `trial`
    kWait,  ///< nothing to start until a running trial ends (e.g. a Hyperband round)
    kDone,  ///< the search is over (space used up, max_trials reached, schedule finished)
  };
  Kind kind = Kind::kDone;
  Trial trial;         ///< for kRun
  std::string reason;  ///< for kDone / kWait, e.g. "the 2 x 3 grid is used up"
};

struct OracleOptions {
  Objective objective;
  /// Several objectives at once ("val_accuracy:max,predict_ms:min"): all of them, the first
  /// being `objective`; empty for one. A search of several ranks by Pareto dominance (pareto.h):
  /// its result is the front of non-dominated trials. grid, random and nsga2 take several;
  /// the others refuse them.
  std::vector<Objective> objectives;
  int max_trials = 0;          ///< stop after this many trials; 0 = the oracle's own end
  std::uint64_t seed = 0;      ///< 0 = a random seed (recorded in the state)
  // Hyperband and ASHA
  int max_epochs = 20;         ///< most epochs one model trains in total
  int min_epochs = 1;          ///< ASHA's first rung
  int factor = 3;              ///< reduction factor eta
  int hyperband_iterations = 1;
  // Bayesian optimisation
  int num_initial_points = 0;  ///< random points before the GP; 0 = 3 x number of parameters
  std::string acquisition = "ei";  ///< "ei" (expected improvement) or "ucb"
  double alpha = 1e-4;         ///< noise added to the kernel's diagonal
  double beta = 2.6;           ///< UCB's exploration weight
  // NSGA-II (Optuna's NSGAIISampler names and defaults)
  int population_size = 50;
  double mutation_prob = 0;    ///< per parameter; 0 = 1 / number of parameters
  double crossover_prob = 0.9;
  double swapping_prob = 0.5;  ///< uniform crossover: a parameter comes from the second parent
  // Population-based training (Ray Tune's PopulationBasedTraining names); max_epochs is each
  // member's training length
  int population = 8;
  int perturbation_interval = 2;      ///< epochs per segment
  double quantile = 0.25;             ///< Ray's quantile_fraction: bottom exploits top
  double resample_probability = 0.25;

  /// The objectives searched: `objectives` when set, else {objective}.
  std::vector<Objective> all_objectives() const { return objectives.empty() ? std::vector<Objective>{objective} : objectives; }
  bool multi_objective() const { return objectives.size() > 1; }
};

/// Base of all oracles: keeps the trials, ranks them, and (de)serialises the common state.
class Oracle {
 public:
  Oracle(SearchSpace space, OracleOptions options);
  virtual ~Oracle();

  /// The next trial to run, or kWait / kDone. A kRun trial is recorded as running.
  virtual TrialRequest create_trial() = 0;
  /// A per-epoch objective value of a running trial. `epoch` is Keras's 0-based epoch index
  /// (the one on_epoch_end gets); reporting an epoch again replaces its value. Returns false
  /// when the trial should stop now (ASHA's median rule: after the grace epochs 0 ..
  /// min_epochs - 1, a value worse than the median of the other trials' values at the same
  /// epoch, once at least 3 others reached it); the others always return true. Unknown or
  /// ended trials: NotFound / ignored (returns true) respectively.
  virtual bool report(const std::string& trial_id, int epoch, double value);
  /// Ends a trial: kCompleted or kStopped with its score, kFailed without (a NaN score counts
  /// as failed), kPruned with its last reported value (or without, for a curve ending in NaN:
  /// it stays pruned). Ending an ended trial again is a no-op (the tuner may replay after a
  /// restart). Throws NotFound for an unknown trial id, InvalidArgument for kRunning.
  virtual void end_trial(const std::string& trial_id, TrialStatus status, std::optional<double> score);
  /// Ends a trial of a search of several objectives with one value per objective (their
  /// order): kCompleted with all finite, else kFailed. InvalidArgument for another count.
  void end_trial(const std::string& trial_id, TrialStatus status, const std::vector<double>& values);

  /// The whole state as JSON (space, options, trials, oracle-specific fields); restoring it
  /// into an oracle made with the same name gives one that continues identically.
  virtual Json get_state() const;
  virtual void set_state(const Json& state);

  /// Completed or stopped trials with a finite score, best first (at most n; 0 = all); pruned
  /// trials never rank, as in Optuna (their score is a value of an unfinished curve).
  std::vector<Trial> best_trials(std::size_t n = 1) const;
  /// The Pareto front: completed trials whose values no other completed trial dominates
  /// (pareto.h), ordered by the first objective, best first. With one objective, the best
  /// trials tied at the best score.
  std::vector<Trial> pareto_front() const;
  const std::map<std::string, Trial>& trials() const { return trials_; }
  const SearchSpace& space() const { return space_; }
  const OracleOptions& options() const { return options_; }

 protected:
  /// Records a new running trial with the next id and returns it.
  Trial& new_trial(Json hyper_parameters);
  Trial& trial(const std::string& trial_id);  ///< NotFound if unknown
  bool max_trials_reached() const;

  SearchSpace space_;
  OracleOptions options_;
  std::map<std::string, Trial> trials_;
  std::uint64_t next_id_ = 0;
};

/// Makes the oracle called `name` ("grid", "random", "hyperband", "bayesian", "asha", "nsga2", "pbt").
/// Throws InvalidArgument naming the allowed names, or for options that do not fit it
/// (grid over a continuous space, max_epochs < 1, factor < 2, ...).
std::unique_ptr<Oracle> make_oracle(const std::string& name, SearchSpace space, OracleOptions options);

/// Keras Tuner's Hyperband schedule for one iteration: brackets from the most exploratory
/// (many trials, few epochs) down to bracket 0; rounds within each with their trial count and
/// epochs. Used by the Hyperband oracle and checked against Keras Tuner's numbers in tests.
struct HyperbandRound {
  int bracket = 0, round = 0;
  int trials = 0;         ///< models in this round
  int epochs = 0;         ///< train until this epoch
  int initial_epoch = 0;  ///< resume from the previous round's epochs (0 in round 0)
};
std::vector<HyperbandRound> hyperband_schedule(int max_epochs, int factor);

}  // namespace tensorhub
