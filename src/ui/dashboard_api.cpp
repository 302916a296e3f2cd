// The dashboard's JSON API: one function per endpoint over Hub's and TaskQueue's public API.
#include "dashboard_api.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "tensorhub/core/clock.h"
#include "tensorhub/core/error.h"
#include "tensorhub/core/hash.h"
#include "tensorhub/core/process.h"
#include "tensorhub/queue/task_queue.h"
#include "tensorhub/queue/epoch_report.h"
#include "tensorhub/store/lineage.h"
#include "tensorhub/store/model_aliases.h"
#include "tensorhub/train/layer_spec.h"
#include "tensorhub/tune/trials.h"

namespace tensorhub {
namespace {

Json counts_json(const TaskCounts& c) {
  return {{"pending", c.pending},     {"running", c.running},     {"finished", c.finished},
          {"failed", c.failed},       {"cancelled", c.cancelled}, {"total", c.total()}};
}

// Null for 0 ("not yet"), else the microseconds.
Json time_or_null(std::int64_t micros) { return micros ? Json(micros) : Json(nullptr); }

Json duration_s(const Task& t, std::int64_t now) {
  if (!t.started_at) return nullptr;
  const std::int64_t end = t.status == TaskStatus::kRunning ? now : (t.finished_at ? t.finished_at : now);
  return static_cast<double>(std::max<std::int64_t>(0, end - t.started_at)) / 1e6;
}

// The end of the output of a task that failed (or has failed attempts): what a person reads
// first to see why.
std::string error_tail(const Task& t) {
  if (t.status != TaskStatus::kFailed && t.failures == 0) return "";
  const std::string& tail = t.log_tail;
  return tail.size() <= kErrorTailBytes ? tail : tail.substr(tail.size() - kErrorTailBytes);
}

}  // namespace

Json task_resources_json(const TaskResources& r) {
  if (r.empty()) return nullptr;
  Json out = r.to_json();
  out["text"] = r.to_string();
  return out;
}

namespace {

Json task_row(const Task& t, std::int64_t now) {
  Json row = {{"id", t.id},
              {"task_name", t.spec.task_name},
              {"status", to_string(t.status)},
              {"attempt", t.attempt},
              {"failures", t.failures},
              {"max_attempts", t.spec.max_attempts},
              {"runner", t.lease_owner},
              {"created", t.time},
              {"started", time_or_null(t.started_at)},
              {"finished", time_or_null(t.finished_at)},
              {"duration_s", duration_s(t, now)},
              {"hyper_parameters", t.spec.hyper_parameters},
              {"result", t.result},
              {"error", t.error},
              {"error_tail", error_tail(t)},
              {"resources", task_resources_json(t.spec.resources)},
              {"command", t.spec.command},
              // A script task's file name, which create_task always stores (its text stays out
              // of the list); "" for other tasks.
              {"script_name", t.spec.script.empty() ? "" : t.spec.script_name}};
  return encode_non_finite(row);
}

std::int64_t parse_integer(const std::string& text, const std::string& name, std::int64_t fallback) {
  if (text.empty()) return fallback;
  std::size_t used = 0;
  std::int64_t value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size()) throw InvalidArgument(name + " must be an integer, got '" + text + "'");
  return value;
}

// Weights of one layer as Keras's summary() counts them (trainable and not).
std::int64_t layer_params(const LayerSpec& l) {
  switch (l.kind) {
    case LayerKind::kDense:
      // Keras's Dense acts on the last axis.
      return l.input_shape.back() * l.units + (l.use_bias ? l.units : 0);
    case LayerKind::kConv2D:
      return l.window[0] * l.window[1] * l.input_shape.back() * l.units + (l.use_bias ? l.units : 0);
    case LayerKind::kConv1D:
      return l.window[0] * l.input_shape.back() * l.units + (l.use_bias ? l.units : 0);
    case LayerKind::kEmbedding:
      return l.input_dim * l.units;
    case LayerKind::kBatchNormalization:
      return l.input_shape.back() * (2 + (l.center ? 1 : 0) + (l.scale_gamma ? 1 : 0));
    default:
      return 0;
  }
}

const char* layer_type(LayerKind k) {
  switch (k) {
    case LayerKind::kInput: return "Input";
    case LayerKind::kDense: return "Dense";
    case LayerKind::kDropout: return "Dropout";
    case LayerKind::kFlatten: return "Flatten";
    case LayerKind::kActivation: return "Activation";
    case LayerKind::kRescaling: return "Rescaling";
    case LayerKind::kConv2D: return "Conv2D";
    case LayerKind::kMaxPooling2D: return "MaxPooling2D";
    case LayerKind::kBatchNormalization: return "BatchNormalization";
    case LayerKind::kReshape: return "Reshape";
    case LayerKind::kEmbedding: return "Embedding";
    case LayerKind::kGlobalAveragePooling1D: return "GlobalAveragePooling1D";
    case LayerKind::kConv1D: return "Conv1D";
    case LayerKind::kMaxPooling1D: return "MaxPooling1D";
  }
  return "?";
}

}  // namespace

namespace {

// What the Overview shows of one project, read through `hub`'s connection (any project).
Json project_json(Hub& hub, const std::string& name) {
  Hub project = hub.with_project(name);
  const TaskCounts c = TaskQueue(project).count_tasks();
  return {{"name", name},
          {"served", name == hub.project_name()},
          {"datasets", project.count_documents(Collection::kDatasets)},
          {"models", project.count_documents(Collection::kModels)},
          {"searches", project.count_documents(kTrials, {{"kind", "search"}})},
          {"tasks", counts_json(c)}};
}

}  // namespace

Json projects_json(Hub& hub) {
  // The served project first (even while it is empty), then the others by name.
  Json projects = Json::array({project_json(hub, hub.project_name())});
  std::vector<std::string> names = hub.list_projects();
  const std::vector<std::string> with_tasks = TaskQueue(hub).list_projects();
  names.insert(names.end(), with_tasks.begin(), with_tasks.end());
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  for (const auto& name : names)
    if (name != hub.project_name()) projects.push_back(project_json(hub, name));
  return {{"projects", std::move(projects)}};
}

namespace {

// The last epoch each running task's current attempt reported: {task id: {"epoch", "logs"}}.
std::map<std::int64_t, Json> last_epochs(Hub& hub, const std::vector<Task>& tasks) {
  std::vector<std::int64_t> running;
  std::map<std::int64_t, int> attempt;
  for (const auto& t : tasks)
    if (t.status == TaskStatus::kRunning) {
      running.push_back(t.id);
      attempt[t.id] = t.attempt;
    }
  std::map<std::int64_t, Json> last;
  if (running.empty()) return last;
  for (const auto& r : find_epoch_reports(hub, running))  // oldest first: later ones overwrite
    if (r.of_attempt(attempt[r.task_id])) last[r.task_id] = {{"epoch", r.epoch}, {"logs", encode_non_finite(r.logs)}};
  return last;
}

}  // namespace

Json tasks_json(Hub& hub) {
  TaskQueue queue(hub);
  const auto tasks = queue.find_tasks(Json::object(), {{"id", -1}});
  const std::int64_t now = now_micros();
  const auto epochs = last_epochs(hub, tasks);
  // What each task's attempts used, without their GPU samples (the task's detail has those).
  std::vector<std::int64_t> ids;
  for (const auto& t : tasks) ids.push_back(t.id);
  const auto attempts = queue.find_attempts(ids);
  const auto waiting = queue.waiting_for(tasks);  // as `task list`: why a pending task waits
  Json rows = Json::array();
  // The version covers what changes (not the running duration, which the page computes), so
  // a long poll answers on a change, not on every tick of the clock.
  Json versioned = Json::array();
  for (const auto& t : tasks) {
    rows.push_back(task_row(t, now));
    const auto e = epochs.find(t.id);
    rows.back()["last_epoch"] = e == epochs.end() ? Json(nullptr) : e->second;
    const auto w = waiting.find(t.id);
    rows.back()["waiting_for"] = w == waiting.end() ? Json(nullptr) : Json(w->second);
    rows.back()["attempts"] = Json::array();
    if (const auto a = attempts.find(t.id); a != attempts.end())
      for (const auto& attempt : a->second) rows.back()["attempts"].push_back(attempt.to_json(false));
    Json v = rows.back();
    v.erase("duration_s");
    versioned.push_back(std::move(v));
  }
  return {{"version", sha256_hex(versioned.dump()).substr(0, 16)}, {"now", now}, {"tasks", std::move(rows)}};
}

ModelQuery parse_model_query(const std::string& filter, const std::string& sort, const std::string& offset,
                             const std::string& limit) {
  ModelQuery q;
  if (!filter.empty()) {
    Json parsed;
    try {
      parsed = Json::parse(filter);
    } catch (const Json::parse_error& e) {
      // e.what() is "[json.exception.parse_error.101] parse error at line 1, column 2: ...": the
      // reader needs the position and the reason, not the library's error code.
      std::string why = e.what();
      if (const auto end = why.find("] "); why.starts_with("[json.exception.") && end != std::string::npos)
        why.erase(0, end + 2);
      throw InvalidArgument("filter is not JSON: " + why);
    }
    if (!parsed.is_object()) throw InvalidArgument("filter must be a JSON object, got " + parsed.dump());
    q.filter = decode_non_finite(parsed);
  }
  if (!sort.empty()) {
    try {
      q.sort = parse_sort(sort);
    } catch (const Error& e) {
      throw InvalidArgument(e.message());  // it names the sort ("sort \"x:5\": direction ...")
    }
  }
  q.offset = parse_integer(offset, "offset", 0);
  q.limit = parse_integer(limit, "limit", 50);
  if (q.offset < 0) throw InvalidArgument("offset must be 0 or more, got " + std::to_string(q.offset));
  if (q.limit < 1 || q.limit > 1000) throw InvalidArgument("limit must be in 1..1000, got " + std::to_string(q.limit));
  return q;
}

namespace {

// The first `count` models matching `filter` in `sort` order with the first sort key's NaN and
// missing values last (the leaderboard's rule, ModelIndex::first's absent_last), from the
// database: the models that have a value, then those whose value is NaN, then those without
// one (missing or null), each part sorted and cut by the database.
std::vector<Document> find_models_absent_last(Hub& hub, const Json& filter, const SortSpec& sort, std::int64_t count) {
  const std::string& key = sort.front().first;
  if (key == "id" || key == "time" || key == "project_name") return hub.find_models(filter, sort, count);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Json parts[] = {{{key, {{"$ne", nullptr}}}, {"$nor", Json::array({Json{{key, nan}}})}},
                        {{key, nan}},
                        {{key, nullptr}}};
  std::vector<Document> out;
  for (const Json& part : parts) {
    if (static_cast<std::int64_t>(out.size()) >= count) break;
    const Json f = filter.empty() ? part : Json{{"$and", Json::array({filter, part})}};
    for (auto& d : hub.find_models(f, sort, count - static_cast<std::int64_t>(out.size()))) out.push_back(std::move(d));
  }
  return out;
}

}  // namespace

Json models_json(Hub& hub, const ModelQuery& query, ModelIndex* index) {
  // Unfiltered: sorted in memory by the index. Filtered: the database filters, sorts and cuts
  // the page (and counts apart), reading only the rows up to the page's end. Either way the
  // sorted column's NaN and missing values come last in both directions (MLflow's rule: a
  // leaderboard sorted by a loss must not open on diverged runs), unlike the store's order.
  std::vector<Document> docs;
  std::int64_t total = 0;
  if (index && query.filter.empty()) {
    std::tie(docs, total) = index->first(hub, query.sort, query.offset + query.limit, /*absent_last=*/true);
  } else {
    total = hub.count_documents(Collection::kModels, query.filter);
    docs = find_models_absent_last(hub, query.filter, query.sort, query.offset + query.limit);
  }
  const auto begin = std::min<std::int64_t>(query.offset, static_cast<std::int64_t>(docs.size()));
  const auto end = static_cast<std::int64_t>(docs.size());
  Json models = Json::array();
  std::set<std::string> keys;
  for (auto i = begin; i < end; ++i) {
    const auto& d = docs[static_cast<std::size_t>(i)];
    // Not lineage (store/lineage.h): a record of where the model came from, shown on its page,
    // is no leaderboard column.
    for (const auto& [k, v] : d.tags.items())
      if (k != "lineage") keys.insert(k);
    models.push_back({{"id", d.id},
                      {"model_name", d.tags.value("model_name", "")},
                      {"time", d.time},
                      {"tags", encode_non_finite(d.tags)}});
  }
  return {{"total", total}, {"offset", query.offset}, {"limit", query.limit}, {"keys", keys}, {"models", models}};
}

Document find_model(Hub& hub, std::int64_t id) {
  auto docs = hub.find_models({{"id", id}}, {}, 1);
  if (docs.empty())
    throw NotFound("no model with id " + std::to_string(id) + " in project " + hub.project_name());
  return std::move(docs.front());
}

namespace {

std::string serve_command(Hub& hub, const Document& d) {
  const std::string name = d.tags.value("model_name", "");
  return "tensorhub serve --hub " + shell_quote(hub.display_uri()) + " --project " + shell_quote(hub.project_name()) +
         " --hub_model " + shell_quote(name) + " --hub_filter " +
         shell_quote(Json({{"id", d.id}}).dump()) + " --model_name " + shell_quote(name);
}

}  // namespace

std::vector<std::byte> model_part(Hub& hub, std::int64_t id, const std::string& part) {
  if (part != "model.json" && part != "weights.safetensors")
    throw InvalidArgument("part must be model.json or weights.safetensors, got '" + part + "'");
  const Document d = find_model(hub, id);
  auto bytes = hub.load_model_part(d, part);
  if (!bytes) throw NotFound("model " + std::to_string(id) + " has no " + part);
  return std::move(*bytes);
}

// The aliases of model name `name` (every one, wherever it points), for the model's page.
Json aliases_json(Hub& hub, const std::string& name) {
  Json out = Json::array();
  for (const ModelAlias& a : hub.find_model_aliases(name)) out.push_back(to_json(a));
  return out;
}

Json model_json(Hub& hub, std::int64_t id) { return model_json(hub, find_model(hub, id)); }

Json model_json(Hub& hub, const Document& d) {
  const auto part = hub.load_model_part(d, "model.json");
  if (!part) throw NotFound("model " + std::to_string(d.id) + " has no model.json");
  const Json architecture = Json::parse(std::string(reinterpret_cast<const char*>(part->data()), part->size()));
  const NetworkSpec net = parse_network(architecture);
  Json layers = Json::array();
  std::int64_t total = 0;
  for (const auto& l : net.layers) {
    const auto params = layer_params(l);
    total += params;
    layers.push_back({{"name", l.name},
                      {"type", layer_type(l.kind)},
                      {"input_shape", l.input_shape},
                      {"output_shape", l.output_shape},
                      {"params", params}});
  }
  return {{"id", d.id},
          {"model_name", d.tags.value("model_name", "")},
          {"time", d.time},
          {"tags", encode_non_finite(d.tags)},
          {"architecture", architecture},
          {"input_shape", net.input_shape},
          {"output_shape", net.output_shape},
          {"total_params", total},
          {"layers", layers},
          {"serve_command", serve_command(hub, d)},
          {"aliases", aliases_json(hub, d.tags.value("model_name", ""))},
          {"lineage", encode_non_finite(lineage_chain(hub, d))}};
}

}  // namespace tensorhub
