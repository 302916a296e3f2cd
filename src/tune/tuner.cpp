// Tuner: trials of an oracle run as hub tasks; the search's state lives in the hub.
#include "tensorhub/tune/tuner.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "tensorhub/core/error.h"
#include "tensorhub/queue/command_template.h"
#include "tensorhub/queue/task_queue.h"
#include "tensorhub/queue/epoch_report.h"
#include "tensorhub/store/hub.h"
#include "tensorhub/train/spec.h"
#include "tensorhub/tune/pareto.h"
#include "tensorhub/tune/search_lease.h"
#include "tensorhub/tune/trials.h"
#include "oracles.h"

namespace tensorhub {
namespace {

constexpr const char* kSearchKind = "search";
constexpr const char* kStateKind = "state";

// What identifies a search: resuming with a different one of these would mix two searches
// (trials of one command and of another, or a max_trials the stored oracle does not have).
// A search stored before pruners existed has no "pruner": it reads as null, a search without one.
constexpr const char* kIdentityKeys[] = {"oracle", "space", "objective", "options", "command", "spec", "task_name", "pruner"};

Json search_identity(const TunerOptions& o) {
  return {{"oracle", o.oracle},
          {"pruner", o.pruner.to_json()},
          {"space", o.space.to_json()},
          {"objective", o.oracle_options.objective.to_string()},
          {"options", options_to_json(o.oracle_options, o.oracle)},
          {"command", o.command},
          {"spec", o.spec},
          {"task_name", o.task_name}};
}

std::string describe_difference(const Json& stored, const Json& given) {
  for (const char* key : kIdentityKeys) {
    const Json s = stored.value(key, Json(nullptr)), g = given.at(key);
    if (s == g) continue;
    if (std::string(key) == "options" && s.is_object()) {
      for (auto it = g.begin(); it != g.end(); ++it) {
        // A seed of 0 means "pick one"; the stored search has the one it picked.
        if (it.key() == "seed" && it.value() == 0) continue;
        if (s.value(it.key(), Json(nullptr)) != it.value())
          return it.key() + " differs (stored " + s.value(it.key(), Json(nullptr)).dump() + ", given " + it.value().dump() + ")";
      }
      continue;
    }
    std::string what = s.dump(), given_text = g.dump();
    if (what.size() > 120) what = what.substr(0, 117) + "...";
    if (given_text.size() > 120) given_text = given_text.substr(0, 117) + "...";
    return std::string(key) + " differs (stored " + what + ", given " + given_text + ")";
  }
  return "";
}

// "accuracy, loss, val_accuracy": the keys of a trial's result, for a message (the result
// itself may hold a long history).
std::string keys_of(const Json& result) {
  if (!result.is_object() || result.empty()) return "none";
  std::string keys;
  for (const auto& [k, v] : result.items()) keys += (keys.empty() ? "" : ", ") + k;
  return keys;
}

bool is_finite_number(const Json& v) { return v.is_number() && std::isfinite(v.get<double>()); }

// Who holds a search's lease: host and process for people, a random part so that two Tuner
// objects of one process are two owners.
std::string lease_owner() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "unknown-host");
  std::random_device random;
  char tag[16];
  std::snprintf(tag, sizeof tag, "%08x", static_cast<unsigned>(random()));
  return std::string("host ") + host + ", pid " + std::to_string(getpid()) + ", tuner " + tag;
}

// Sets j[a][b] even when j[a] is absent.
}  // namespace

std::optional<double> score_of_result(const Json& result, const Objective& objective) {
  if (!result.is_object()) return std::nullopt;
  std::optional<double> best;
  if (auto h = result.find("history"); h != result.end() && h->is_array()) {
    for (const auto& epoch : *h) {
      if (!epoch.is_object()) continue;
      auto v = epoch.find(objective.name);
      if (v == epoch.end() || !is_finite_number(*v)) continue;
      const double x = v->get<double>();
      if (!best || objective.better(x, *best)) best = x;
    }
    if (best) return best;
  }
  if (auto v = result.find(objective.name); v != result.end() && is_finite_number(*v)) return v->get<double>();
  return std::nullopt;
}

std::optional<std::vector<double>> values_of_result(const Json& result, const std::vector<Objective>& objectives) {
  if (!result.is_object() || objectives.empty()) return std::nullopt;
  auto read = [&](const Json& logs) -> std::optional<std::vector<double>> {
    std::vector<double> values;
    for (const auto& o : objectives) {
      const auto v = logs.find(o.name);
      if (v == logs.end() || !is_finite_number(*v)) return std::nullopt;
      values.push_back(v->get<double>());
    }
    return values;
  };
  if (auto own = read(result)) return own;
  const auto h = result.find("history");
  if (h == result.end() || !h->is_array()) return std::nullopt;
  const Json* best = nullptr;
  for (const auto& epoch : *h) {
    if (!epoch.is_object()) continue;
    const auto v = epoch.find(objectives.front().name);
    if (v == epoch.end() || !is_finite_number(*v)) continue;
    if (!best || objectives.front().better(v->get<double>(), best->at(objectives.front().name).get<double>())) best = &epoch;
  }
  return best ? read(*best) : std::nullopt;
}

Json SearchSummary::to_json() const {
  auto view_json = [](const TrialView& v) {
    Json j = v.trial.to_json();
    j["task_id"] = v.task_id;
    j["task_status"] = v.task_status;
    if (!v.error.empty()) j["error"] = v.error;
    if (!v.result.is_null()) j["result"] = v.result;
    return j;
  };
  Json j = {{"search", search_name}, {"oracle", oracle},   {"objective", objective.to_string()},
            {"done", done},          {"reason", reason},   {"trials", Json::array()}};
  for (const auto& t : trials) j["trials"].push_back(view_json(t));
  j["best"] = best ? view_json(*best) : Json(nullptr);
  if (!objectives.empty()) {
    j["objectives"] = objectives_to_string(objectives);
    j["pareto_front"] = Json::array();
    for (const auto& t : pareto_front) j["pareto_front"].push_back(t.trial.trial_id);
  }
  return encode_non_finite(j);  // a trial's NaN loss prints as {"$numberDouble": "NaN"}, not null
}

struct Tuner::Impl {
  TunerOptions o;
  Hub hub;
  TaskQueue queue;
  std::unique_ptr<Oracle> oracle;
  std::map<std::string, Task> tasks;  // trial id -> its task
  std::int64_t last_report_id = 0;    // epoch reports read so far
  std::int64_t state_seq = 0;
  int consecutive_failures = 0;
  std::string last_failure;
  bool done = false;
  std::string reason;
  // The search's lease (one tuner per search): held from open_or_resume() until destruction.
  const std::string owner = lease_owner();
  bool holds_lease = false;
  std::chrono::steady_clock::time_point last_renewal;

  // `mode`: kReadOnly where the search is only read (load_search_summary), so that results
  // show on a hub this user may only read.
  explicit Impl(TunerOptions options, OpenMode mode = OpenMode::kCreate)
      : o(std::move(options)), hub(o.hub_uri, o.project_name, mode), queue(hub) {}

  ~Impl() {
    if (!holds_lease) return;
    try {
      release_lease(hub.sql(), o.project_name, lease_name(), owner);
    } catch (const std::exception&) {
      // The hub is gone: the lease expires by itself.
    }
  }

  Json search_filter() const { return {{"search", o.search_name}}; }

  // ---- the search's lease ----------------------------------------------------------------

  std::string lease_name() const { return "tune/" + o.search_name; }
  std::int64_t lease_us() const { return static_cast<std::int64_t>(o.lease_s * 1e6); }

  // Takes the lease, or refuses to start naming the tuner that holds it.
  void take_lease() {
    const Lease held = acquire_lease(hub.sql(), o.project_name, lease_name(), owner, lease_us());
    if (held.owner != owner) {
      throw FailedPrecondition(
          "search '" + o.search_name + "' of project '" + o.project_name + "' is being run by another tuner (" +
          held.owner + "; its lease runs " + std::to_string(std::max<std::int64_t>(held.remaining_us, 0) / 1'000'000) +
          " s more unless it renews it): one tuner per search. Runners join a search without a tuner; to take "
          "it over, stop that tuner, or wait: a killed tuner's lease expires after its lease time (" +
          std::to_string(static_cast<int>(o.lease_s)) + " s) and a new tuner then resumes the search");
    }
    holds_lease = true;
    last_renewal = std::chrono::steady_clock::now();
  }

  // Renews the lease every quarter of its length; throws FailedPrecondition once another
  // tuner has taken the search over (this one stalled past its lease), so that two tuners
  // never create trials side by side.
  void renew_lease() {
    const auto now = std::chrono::steady_clock::now();
    if (now - last_renewal < std::chrono::duration<double>(o.lease_s / 4)) return;
    if (!tensorhub::renew_lease(hub.sql(), o.project_name, lease_name(), owner, lease_us())) {
      holds_lease = false;
      throw FailedPrecondition("search '" + o.search_name + "': this tuner (" + owner +
                               ") lost its lease to another tuner after not renewing it for over " +
                               std::to_string(static_cast<int>(o.lease_s)) +
                               " s (stopped, or cut off from the hub); that tuner runs the search now");
    }
    last_renewal = now;
  }

  // ---- the search's documents ------------------------------------------------------------

  // A placeholder of the trial command that no trial will have is a typo: refuse the search
  // before anything is stored or deleted. (A resumed search's command is its stored one.)
  void check_command_placeholders() const {
    if (o.command.empty()) return;
    // A trial's hyperparameters are the space's plus the oracles' own "tuner/..." keys.
    std::vector<std::string> names = {"tuner/trial_id", "tuner/epochs",         "tuner/initial_epoch",  "tuner/bracket",
                                      "tuner/round",    "tuner/parent_task_id", "tuner/parent_model_id", "tuner/member",
                                      "tuner/segment",  "tuner/exploited_member", "tuner/exploited_trial"};
    for (const auto& p : o.space.parameters()) names.push_back(p->name);
    check_placeholders(o.command, names, "search \"" + o.search_name + "\"");
  }

  void open_or_resume() {
    if (o.overwrite) check_command_placeholders();
    take_lease();  // before anything is read or written, --overwrite's deletes included
    if (o.overwrite) {
      queue.cancel_tasks(search_filter());
      queue.delete_tasks(search_filter());
      hub.delete_documents(kTrials, search_filter());
    }
    const auto stored = hub.find_documents(kTrials, {{"kind", kSearchKind}, {"search", o.search_name}}, {}, 1);
    if (stored.empty()) {
      check_command_placeholders();
      oracle = make_oracle(o.oracle, o.space, o.oracle_options);
      Json doc = search_identity(o);
      doc["kind"] = kSearchKind;
      doc["search"] = o.search_name;
      hub.save_document(kTrials, doc);
      save_state();
      return;
    }
    const Json& doc = stored.front().tags;
    const std::string diff = describe_difference(doc, search_identity(o));
    if (!diff.empty()) {
      throw FailedPrecondition("search '" + o.search_name + "' already exists in project '" + o.project_name +
                               "' and its " + diff + "; resume it with the flags it was started with, give " +
                               "another --name, or --overwrite to start it anew");
    }
    load_state(doc);
    // A search that stopped after failures in a row is resumed to try again once its user has
    // fixed their cause (a dataset imported, a path corrected): the count starts afresh.
    if (failure_limit_reached()) {
      consecutive_failures = 0;
      reason.clear();
    }
  }

  void load_state(const Json& search_doc) {
    OracleOptions stored_options = options_from_json(search_doc.at("options"));
    oracle = make_oracle(search_doc.at("oracle").get<std::string>(),
                         SearchSpace::from_json(search_doc.at("space")), stored_options);
    const auto states = hub.find_documents(kTrials, {{"kind", kStateKind}, {"search", o.search_name}}, {{"seq", -1}}, 1);
    if (states.empty()) throw DataLoss("search '" + o.search_name + "' has no stored state");
    const Json& s = states.front().tags;
    oracle->set_state(s.at("state"));
    state_seq = s.at("seq").get<std::int64_t>();
    consecutive_failures = s.value("consecutive_failures", 0);
    last_report_id = s.value("last_report_id", std::int64_t{0});
    done = s.value("done", false);
    reason = s.value("reason", std::string());
  }

  // Appends the oracle's state as the next snapshot, then drops older ones. A crash between
  // the two leaves two snapshots; the newest wins.
  void save_state() {
    const std::int64_t seq = ++state_seq;
    hub.save_document(kTrials, {{"kind", kStateKind},
                    {"search", o.search_name},
                    {"seq", seq},
                    {"state", oracle->get_state()},
                    {"consecutive_failures", consecutive_failures},
                    {"last_report_id", last_report_id},
                    {"done", done},
                    {"reason", reason}});
    hub.delete_documents(kTrials, {{"kind", kStateKind}, {"search", o.search_name}, {"seq", {{"$lt", seq}}}});
  }

  // ---- trials and tasks ------------------------------------------------------------------

  // Reads the tasks of the trials still running (all of the search's tasks the first time),
  // so a poll costs O(running trials), not O(trials so far).
  void refresh_tasks() {
    Json filter = search_filter();
    if (!tasks.empty()) {
      Json running = Json::array();
      for (const auto& [id, t] : oracle->trials())
        if (t.status == TrialStatus::kRunning) running.push_back(id);
      if (running.empty()) return;
      filter["trial_id"] = {{"$in", running}};
    }
    for (auto& t : queue.find_tasks(filter, {{"id", 1}})) {
      const auto id = t.spec.tags.value("trial_id", std::string());
      if (!id.empty()) tasks[id] = std::move(t);
    }
  }

  int running_trials() const {
    int n = 0;
    for (const auto& [id, t] : oracle->trials()) n += t.status == TrialStatus::kRunning;
    return n;
  }

  // The parent's task and the model it saved, for a promoted Hyperband / ASHA trial.
  void add_parent(const Trial& trial, Json& hp, Json* spec) {
    auto parent = trial.hyper_parameters.find("tuner/trial_id");
    if (parent == trial.hyper_parameters.end() || !parent->is_string()) return;
    auto it = tasks.find(parent->get<std::string>());
    if (it == tasks.end()) return;
    hp["tuner/parent_task_id"] = it->second.id;
    const Json& result = it->second.result;
    if (result.is_object() && result.contains("model_id")) {
      hp["tuner/parent_model_id"] = result["model_id"];
      if (spec && result["model_id"].is_number_integer())
        set_initial_model(*spec, result["model_id"].get<std::int64_t>());
    }
  }

  TaskSpec task_for(const Trial& trial) {
    TaskSpec t;
    t.task_name = o.task_name;
    t.hyper_parameters = trial.hyper_parameters;
    t.tags = {{"search", o.search_name}, {"trial_id", trial.trial_id}};
    t.max_attempts = 1 + o.max_retries_per_trial;
    t.timeout_s = o.trial_timeout_s;
    t.resources = o.trial_resources;
    if (!o.command.empty()) {
      t.command = o.command;
      add_parent(trial, t.hyper_parameters, nullptr);
      return t;
    }
    Json spec = o.spec;
    const Json& hp = trial.hyper_parameters;
    if (hp.contains("tuner/epochs")) set_epochs(spec, hp["tuner/epochs"].get<std::int64_t>());
    if (hp.contains("tuner/initial_epoch"))
      set_initial_epoch(spec, hp["tuner/initial_epoch"].get<std::int64_t>());
    // The trial's model carries the search and trial in its tags, so it can be found later.
    set_save_model_tag(spec, "search", o.search_name);
    set_save_model_tag(spec, "trial_id", trial.trial_id);
    // The trial's score is its best epoch's objective (Keras Tuner's rule): so is its model,
    // which a promoted Hyperband / ASHA trial resumes from, as Keras Tuner's best checkpoint.
    const Objective& objective = oracle->options().objective;
    set_save_model_monitor(spec, objective.name, objective.maximize ? "max" : "min");
    // TensorBoard's HPARAMS tab names each session by its trial, as Keras Tuner does.
    set_tensorboard_trial_id(spec, o.search_name + "/" + trial.trial_id);
    add_parent(trial, t.hyper_parameters, &spec);
    t.train_spec = std::move(spec);
    return t;
  }

  // Running trials without a task: created by the oracle just before a crash. Tasks are
  // looked up by their tags first, so a trial never gets two.
  bool ensure_tasks() {
    bool changed = false;
    for (const auto& [id, trial] : oracle->trials()) {
      if (trial.status != TrialStatus::kRunning || tasks.count(id)) continue;
      const std::int64_t task_id = queue.create_task(task_for(trial));
      tasks[id] = queue.get_task(task_id);
      changed = true;
    }
    return changed;
  }

  void record_failure(const std::string& trial_id, const std::string& why) {
    oracle->end_trial(trial_id, TrialStatus::kFailed, std::nullopt);
    ++consecutive_failures;
    last_failure = "trial " + trial_id + ": " + why;
  }

  // A finished trial of several objectives: its values, or a failure naming what it lacked.
  void settle_finished_with_values(const std::string& id, const Task& task) {
    const auto objectives = oracle->options().all_objectives();
    if (const auto values = values_of_result(task.result, objectives)) {
      oracle->end_trial(id, TrialStatus::kCompleted, *values);
      consecutive_failures = 0;
      return;
    }
    record_failure(id, "task " + std::to_string(task.id) + " finished without a finite value of every objective (" +
                           objectives_to_string(objectives) + ") in its result or in one epoch of its history (its keys: " +
                           keys_of(task.result) + "); is --objective right?");
  }

  // Ends the oracle's running trials whose tasks have ended.
  bool settle_ended_trials() {
    bool changed = false;
    for (const auto& [id, trial] : oracle->trials()) {
      if (trial.status != TrialStatus::kRunning) continue;
      auto it = tasks.find(id);
      if (it == tasks.end()) continue;
      const Task& task = it->second;
      switch (task.status) {
        case TaskStatus::kFinished: {
          if (oracle->options().multi_objective()) {
            settle_finished_with_values(id, task);
            break;
          }
          const auto score = score_of_result(task.result, oracle->options().objective);
          if (score) {
            oracle->end_trial(id, TrialStatus::kCompleted, score);
            consecutive_failures = 0;
          } else {
            record_failure(id, "task " + std::to_string(task.id) + " finished without a finite '" +
                                   oracle->options().objective.name + "' in its result (its keys: " +
                                   keys_of(task.result) + "); is --objective's name right?");
          }
          break;
        }
        case TaskStatus::kFailed: record_failure(id, "task " + std::to_string(task.id) + ": " + task.error); break;
        case TaskStatus::kCancelled: record_failure(id, "its task was cancelled"); break;
        default: continue;
      }
      changed = true;
      // Parallel trials may end together: the search stops at the failure that reaches the
      // limit, so the count it reports is the limit, not one more (the others settle on resume).
      if (failure_limit_reached()) break;
    }
    if (changed) save_state();
    check_failures();
    return changed;
  }

  // Per-epoch values of running trials (TaskContext::report_epoch); the oracle (ASHA's median
  // rule) or the pruner may stop a trial, whose task is then cancelled. A trial whose task has
  // ended (refresh_tasks saw it) takes its values but is never stopped: it is settled next.
  bool read_reports() {
    std::map<std::int64_t, std::string> trial_of_task;
    std::map<std::int64_t, int> attempt_of_task;
    for (const auto& [id, task] : tasks) {
      auto t = oracle->trials().find(id);
      if (t != oracle->trials().end() && t->second.status == TrialStatus::kRunning) {
        trial_of_task[task.id] = id;
        attempt_of_task[task.id] = task.attempt;
      }
    }
    if (trial_of_task.empty()) return false;
    std::vector<std::int64_t> ids;
    for (const auto& [task_id, trial_id] : trial_of_task) ids.push_back(task_id);
    bool changed = false;
    for (const EpochReport& r : find_epoch_reports(hub, ids, last_report_id)) {
      last_report_id = std::max(last_report_id, r.id);
      const auto it = trial_of_task.find(r.task_id);
      if (it == trial_of_task.end()) continue;
      // An earlier attempt that outlived its SIGKILLed runner may still report: only the
      // attempt that holds the task counts.
      if (!r.of_attempt(attempt_of_task[it->first])) continue;
      const auto v = r.logs.find(oracle->options().objective.name);
      if (v == r.logs.end() || !v->is_number()) continue;
      const std::string& trial_id = it->second;
      if (oracle->trials().at(trial_id).status != TrialStatus::kRunning) continue;
      changed = true;
      const bool go_on = oracle->report(trial_id, r.epoch, v->get<double>());
      if (tasks.at(trial_id).status != TaskStatus::kRunning && tasks.at(trial_id).status != TaskStatus::kPending)
        continue;
      if (!go_on) stop_trial(trial_id, it->first);
      else if (should_prune(o.pruner, oracle->options().objective, oracle->trials().at(trial_id), oracle->trials()))
        prune_trial(trial_id, it->first);
    }
    if (changed) save_state();
    return changed;
  }

  void stop_trial(const std::string& trial_id, std::int64_t task_id) {
    const Trial& t = oracle->trials().at(trial_id);
    std::optional<double> best;
    for (const auto& [epoch, value] : t.epoch_values)
      if (!best || oracle->options().objective.better(value, *best)) best = value;
    oracle->end_trial(trial_id, TrialStatus::kStopped, best);
    save_state();  // before the cancel: a restart must not count the cancelled task as failed
    queue.cancel_tasks({{"id", task_id}});
  }

  // Ends a trial the pruner stopped, with its last value as its score (what the bayesian
  // oracle learns from), and cancels its task so that its runner is free at once.
  void prune_trial(const std::string& trial_id, std::int64_t task_id) {
    const Trial& t = oracle->trials().at(trial_id);
    const double last = t.epoch_values.rbegin()->second;
    o.log("trial " + trial_id + " pruned at epoch " + std::to_string(t.epoch_values.rbegin()->first) + " (" +
          oracle->options().objective.name + " = " + std::to_string(last) + ")");
    oracle->end_trial(trial_id, TrialStatus::kPruned, last);
    save_state();  // before the cancel: a restart must not count the cancelled task as failed
    queue.cancel_tasks({{"id", task_id}});
  }

  // Asks the oracle for trials until max_parallel_trials run, it says wait, or it is done.
  bool fill() {
    bool changed = false;
    while (running_trials() < o.max_parallel_trials) {
      check_failures();
      TrialRequest r = oracle->create_trial();
      if (r.kind == TrialRequest::Kind::kRun) {
        save_state();  // the trial exists before its task: ensure_tasks() completes a crash here
        const std::int64_t task_id = queue.create_task(task_for(r.trial));
        tasks[r.trial.trial_id] = queue.get_task(task_id);
        changed = true;
        continue;
      }
      if (r.kind == TrialRequest::Kind::kDone && running_trials() == 0) {
        done = true;
        reason = r.reason;
        save_state();
        changed = true;
      }
      break;
    }
    return changed;
  }

  bool failure_limit_reached() const {
    return o.max_consecutive_failed_trials > 0 && consecutive_failures >= o.max_consecutive_failed_trials;
  }

  // Stops the search once failure_limit_reached(). The message names the command line's flag:
  // it is what `tensorhub tune` users see (TunerOptions::max_consecutive_failed_trials in C++).
  void check_failures() {
    if (failure_limit_reached()) {
      reason = "stopped after " + std::to_string(consecutive_failures) + " failed trials in a row (the limit is " +
               std::to_string(o.max_consecutive_failed_trials) + ", --max-consecutive-failures)" +
               (last_failure.empty() ? std::string() : "; the last: " + last_failure);
      save_state();
      throw FailedPrecondition("search '" + o.search_name + "' " + reason);
    }
  }

  SearchSummary summary() const {
    SearchSummary s;
    s.search_name = o.search_name;
    s.oracle = o.oracle;
    s.objective = oracle->options().objective;
    s.done = done;
    s.reason = reason;
    auto view = [&](const Trial& t) {
      TrialView v;
      v.trial = t;
      if (auto it = tasks.find(t.trial_id); it != tasks.end()) {
        v.task_id = it->second.id;
        v.task_status = to_string(it->second.status);
        v.error = it->second.error;
        v.result = it->second.result;
      }
      return v;
    };
    std::set<std::string> ranked;
    for (const auto& t : oracle->best_trials(0)) {
      s.trials.push_back(view(t));
      ranked.insert(t.trial_id);
    }
    for (const auto& [id, t] : oracle->trials())
      if (!ranked.count(id)) s.trials.push_back(view(t));
    if (!ranked.empty()) s.best = s.trials.front();
    if (oracle->options().multi_objective()) {
      s.objectives = oracle->options().objectives;
      for (const auto& t : oracle->pareto_front()) s.pareto_front.push_back(view(t));
      if (!s.pareto_front.empty()) s.best = s.pareto_front.front();
    }
    return s;
  }
};

Tuner::Tuner(TunerOptions options) {
  if (!options.log) options.log = [](const std::string& line) { std::cerr << "tune: " << line << std::endl; };
  if (options.command.empty() == options.spec.is_null()) {
    throw InvalidArgument("a search needs exactly one trial template: a command or a spec");
  }
  if (options.max_parallel_trials < 1)
    throw InvalidArgument("at least 1 trial must run at once (--parallel, TunerOptions::max_parallel_trials)");
  if (options.max_retries_per_trial < 0)
    throw InvalidArgument("retries per trial must be >= 0 (--max-retries, TunerOptions::max_retries_per_trial)");
  if (options.search_name.empty()) throw InvalidArgument("the search needs a name");
  if (!(options.lease_s > 0)) throw InvalidArgument("the search's lease must last > 0 s (TunerOptions::lease_s)");
  options.pruner.check();
  if (options.pruner.enabled() && options.oracle_options.multi_objective())
    throw InvalidArgument("a pruner compares one objective's curves; a search of several objectives (" +
                          objectives_to_string(options.oracle_options.objectives) + ") cannot prune (as in Optuna)");
  if (options.pruner.enabled() && (options.oracle == "hyperband" || options.oracle == "asha" || options.oracle == "pbt"))
    throw InvalidArgument("a pruner works with the grid, random and bayesian oracles; " + options.oracle +
                          " stops trials by its own schedule (leave the pruner out)");
  impl_ = std::make_unique<Impl>(std::move(options));
  impl_->open_or_resume();
  impl_->refresh_tasks();
}

Tuner::~Tuner() = default;

SearchSummary Tuner::summary() { return impl_->summary(); }

SearchSummary Tuner::search(const std::function<void(const SearchSummary&)>& on_change) {
  Impl& m = *impl_;
  bool first = true;
  double outage_s = 0;  // how long the hub has been unreachable; 0 while it answers
  while (!stop_.load()) {
    try {
      m.renew_lease();
      m.refresh_tasks();
      bool changed = m.ensure_tasks();
      // Reports first: a trial that finished since the last poll gets its last epochs into
      // its curve (the pruner compares running trials with completed curves) before it ends.
      changed |= m.read_reports();
      changed |= m.settle_ended_trials();
      changed |= m.fill();
      if (outage_s > 0) m.o.log("hub reachable again after " + std::to_string(static_cast<int>(outage_s)) + " s");
      outage_s = 0;
      if ((changed || first) && on_change) on_change(m.summary());
      first = false;
      if (m.done) break;
      m.queue.wait_for_change(m.o.poll_s);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kUnavailable) throw;
      // A restarting database: every step above is safe to repeat (the oracle's trials find
      // their tasks by tags), so wait and go on, as runners do.
      if (outage_s == 0) m.o.log(std::string("hub unreachable, retrying: ") + e.what());
      const double pause = std::clamp(outage_s, 0.5, 5.0);
      std::this_thread::sleep_for(std::chrono::duration<double>(pause));
      outage_s += pause;
      if (m.o.give_up_after_s > 0 && outage_s > m.o.give_up_after_s) throw;
    }
  }
  m.tasks.clear();  // re-read every task: a stopped trial's task is cancelled by now
  m.refresh_tasks();
  return m.summary();
}

SearchSummary load_search_summary(const std::string& hub_uri, const std::string& project_name,
                                  const std::string& search_name) {
  TunerOptions o;
  o.hub_uri = hub_uri;
  o.project_name = project_name;
  o.search_name = search_name;
  Tuner::Impl m(o, OpenMode::kReadOnly);
  const auto stored = m.hub.find_documents(kTrials, {{"kind", kSearchKind}, {"search", search_name}}, {}, 1);
  if (stored.empty()) {
    throw NotFound("no search named '" + search_name + "' in project '" + project_name + "' of " +
                   m.hub.display_uri());
  }
  m.o.oracle = stored.front().tags.at("oracle").get<std::string>();
  m.load_state(stored.front().tags);
  m.refresh_tasks();
  return m.summary();
}

}  // namespace tensorhub
