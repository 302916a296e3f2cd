// The Searches and Hyperparameters views' JSON API over the tuner's stored searches.
#include "search_api.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "tensorhub/core/error.h"
#include "tensorhub/core/hash.h"
#include "tensorhub/queue/task_queue.h"
#include "tensorhub/store/document.h"
#include "tensorhub/queue/epoch_report.h"
#include "tensorhub/tune/tuner.h"
#include "tensorhub/tune/trials.h"

namespace tensorhub {
namespace {

// Null for 0 ("not yet"), else the microseconds.
Json time_or_null(std::int64_t micros) { return micros ? Json(micros) : Json(nullptr); }

Json score_or_null(const std::optional<double>& s) { return s ? Json(*s) : Json(nullptr); }

// A trial's "tuner/<key>" value, or null.
Json tuner_value(const Json& hp, const std::string& key) { return hp.value("tuner/" + key, Json(nullptr)); }

// The search's stored document ({"kind": "search", ...}: oracle, space, time). NotFound names
// the project's searches.
Document search_document(Hub& hub, const std::string& name) {
  auto docs = hub.find_documents(kTrials, {{"kind", "search"}, {"search", name}}, {}, 1);
  if (docs.empty())
    throw NotFound("no search named '" + name + "' in project '" + hub.project_name() +
                   "' (GET /api/searches lists them)");
  return std::move(docs.front());
}

std::vector<std::string> space_parameters(const Document& search) {
  std::vector<std::string> names;
  const SearchSpace space = SearchSpace::from_json(search.tags.at("space"));  // outlives the loop
  for (const auto& p : space.parameters()) names.push_back(p->name);
  return names;
}

// The search's tasks by id: their start and end times (TrialView has neither).
std::map<std::int64_t, Task> tasks_of(Hub& hub, const std::string& name) {
  TaskQueue queue(hub);
  std::map<std::int64_t, Task> out;
  for (auto& t : queue.find_tasks({{"search", name}})) out.emplace(t.id, std::move(t));
  return out;
}

// The last epoch each running task of the search reported in its current attempt, as the
// Tasks view shows it: {task id: {"epoch", "logs"}}.
std::map<std::int64_t, Json> last_epochs(Hub& hub, const std::map<std::int64_t, Task>& tasks) {
  std::vector<std::int64_t> running;
  for (const auto& [id, t] : tasks)
    if (t.status == TaskStatus::kRunning) running.push_back(id);
  std::map<std::int64_t, Json> last;
  if (running.empty()) return last;
  for (const auto& r : find_epoch_reports(hub, running))  // oldest first: later ones overwrite
    if (r.of_attempt(tasks.at(r.task_id).attempt)) last[r.task_id] = {{"epoch", r.epoch}, {"logs", r.logs}};
  return last;
}

// A search of several objectives: [{"name", "maximize"}, ...]; null with one.
Json objectives_json(const SearchSummary& s) {
  if (s.objectives.empty()) return nullptr;
  Json out = Json::array();
  for (const auto& o : s.objectives) out.push_back({{"name", o.name}, {"maximize", o.maximize}});
  return out;
}

// The Pareto front's trial ids, by the first objective, best first; null with one objective.
Json pareto_front_json(const SearchSummary& s) {
  if (s.objectives.empty()) return nullptr;
  Json out = Json::array();
  for (const auto& v : s.pareto_front) out.push_back(v.trial.trial_id);
  return out;
}

Json best_json(const SearchSummary& s) {
  if (!s.best) return nullptr;
  return {{"trial_id", s.best->trial.trial_id}, {"task_id", s.best->task_id}, {"score", score_or_null(s.best->trial.score)}};
}

// The trials in trial-id order (the summary ranks them best first).
std::vector<const TrialView*> by_trial_id(const SearchSummary& s) {
  std::vector<const TrialView*> out;
  for (const auto& t : s.trials) out.push_back(&t);
  std::sort(out.begin(), out.end(), [](const auto* a, const auto* b) { return a->trial.trial_id < b->trial.trial_id; });
  return out;
}

Json trial_json(const TrialView& v, const std::vector<std::string>& parameters, const std::map<std::int64_t, Task>& tasks,
                const std::map<std::int64_t, Json>& epochs_reported) {
  const Json& hp = v.trial.hyper_parameters;
  Json space = Json::object();
  for (const auto& p : parameters)
    if (hp.contains(p)) space[p] = hp[p];
  Json epochs = Json::object();
  for (const auto& [e, value] : v.trial.epoch_values) epochs[std::to_string(e)] = value;
  const auto task = tasks.find(v.task_id);
  return {{"trial_id", v.trial.trial_id},
          {"status", to_string(v.trial.status)},
          {"task_id", v.task_id ? Json(v.task_id) : Json(nullptr)},
          {"task_status", v.task_status},
          {"bracket", tuner_value(hp, "bracket")},
          {"round", tuner_value(hp, "round")},
          {"epochs", tuner_value(hp, "epochs")},
          {"initial_epoch", tuner_value(hp, "initial_epoch")},
          {"parent_trial", tuner_value(hp, "trial_id")},
          // PBT's lineage (pbt_oracle.cpp): the member, its segment, whose weights it took
          {"member", tuner_value(hp, "member")},
          {"segment", tuner_value(hp, "segment")},
          {"exploited_member", tuner_value(hp, "exploited_member")},
          {"exploited_trial", tuner_value(hp, "exploited_trial")},
          // one value per objective in a search of several (null with one)
          {"values", v.trial.values.empty() ? Json(nullptr) : Json(v.trial.values)},
          {"hyper_parameters", space},
          {"score", score_or_null(v.trial.score)},
          {"epoch_values", epochs},
          {"started", task == tasks.end() ? Json(nullptr) : time_or_null(task->second.started_at)},
          {"finished", task == tasks.end() ? Json(nullptr) : time_or_null(task->second.finished_at)},
          {"error", v.error},
          {"last_epoch", epochs_reported.count(v.task_id) ? epochs_reported.at(v.task_id) : Json(nullptr)}};
}

// Hyperband's brackets (most exploratory first) and their rounds; ASHA's rungs as bracket 0's
// rounds. Empty for oracles without them.
Json brackets_json(const std::vector<const TrialView*>& trials) {
  std::map<int, std::map<int, Json>, std::greater<>> brackets;  // bracket -> round -> {epochs, trials}
  for (const auto* v : trials) {
    const Json& hp = v->trial.hyper_parameters;
    if (!hp.contains("tuner/bracket") || !hp.contains("tuner/round")) continue;
    Json& round = brackets[hp["tuner/bracket"].get<int>()][hp["tuner/round"].get<int>()];
    if (round.is_null()) round = {{"epochs", tuner_value(hp, "epochs")}, {"trials", Json::array()}};
    round["trials"].push_back(v->trial.trial_id);
  }
  Json out = Json::array();
  for (const auto& [b, rounds] : brackets) {
    Json rs = Json::array();
    for (const auto& [r, round] : rounds) rs.push_back({{"round", r}, {"epochs", round["epochs"]}, {"trials", round["trials"]}});
    out.push_back({{"bracket", b}, {"rounds", rs}});
  }
  return out;
}

// The best score so far at each scored trial's end, in the order the trials' tasks ended.
Json best_so_far_json(const SearchSummary& s, const std::map<std::int64_t, Task>& tasks, std::int64_t created) {
  std::vector<std::pair<std::int64_t, const TrialView*>> ended;
  for (const auto& v : s.trials) {
    const auto t = tasks.find(v.task_id);
    if (v.trial.score && std::isfinite(*v.trial.score) && t != tasks.end() && t->second.finished_at)
      ended.emplace_back(t->second.finished_at, &v);
  }
  std::sort(ended.begin(), ended.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : a.second->trial.trial_id < b.second->trial.trial_id;
  });
  Json out = Json::array();
  std::optional<double> best;
  for (const auto& [finished, v] : ended) {
    const double score = *v->trial.score;
    if (!best || s.objective.better(score, *best)) best = score;
    out.push_back({{"time_s", static_cast<double>(finished - created) / 1e6},
                   {"trial_id", v->trial.trial_id},
                   {"score", score},
                   {"best", *best}});
  }
  return out;
}

// A cell of the hyperparameters table: numbers (and non-finite ones) and strings as they are,
// anything else as its JSON text.
Json cell(const Json& v) {
  if (v.is_number() || v.is_string() || v.is_null()) return v;
  return v.dump();
}

// A run's result's numbers, as metric columns (ids are not metrics).
void add_result_metrics(const Json& result, Json& values, std::set<std::string>& metrics) {
  if (!result.is_object()) return;
  for (const auto& [k, v] : result.items()) {
    if (!v.is_number() || k == "model_id" || values.contains(k)) continue;
    values[k] = v;
    metrics.insert(k);
  }
}

Json column_json(const std::string& name, const char* kind, const Json& rows) {
  bool numbers = true;
  for (const auto& r : rows) {
    const auto v = r["values"].find(name);
    if (v != r["values"].end() && !v->is_null() && !v->is_number()) numbers = false;
  }
  return {{"name", name}, {"kind", kind}, {"type", numbers ? "number" : "string"}};
}

Json search_hparams(Hub& hub, const std::string& name) {
  const Document doc = search_document(hub, name);
  const SearchSummary s = load_search_summary(hub.uri(), hub.project_name(), name);
  std::vector<std::string> params = space_parameters(doc);
  Json rows = Json::array();
  std::set<std::string> metrics;
  bool has_epochs = false;
  for (const auto* v : by_trial_id(s)) {
    const Json& hp = v->trial.hyper_parameters;
    Json values = Json::object();
    for (const auto& p : params)
      if (hp.contains(p)) values[p] = cell(hp[p]);
    if (hp.contains("tuner/epochs")) {
      values["tuner/epochs"] = hp["tuner/epochs"];
      has_epochs = true;
    }
    values[s.objective.name] = score_or_null(v->trial.score);
    add_result_metrics(v->result, values, metrics);
    rows.push_back({{"id", v->trial.trial_id},
                    {"task_id", v->task_id ? Json(v->task_id) : Json(nullptr)},
                    {"status", to_string(v->trial.status)},
                    {"values", values}});
  }
  if (has_epochs) params.push_back("tuner/epochs");
  Json columns = Json::array();
  for (const auto& p : params) columns.push_back(column_json(p, "param", rows));
  columns.push_back(column_json(s.objective.name, "metric", rows));
  for (const auto& m : metrics)
    if (m != s.objective.name) columns.push_back(column_json(m, "metric", rows));
  return encode_non_finite(Json{{"source", "search"},
                                {"search", name},
                                {"objective", {{"name", s.objective.name}, {"maximize", s.objective.maximize}}},
                                {"columns", columns},
                                {"rows", rows}});
}

// The tuner's bookkeeping keys, left out of a task's hyperparameters (but the epochs it trains).
bool is_tuner_key(const std::string& k) { return k.rfind("tuner/", 0) == 0 && k != "tuner/epochs"; }

Json task_hparams(Hub& hub) {
  TaskQueue queue(hub);
  Json rows = Json::array();
  std::set<std::string> params, metrics;
  for (const auto& t : queue.find_tasks({}, {{"id", 1}})) {
    Json values = Json::object();
    if (t.spec.hyper_parameters.is_object())
      for (const auto& [k, v] : t.spec.hyper_parameters.items()) {
        if (is_tuner_key(k)) continue;
        values[k] = cell(v);
        params.insert(k);
      }
    add_result_metrics(t.result, values, metrics);
    rows.push_back({{"id", t.id}, {"task_id", t.id}, {"status", to_string(t.status)}, {"values", values}});
  }
  Json columns = Json::array();
  for (const auto& p : params) columns.push_back(column_json(p, "param", rows));
  for (const auto& m : metrics)
    if (!params.count(m)) columns.push_back(column_json(m, "metric", rows));
  return encode_non_finite(Json{{"source", "tasks"}, {"search", nullptr}, {"objective", nullptr}, {"columns", columns},
                                {"rows", rows}});
}

}  // namespace

Json searches_json(Hub& hub) {
  Json out = Json::array();
  for (const auto& doc : hub.find_documents(kTrials, {{"kind", "search"}})) {
    const std::string name = doc.tags.value("search", "");
    const SearchSummary s = load_search_summary(hub.uri(), hub.project_name(), name);
    std::map<std::string, int> statuses;
    for (const auto& v : s.trials) ++statuses[to_string(v.trial.status)];
    out.push_back({{"name", name},
                   {"oracle", s.oracle},
                   {"objective", s.objective.to_string()},
                   {"created", doc.time},
                   {"done", s.done},
                   {"reason", s.reason},
                   {"trials", s.trials.size()},
                   {"statuses", statuses},
                   {"best", best_json(s)}});
  }
  return encode_non_finite(Json{{"searches", out}});
}

Json search_json(Hub& hub, const std::string& name) {
  const Document doc = search_document(hub, name);
  const SearchSummary s = load_search_summary(hub.uri(), hub.project_name(), name);
  const auto parameters = space_parameters(doc);
  const auto tasks = tasks_of(hub, name);
  const auto trials = by_trial_id(s);
  Json rows = Json::array();
  const auto epochs_reported = last_epochs(hub, tasks);
  for (const auto* v : trials) rows.push_back(trial_json(*v, parameters, tasks, epochs_reported));
  Json body = {{"name", name},
               {"oracle", s.oracle},
               {"objective", s.objective.to_string()},
               {"metric", s.objective.name},
               {"maximize", s.objective.maximize},
               {"pruner", doc.tags.value("pruner", Json(nullptr))},  // null: none (tune/pruner.h)
               {"objectives", objectives_json(s)},
               {"pareto_front", pareto_front_json(s)},
               {"created", doc.time},
               {"done", s.done},
               {"reason", s.reason},
               {"parameters", parameters},
               {"best", best_json(s)},
               {"trials", rows},
               {"brackets", brackets_json(trials)},
               {"best_so_far", best_so_far_json(s, tasks, doc.time)}};
  body = encode_non_finite(body);
  body["version"] = sha256_hex(body.dump()).substr(0, 16);
  return body;
}

Json hparams_json(Hub& hub, const std::string& search) {
  return search.empty() ? task_hparams(hub) : search_hparams(hub, search);
}

}  // namespace tensorhub
