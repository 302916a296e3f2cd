// Pruners stop running trials whose learning curve is already worse than the others', as
// Optuna's pruners do (optuna/pruners/_percentile.py, Optuna 3.1, whose names and semantics
// these follow). The tuner (tuner.h) asks should_prune() after each epoch report of a running
// trial; a pruned trial ends as TrialStatus::kPruned and its task is cancelled, freeing its
// runner at once. A pruner holds no state of its own: it reads the trials' epoch values.
//
// Steps are Keras's 0-based epoch indices (the `epoch` of on_epoch_end and of
// TaskContext::report_epoch), as Optuna's steps start at zero.
#pragma once

#include <map>
#include <string>

#include "tensorhub/store/document.h"
#include "tensorhub/tune/oracle.h"

namespace tensorhub {

/// Which pruner, and its options (Optuna's PercentilePruner / MedianPruner arguments).
struct PrunerOptions {
  std::string name = "none";  ///< "none", "median" (percentile 50) or "percentile"
  double percentile = 50;     ///< in [0, 100]: the top `percentile` % of trials are kept
  int n_startup_trials = 5;   ///< no pruning until this many trials completed
  int n_warmup_steps = 0;     ///< no pruning at steps (epochs) below this
  int interval_steps = 1;     ///< check every this many steps after the warm-up
  int n_min_trials = 1;       ///< no pruning at a step fewer completed trials reported

  bool enabled() const { return name != "none"; }
  /// {"name": ..., "percentile": ..., ...}, or null for "none" (a search without a pruner).
  Json to_json() const;
  /// The inverse of to_json (null gives "none"). Throws InvalidArgument naming a missing or
  /// mistyped field, or a value check() refuses.
  static PrunerOptions from_json(const Json& json);
  /// Throws InvalidArgument for an unknown name, a percentile outside [0, 100], negative
  /// n_startup_trials or n_warmup_steps, or interval_steps or n_min_trials below 1 (Optuna's
  /// checks). "median" forces percentile 50.
  void check() const;
};

/// Optuna's PercentilePruner.prune for `trial` among `trials` (all of a search's trials,
/// `trial` included): true when the trial should stop now. Step is the trial's last reported
/// epoch. Nothing is pruned while fewer than n_startup_trials trials completed
/// (TrialStatus::kCompleted; pruned, stopped and failed trials never count), before
/// n_warmup_steps, or at a step that is not the first reported in its interval of
/// interval_steps after the warm-up. Otherwise the trial's best value so far (NaNs ignored;
/// all NaN prunes) is compared with the completed trials' values at this step: their
/// `percentile`-th percentile (100 - percentile when maximising; linear interpolation as
/// numpy's nanpercentile, NaNs left out): worse prunes. Fewer than n_min_trials values at the
/// step, or none finite, does not prune. A trial that is not running is never pruned.
bool should_prune(const PrunerOptions& options, const Objective& objective, const Trial& trial,
                  const std::map<std::string, Trial>& trials);

/// numpy.percentile's default ("linear") rule on `values` (any order; NaNs must be left out
/// by the caller): the value at rank q / 100 * (n - 1) of the sorted values, interpolated
/// between neighbours. q in [0, 100]; values must not be empty (InvalidArgument).
double linear_percentile(std::vector<double> values, double q);

}  // namespace tensorhub
