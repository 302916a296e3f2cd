// Tuner: a hyperparameter search whose trials are hub tasks, so every runner on every machine
// works on one search (Keras Tuner's Tuner.search, with the queue in place of a local loop).
//
//   TunerOptions o;
//   o.hub_uri = "sqlite:///tmp/hub.db";  o.search_name = "mlp-hb";
//   o.space = SearchSpace().Int("units", 32, 512, 32).Choice("learning_rate", {1e-2, 1e-3});
//   o.oracle = "hyperband";  o.oracle_options.objective = Objective::parse("val_accuracy");
//   o.spec = <a spec task, see tensorhub/train/spec.h>;   // or o.command = "./train --units {units}"
//   Tuner(o).search();   // returns when the oracle is done and every trial has ended
//
// Each trial becomes one task named `task_name`, tagged {"search": search_name, "trial_id": id},
// with the trial's hyperparameters (the runner fills "{units}" in a command; a spec fills
// "${units}"). Hyperband and ASHA trials get "tuner/epochs", "tuner/initial_epoch" and, when
// promoted, "tuner/trial_id" plus "tuner/parent_task_id" and "tuner/parent_model_id" (the model
// the parent trial saved, the result key "model_id"); for spec trials the tuner sets the spec's
// fit.epochs, fit.initial_epoch and initial_model itself, so a promoted trial resumes from its
// parent's checkpoint and no model trains more than max_epochs in total.
//
// Scores: a trial's score is the best value of the objective over the epochs in its result's
// "history" (a list of per-epoch logs, as spec tasks write it), as Keras Tuner takes the best
// epoch; without a history, the result's value of the objective's name. A trial whose task
// failed, or whose result lacks the objective or has NaN, is a failed trial: it never ranks.
// Retries: a trial's task gets max_attempts = 1 + max_retries_per_trial; a trial whose runner
// died (its lease expired) counts a failed attempt, so it runs again only with
// max_retries_per_trial >= 1. After max_consecutive_failed_trials failures in a row the search
// stops with an error naming the last failure and the last line of its output.
//
// One tuner per search: runners on any number of machines join a search, and one tuner runs it.
// A tuner holds a lease on its search (project, search_name) in the hub, taken atomically when it
// starts and renewed by its loop; a second tuner on the search refuses to start
// (FailedPrecondition naming the host and process that hold it). When the holder ends, its lease
// is released; when it dies, the lease expires after lease_s and a new tuner resumes the search.
// A tuner that stalls past its lease and finds another tuner took over stops with
// FailedPrecondition. A tuner survives hub outages (a restarting PostgreSQL): it logs once and
// retries until the hub answers (an outage longer than lease_s may hand the search to another).
//
// State: the search's config and the oracle's state are documents in the hub's `trials`
// collection ({"kind": "search"} and {"kind": "state"}); the trial -> task link is the task's
// tags. A tuner killed at any point and started again with the same search_name resumes: trials
// whose task exists are never created twice, and finished tasks are never run again. Resuming
// takes the same flags: a different oracle, space, objective, oracle option (max_trials, ...),
// command or spec is refused (FailedPrecondition naming it), so two searches never mix.
// Per-epoch values (ASHA's median stopping) come from the epoch reports that
// TaskContext::report_epoch writes (tensorhub/queue/epoch_report.h); a trial told to stop is cancelled,
// and its runner kills its process.
//
// Pruning (TunerOptions::pruner, Optuna's median and percentile pruners, pruner.h): after each
// epoch report of a running trial the pruner compares the trial's curve with the completed
// trials' values at that epoch; a pruned trial ends as "pruned" with its curve kept, and its
// task is cancelled at once (its runner kills it within about a second and claims the next
// trial). Works with the grid, random and bayesian oracles; hyperband and asha stop trials by
// their own rules and refuse a pruner. A trial whose task finished before its last report was
// read is completed, never pruned.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tensorhub/queue/task.h"
#include "tensorhub/store/document.h"
#include "tensorhub/tune/oracle.h"
#include "tensorhub/tune/pruner.h"

namespace tensorhub {

struct TunerOptions {
  std::string hub_uri;                  ///< required
  std::string project_name = "default";
  std::string search_name = "default";  ///< identifies the search; the same name resumes it
  bool overwrite = false;               ///< delete a stored search of this name and start anew
  std::string oracle = "random";        ///< grid | random | hyperband | bayesian | asha | nsga2
  SearchSpace space;
  OracleOptions oracle_options;
  /// Stops running trials whose curve falls behind (see the header comment); default none.
  /// Part of the search's identity: resuming with another pruner is refused.
  PrunerOptions pruner;
  std::string command;                  ///< trial command with {name} placeholders (command_template.h), or
  Json spec;                            ///< trial spec (exactly one of the two)
  std::string task_name = "trial";      ///< runners claim trials by this task name
  int max_parallel_trials = 2;          ///< trials pending or running at once
  int max_retries_per_trial = 0;
  int max_consecutive_failed_trials = 3;
  double trial_timeout_s = 0;           ///< per attempt; 0 = none
  /// What each trial's task asks of its runner (TaskSpec::resources): cores, GPUs, memory;
  /// default nothing. `tensorhub tune --cpus/--gpus/--memory`.
  TaskResources trial_resources;
  double poll_s = 0.5;                  ///< how often the queue and reports are read
  double give_up_after_s = 0;           ///< rethrow Unavailable after this long an outage; 0 never
  double lease_s = 30;                  ///< how long the search's lease lasts unrenewed (renewed every lease_s / 4)
  /// One line per event (hub outages); default prints to stderr.
  std::function<void(const std::string&)> log;
};

/// A trial as the tuner shows it: the oracle's trial plus its task.
struct TrialView {
  Trial trial;
  std::int64_t task_id = 0;
  std::string task_status;  ///< "pending", "running", "finished", ...; "" before its task exists
  std::string error;        ///< the task's error when it failed
  Json result;              ///< the task's result (null until finished)
};

/// What a search ended with, and what `tensorhub tune results` prints.
struct SearchSummary {
  std::string search_name;
  std::string oracle;
  Objective objective;
  /// With several objectives: all of them (objective is the first), and the Pareto front:
  /// the completed trials no other dominates (pareto.h), by the first objective, best first.
  /// `best` is then the front's best in the first objective. Both empty with one objective.
  std::vector<Objective> objectives;
  std::vector<TrialView> pareto_front;
  std::vector<TrialView> trials;  ///< best first (ranked trials), then the rest by trial id
  std::optional<TrialView> best;
  bool done = false;              ///< the oracle has nothing more to run and no trial runs
  std::string reason;             ///< why the oracle is done, or why the search stopped
  /// The summary as JSON (`tensorhub tune results --json`); NaN and +/-Inf in trial results
  /// as {"$numberDouble": ...} (encode_non_finite, store/document.h).
  Json to_json() const;
};

class Tuner {
 public:
  /// Opens the hub, takes the search's lease, then resumes the stored search `search_name`, or
  /// starts it. Throws InvalidArgument for options that do not fit (neither or both of command
  /// and spec, a command placeholder that names no hyperparameter of the space nor a
  /// "tuner/..." key, an oracle that rejects the space, lease_s <= 0, a pruner that
  /// PrunerOptions::check refuses or one with hyperband or asha), FailedPrecondition if
  /// another tuner runs the search (naming its host and pid) or a search of that name exists
  /// with another oracle, space or objective (use another name or overwrite), Unavailable if
  /// the hub cannot be opened. The destructor releases the lease.
  explicit Tuner(TunerOptions options);
  ~Tuner();
  Tuner(const Tuner&) = delete;
  Tuner& operator=(const Tuner&) = delete;

  /// Runs the search until the oracle is done and every trial has ended, or request_stop().
  /// `on_change` (optional) is called with the current summary whenever a trial starts or
  /// ends. Throws FailedPrecondition after max_consecutive_failed_trials failures in a row, or
  /// when another tuner took the search over; Unavailable if the hub stays unreachable.
  SearchSummary search(const std::function<void(const SearchSummary&)>& on_change = {});

  /// Asks search() to return at its next poll; trials keep running on their runners and a
  /// later search() with the same name picks them up. Safe from a signal handler.
  void request_stop() { stop_.store(true); }

  SearchSummary summary();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  std::atomic<bool> stop_{false};
};

/// The summary of a stored search without running anything (`tensorhub tune results`).
/// Throws NotFound if no search of that name exists in the project.
SearchSummary load_search_summary(const std::string& hub_uri, const std::string& project_name,
                                  const std::string& search_name);

/// The score of a trial result (see the header comment): the best finite value of
/// objective.name over result["history"], else result[objective.name]; nothing if neither.
std::optional<double> score_of_result(const Json& result, const Objective& objective);

/// A trial's values for several objectives, all from one place so that they describe one
/// model: the result's own keys when it has every objective (a command trial writes its final
/// values), else the epoch of result["history"] whose first objective is best (the epoch whose
/// model a spec trial saves: its save_model monitor is the first objective). Nothing when an
/// objective is missing there or not finite.
std::optional<std::vector<double>> values_of_result(const Json& result, const std::vector<Objective>& objectives);

}  // namespace tensorhub
