// The seed of the Hyperparameters and Searches views, in project "tune" of the hub: two real
// `tensorhub tune` searches run by
// the Tuner itself (tune/tuner.h), their trials' tasks claimed and completed here by a runner of
// our own with results computed from the trials' hyperparameters (no training: instant):
//  - "hb-mlp": a finished Hyperband search (max_epochs 9, factor 3: brackets 2, 1, 0), every
//    trial completed with epoch reports (trials, kind epoch) for the Curves view;
//  - "asha-live": an ASHA search stopped while it runs: three trials completed at rung 0, one
//    running with no metric yet, one promoted to rung 1 and pending.
// The facts the tests check (scores, the running trial's task, the best trial) are printed.
#include <cmath>
#include <map>

#include "seed.h"

#include "tensorhub/queue/task_queue.h"
#include "tensorhub/queue/epoch_report.h"
#include "tensorhub/tune/tuner.h"

namespace tensorhub::testing {
namespace {

constexpr const char* kProject = "tune";

SearchSpace mlp_space() {
  return SearchSpace()
      .Float("lr", 1e-4, 1e-1, std::nullopt, Sampling::kLog)
      .Int("units", 32, 256, 32)
      .Choice("optimizer", {"adam", "sgd"});
}

// val_accuracy after `epoch` (0-based) epochs of a model with these hyperparameters: best at
// lr 1e-3, better with more units and with adam, rising with the epochs. Rounded to 1e-4 so
// that the tests compare exact decimals.
double val_accuracy(const Json& hp, int epoch) {
  const double lr = hp.at("lr").get<double>();
  const double units = hp.at("units").get<double>();
  const double base = 0.9 - 0.05 * std::abs(std::log10(lr) + 3) + 0.01 * std::log2(units / 32) +
                      (hp.at("optimizer") == "adam" ? 0.01 : 0.0);
  const double v = base * (1 - 0.3 * std::pow(0.5, epoch));
  return std::round(v * 1e4) / 1e4;
}

// Trains `task` as a trial would: one epoch report per epoch from tuner/initial_epoch to
// tuner/epochs, then completes it with the last value and the history. Returns the score
// (the best epoch, as the tuner takes it).
double run_trial(Hub& hub, TaskQueue& queue, const Task& task) {
  const Json& hp = task.spec.hyper_parameters;
  const int first = hp.value("tuner/initial_epoch", 0), end = hp.value("tuner/epochs", 1);
  Json history = Json::array();
  double best = 0, last = 0;
  for (int e = first; e < end; ++e) {
    last = val_accuracy(hp, e);
    best = std::max(best, last);
    const Json logs = {{"val_accuracy", last}, {"loss", std::round((1 - last) * 2e4) / 1e4}};
    save_epoch_report(hub, task.id, task.attempt, e, logs);
    history.push_back(logs);
  }
  queue.complete(task, {{"val_accuracy", last}, {"history", history}});
  return best;
}

TunerOptions search_options(Hub& hub, const std::string& name, const std::string& oracle) {
  TunerOptions o;
  o.hub_uri = hub.uri();
  o.project_name = hub.project_name();
  o.search_name = name;
  o.oracle = oracle;
  o.space = mlp_space();
  o.oracle_options.objective = Objective::parse("val_accuracy:max");
  o.oracle_options.seed = 42;
  o.oracle_options.max_epochs = 9;
  o.oracle_options.factor = 3;
  o.command = "train --units {units} --lr {lr} --optimizer {optimizer}";
  o.task_name = name + "-trial";
  o.poll_s = 0.01;
  return o;
}

Json seed_hyperband(Hub& hub) {
  TaskQueue queue(hub);
  TunerOptions o = search_options(hub, "hb-mlp", "hyperband");
  o.max_parallel_trials = 50;
  Json scores = Json::object();
  Tuner tuner(o);
  // The tuner calls back whenever it created trials: run every one it queued.
  const SearchSummary s = tuner.search([&](const SearchSummary&) {
    while (auto t = queue.claim(o.task_name, "runner-hb", 60))
      scores[t->spec.tags.at("trial_id").get<std::string>()] = run_trial(hub, queue, *t);
  });
  if (!s.done || !s.best) throw Internal("the seeded Hyperband search did not finish: " + s.reason);
  return {{"search_hb", o.search_name},
          {"hb_trials", s.trials.size()},
          {"hb_scores", scores},
          {"hb_best_trial", s.best->trial.trial_id},
          {"hb_best_task", s.best->task_id},
          {"hb_best_score", *s.best->trial.score}};
}

Json seed_asha(Hub& hub) {
  TaskQueue queue(hub);
  TunerOptions o = search_options(hub, "asha-live", "asha");
  o.oracle_options.min_epochs = 1;
  o.max_parallel_trials = 2;
  Tuner tuner(o);
  Json ids = {{"search_asha", o.search_name}};
  Json scores = Json::object();
  int completed = 0;
  tuner.search([&](const SearchSummary& summary) {
    if (completed == 3) {  // the running one and the promoted one are queued: stop here
      for (const auto& v : summary.trials)
        if (v.task_status == "pending") ids["asha_pending_task"] = v.task_id;
      tuner.request_stop();
      return;
    }
    while (auto t = queue.claim(o.task_name, "runner-asha", 3600)) {
      if (completed == 3) {  // started, no epoch reported yet
        ids["asha_running_task"] = t->id;
        ids["asha_running_trial"] = t->spec.tags.at("trial_id");
        break;
      }
      scores[t->spec.tags.at("trial_id").get<std::string>()] = run_trial(hub, queue, *t);
      ++completed;
    }
  });
  ids["asha_scores"] = scores;
  return ids;
}

}  // namespace

Json seed_searches(Hub& hub, const std::filesystem::path&) {
  Hub tune(hub.uri(), kProject);  // a project of their own: the other views' counts stay theirs
  Json ids = {{"tune_project", kProject}};
  ids.update(seed_hyperband(tune));
  ids.update(seed_asha(tune));
  return ids;
}

}  // namespace tensorhub::testing
