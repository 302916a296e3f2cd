// The Curves view's API (curves_api.h): series from epoch reports, training logs and event
// files, reduced per pixel bucket on the server.
#include "curves_api.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "tensorhub/core/error.h"
#include "tensorhub/core/mutex.h"
#include "tensorhub/queue/task_queue.h"
#include "tensorhub/queue/epoch_report.h"

namespace tensorhub {

namespace fs = std::filesystem;

namespace {

constexpr const char* kEpochs = "epochs";
constexpr const char* kLogs = "logs";
constexpr const char* kLogdir = "logdir";

// A number of a stored document: a JSON number, or its {"$numberDouble": "NaN"} form.
std::optional<double> number_of(const Json& v) {
  if (v.is_number()) return v.get<double>();
  if (v.is_object() && v.size() == 1 && v.contains("$numberDouble") && v["$numberDouble"].is_string()) {
    const std::string s = v["$numberDouble"];
    if (s == "NaN") return std::numeric_limits<double>::quiet_NaN();
    if (s == "Infinity") return std::numeric_limits<double>::infinity();
    if (s == "-Infinity") return -std::numeric_limits<double>::infinity();
  }
  return std::nullopt;
}

const char* nonfinite_name(double v) { return std::isnan(v) ? "NaN" : v > 0 ? "Infinity" : "-Infinity"; }

// ---- epochs: the per-epoch reports of tasks ------------------------------------------------------

// Each task's reports of its latest attempt that reported (an earlier attempt's curve would
// zig-zag under the retry's), oldest first.
std::map<std::int64_t, std::vector<EpochReport>> latest_attempt_reports(std::vector<EpochReport> reports) {
  std::map<std::int64_t, std::int64_t> latest;
  for (const auto& r : reports) latest[r.task_id] = std::max(latest[r.task_id], r.attempt.value_or(0));
  std::map<std::int64_t, std::vector<EpochReport>> by_task;
  for (auto& r : reports)
    if (r.of_attempt(latest[r.task_id])) by_task[r.task_id].push_back(std::move(r));
  return by_task;
}

std::vector<EpochReport> all_epoch_reports(Hub& hub) {
  std::set<std::int64_t> ids;
  for (const auto& d : hub.find_documents(kEpochReports, {{"kind", "epoch"}}, {{"id", 1}}))
    ids.insert(d.tags.value("task_id", std::int64_t{0}));
  return find_epoch_reports(hub, std::vector<std::int64_t>(ids.begin(), ids.end()));
}

std::vector<std::string> sorted_keys(const std::set<std::string>& keys) { return {keys.begin(), keys.end()}; }

void add_epoch_runs(Hub& hub, Json& runs) {
  const auto by_task = latest_attempt_reports(all_epoch_reports(hub));
  if (by_task.empty()) return;
  TaskQueue queue(hub);
  std::map<std::int64_t, Task> tasks;
  for (const auto& t : queue.find_tasks()) tasks.emplace(t.id, t);
  for (const auto& [id, reports] : by_task) {
    std::set<std::string> tags;
    for (const auto& r : reports)
      for (const auto& [k, v] : r.logs.items())
        if (number_of(v)) tags.insert(k);
    const auto t = tasks.find(id);
    Json run = {{"source", kEpochs}, {"run", std::to_string(id)},
                {"name", "task " + std::to_string(id) + (t == tasks.end() ? "" : ": " + t->second.spec.task_name)},
                {"tags", sorted_keys(tags)}, {"points", reports.size()}};
    run["status"] = t == tasks.end() ? Json(nullptr) : Json(to_string(t->second.status));
    runs.push_back(std::move(run));
  }
}

std::vector<SeriesPoint> epoch_series(Hub& hub, const std::string& run, const std::string& tag) {
  std::int64_t id = 0;
  const auto [end, ec] = std::from_chars(run.data(), run.data() + run.size(), id);
  if (ec != std::errc() || end != run.data() + run.size())
    throw NotFound("no task '" + run + "': epochs runs are task ids");
  auto by_task = latest_attempt_reports(find_epoch_reports(hub, {id}));
  if (by_task.empty()) throw NotFound("task " + run + " has no epoch reports");
  std::vector<SeriesPoint> points;
  for (const auto& r : by_task[id])
    if (const auto it = r.logs.find(tag); it != r.logs.end())
      if (const auto v = number_of(*it)) points.push_back({r.epoch, static_cast<double>(r.time) / 1e6, *v});
  if (points.empty()) throw NotFound("task " + run + "'s epoch reports have no metric '" + tag + "'");
  return points;
}

// ---- logs: the project's training logs -----------------------------------------------------------

// The run a training log belongs to (see curves_api.h).
std::string log_run(const Json& tags) {
  if (const auto it = tags.find("task_id"); it != tags.end() && it->is_number_integer())
    return "task_id=" + std::to_string(it->get<std::int64_t>());
  std::string run;
  for (const auto& [k, v] : tags.items())
    if (v.is_string()) run += (run.empty() ? "" : ",") + k + "=" + v.get<std::string>();
  return run.empty() ? "all" : run;
}

bool is_log_metric(const std::string& key, const Json& v) {
  return key != "epoch" && key != "task_id" && !v.is_string() && number_of(v).has_value();
}

std::map<std::string, std::vector<Document>> logs_by_run(Hub& hub) {
  std::map<std::string, std::vector<Document>> runs;
  for (auto& d : hub.find_training_logs(Json::object(), {{"id", 1}})) runs[log_run(d.tags)].push_back(std::move(d));
  return runs;
}

void add_log_runs(Hub& hub, Json& runs) {
  for (const auto& [name, docs] : logs_by_run(hub)) {
    std::set<std::string> tags;
    for (const auto& d : docs)
      for (const auto& [k, v] : d.tags.items())
        if (is_log_metric(k, v)) tags.insert(k);
    runs.push_back({{"source", kLogs}, {"run", name}, {"name", "logs " + name}, {"tags", sorted_keys(tags)},
                    {"points", docs.size()}});
  }
}

std::vector<SeriesPoint> log_series(Hub& hub, const std::string& run, const std::string& tag) {
  auto runs = logs_by_run(hub);
  const auto it = runs.find(run);
  if (it == runs.end()) throw NotFound("no training logs of run '" + run + "'");
  std::vector<SeriesPoint> points;
  std::int64_t position = 0;
  for (const auto& d : it->second) {
    const std::int64_t step = d.tags.value("epoch", Json(position)).is_number_integer()
                                  ? d.tags.value("epoch", Json(position)).get<std::int64_t>()
                                  : position;
    ++position;
    if (const auto v = d.tags.find(tag); v != d.tags.end() && is_log_metric(tag, *v))
      points.push_back({step, static_cast<double>(d.time) / 1e6, *number_of(*v)});
  }
  if (points.empty()) throw NotFound("the training logs of run '" + run + "' have no metric '" + tag + "'");
  return points;
}

// ---- logdir: TensorBoard event files -------------------------------------------------------------

// The directory of a logdir run, only if find_event_runs lists it: a run name is never a path
// the page may choose (no "../").
fs::path logdir_run_dir(const fs::path& logdir, const std::string& run) {
  if (logdir.empty()) throw NotFound("no logdir runs: start tensorhub ui with --logdir DIR");
  const auto runs = find_event_runs(logdir);
  if (std::find(runs.begin(), runs.end(), run) == runs.end())
    throw NotFound("no run '" + run + "' under " + logdir.string());
  return run_directory(logdir, run);
}

Json session_json(const HParamsSession& s) {
  Json hparams = Json::object();
  for (const auto& [k, v] : s.hparams)
    hparams[k] = v.is_number() ? Json(v.number()) : v.is_bool() ? Json(v.boolean()) : Json(v.string());
  const char* status[] = {"unknown", "success", "failure", "running"};
  return {{"hparams", encode_non_finite(hparams)}, {"group_name", s.group_name},
          {"status", status[static_cast<int>(s.status) & 3]}, {"start_time_secs", s.start_time_secs},
          {"end_time_secs", s.end_time_secs}};
}

void add_logdir_runs(const fs::path& logdir, EventRunCache& cache, Json& runs) {
  for (const auto& name : find_event_runs(logdir)) {
    const auto events = cache.get(name == "." ? logdir : logdir / name);
    Json tags = Json::array(), histograms = Json::array();
    std::size_t points = 0;
    for (const auto& [tag, series] : events->scalars) {
      tags.push_back(tag);
      points = std::max(points, series.size());
    }
    for (const auto& [tag, series] : events->histograms) histograms.push_back(tag);
    Json run = {{"source", kLogdir}, {"run", name}, {"name", name}, {"tags", tags},
                {"histograms", histograms}, {"points", points}};
    if (events->session) run["hparams"] = session_json(*events->session);
    runs.push_back(std::move(run));
  }
}

std::vector<SeriesPoint> logdir_series(const fs::path& logdir, EventRunCache& cache, const std::string& run,
                                       const std::string& tag) {
  const auto events = cache.get(logdir_run_dir(logdir, run));
  const auto it = events->scalars.find(tag);
  if (it == events->scalars.end()) throw NotFound("run '" + run + "' has no scalar '" + tag + "'");
  std::vector<SeriesPoint> points;
  points.reserve(it->second.size());
  for (const auto& e : it->second) points.push_back({e.step, e.wall_time, e.value});
  return points;
}

// ---- query parsing -------------------------------------------------------------------------------

double parse_number(const std::string& text, const std::string& name) {
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size())
    throw InvalidArgument(name + " must be a number, got '" + text + "'");
  return v;
}

double x_of(const SeriesPoint& p, SeriesX x, double start_wall) {
  switch (x) {
    case SeriesX::kStep: return static_cast<double>(p.step);
    case SeriesX::kWall: return p.wall_time;
    case SeriesX::kRelative: return p.wall_time - start_wall;
  }
  return 0;
}

const char* x_name(SeriesX x) { return x == SeriesX::kStep ? "step" : x == SeriesX::kWall ? "wall" : "relative"; }

// Shortest text that reads back as the same double.
std::string exact(double v) {
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, end);
}

}  // namespace

// ---- EventRunCache ---------------------------------------------------------------------------------

struct EventRunCache::Impl {
  struct Entry {
    std::vector<std::tuple<std::string, std::uintmax_t, fs::file_time_type>> files;
    std::shared_ptr<const RunEvents> events;
  };
  Mutex mutex;
  std::map<fs::path, Entry> entries TENSORHUB_GUARDED_BY(mutex);

  static std::vector<std::tuple<std::string, std::uintmax_t, fs::file_time_type>> stamp(const fs::path& dir) {
    std::vector<std::tuple<std::string, std::uintmax_t, fs::file_time_type>> files;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.is_regular_file() && e.path().filename().string().find("tfevents") != std::string::npos)
        files.emplace_back(e.path().filename().string(), e.file_size(), e.last_write_time());
    std::sort(files.begin(), files.end());
    return files;
  }
};

EventRunCache::EventRunCache() : impl_(std::make_unique<Impl>()) {}
EventRunCache::~EventRunCache() = default;

std::shared_ptr<const RunEvents> EventRunCache::get(const fs::path& dir) {
  auto files = Impl::stamp(dir);
  {
    MutexLock lock(impl_->mutex);
    const auto it = impl_->entries.find(dir);
    if (it != impl_->entries.end() && it->second.files == files) return it->second.events;
  }
  // Read outside the lock: two requests may read the same run once each, none waits on another.
  auto events = std::make_shared<const RunEvents>(read_run_events(dir));
  MutexLock lock(impl_->mutex);
  impl_->entries[dir] = {std::move(files), events};
  return events;
}

// ---- the API -------------------------------------------------------------------------------------

SeriesQuery parse_series_query(const std::string& source, const std::string& run, const std::string& tag,
                               const std::string& x, const std::string& width, const std::string& reduce,
                               const std::string& smoothing) {
  SeriesQuery q;
  if (source != kEpochs && source != kLogs && source != kLogdir)
    throw InvalidArgument("source must be epochs, logs or logdir, got '" + source + "'");
  if (run.empty()) throw InvalidArgument("run is missing (see /api/runs)");
  if (tag.empty()) throw InvalidArgument("tag is missing (see /api/runs)");
  q.source = source;
  q.run = run;
  q.tag = tag;
  if (x.empty() || x == "step") q.x = SeriesX::kStep;
  else if (x == "wall") q.x = SeriesX::kWall;
  else if (x == "relative") q.x = SeriesX::kRelative;
  else throw InvalidArgument("x must be step, wall or relative, got '" + x + "'");
  if (!width.empty()) {
    const double w = parse_number(width, "width");
    if (!(w >= 1 && w <= 20000)) throw InvalidArgument("width must be in 1..20000 pixels, got '" + width + "'");
    q.width = static_cast<int>(w);
  }
  if (!reduce.empty() && reduce != "0" && reduce != "1") throw InvalidArgument("reduce must be 0 or 1, got '" + reduce + "'");
  q.reduce = reduce != "0";
  if (!smoothing.empty()) {
    q.smoothing = parse_number(smoothing, "smoothing");
    if (!(q.smoothing >= 0 && q.smoothing < 1)) throw InvalidArgument("smoothing must be in [0, 1), got '" + smoothing + "'");
  }
  return q;
}

Json runs_json(Hub* hub, const fs::path& logdir, EventRunCache& cache) {
  Json runs = Json::array();
  if (hub) {
    add_epoch_runs(*hub, runs);
    add_log_runs(*hub, runs);
  }
  if (!logdir.empty()) add_logdir_runs(logdir, cache, runs);
  return {{"logdir", logdir.empty() ? Json(nullptr) : Json(logdir.string())}, {"runs", std::move(runs)}};
}

std::vector<SeriesPoint> load_series(Hub* hub, const fs::path& logdir, EventRunCache& cache, const std::string& source,
                                     const std::string& run, const std::string& tag) {
  const auto the_hub = [&]() -> Hub& {
    if (!hub) throw NotFound("there is no hub, so no '" + source + "' runs: only logdir runs");
    return *hub;
  };
  std::vector<SeriesPoint> points;
  if (source == kEpochs) points = epoch_series(the_hub(), run, tag);
  else if (source == kLogs) points = log_series(the_hub(), run, tag);
  else if (source == kLogdir) points = logdir_series(logdir, cache, run, tag);
  else throw NotFound("no source '" + source + "': epochs, logs or logdir");
  std::stable_sort(points.begin(), points.end(), [](const SeriesPoint& a, const SeriesPoint& b) { return a.step < b.step; });
  return points;
}

std::vector<std::size_t> reduce_series(const std::vector<double>& x, const std::vector<double>& y, int buckets) {
  std::vector<std::size_t> finite;
  for (std::size_t i = 0; i < y.size(); ++i)
    if (std::isfinite(y[i])) finite.push_back(i);
  const std::size_t b = static_cast<std::size_t>(std::max(1, buckets));
  if (finite.size() <= 4 * b) return finite;
  const double x0 = x[finite.front()], span = x[finite.back()] - x0;
  struct Bucket { std::size_t first, last, min, max; bool used = false; };
  std::vector<Bucket> kept(b);
  for (std::size_t i : finite) {
    const std::size_t k = span > 0 ? std::min(b - 1, static_cast<std::size_t>((x[i] - x0) / span * static_cast<double>(b))) : 0;
    Bucket& bk = kept[k];
    if (!bk.used) {
      bk = {i, i, i, i, true};
      continue;
    }
    bk.last = i;
    if (y[i] < y[bk.min]) bk.min = i;
    if (y[i] > y[bk.max]) bk.max = i;
  }
  std::vector<std::size_t> out;
  for (const Bucket& bk : kept)
    if (bk.used) {
      std::size_t four[] = {bk.first, bk.min, bk.max, bk.last};
      std::sort(std::begin(four), std::end(four));
      for (std::size_t i : four)
        if (out.empty() || out.back() != i) out.push_back(i);
    }
  return out;
}

std::vector<double> tensorboard_smoothing(const std::vector<double>& y, double weight) {
  std::vector<double> out(y.size());
  const bool constant = std::all_of(y.begin(), y.end(), [&](double v) { return v == y.front(); });
  double last = y.empty() ? std::numeric_limits<double>::quiet_NaN() : 0.0;
  int n = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    if (constant || !std::isfinite(y[i])) {
      out[i] = y[i];
      continue;
    }
    last = last * weight + (1 - weight) * y[i];
    ++n;
    const double debias = weight == 1 ? 1.0 : 1 - std::pow(weight, n);
    out[i] = last / debias;
  }
  return out;
}

Json scalars_json(const std::vector<SeriesPoint>& points, const SeriesQuery& q) {
  const double start_wall = points.empty() ? 0.0
                                           : std::min_element(points.begin(), points.end(), [](auto& a, auto& b) {
                                               return a.wall_time < b.wall_time;
                                             })->wall_time;
  // Sorted by the chosen x (wall time may not follow the steps after a restart).
  std::vector<std::size_t> order(points.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (q.x != SeriesX::kStep)
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return points[a].wall_time < points[b].wall_time; });
  std::vector<double> x(points.size()), y(points.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    x[i] = x_of(points[order[i]], q.x, start_wall);
    y[i] = points[order[i]].value;
  }
  const auto smoothed = tensorboard_smoothing(y, q.smoothing);
  const int buckets = q.reduce ? q.width : std::numeric_limits<int>::max() / 8;
  const auto kept = reduce_series(x, y, buckets);
  Json xs = Json::array(), steps = Json::array(), ys = Json::array(), sm = Json::array();
  for (std::size_t i : kept) {
    xs.push_back(x[i]);
    steps.push_back(points[order[i]].step);
    ys.push_back(y[i]);
    sm.push_back(smoothed[i]);
  }
  // Marks: the first NaN / +Inf / -Inf of each bucket (every one unreduced).
  Json marks = Json::array();
  std::set<std::pair<std::size_t, int>> seen;
  const double x0 = x.empty() ? 0 : x.front(), span = x.empty() ? 0 : x.back() - x0;
  const auto finite = static_cast<std::size_t>(std::count_if(y.begin(), y.end(), [](double v) { return std::isfinite(v); }));
  const bool reduce = kept.size() < finite;
  std::optional<double> lo, hi;
  for (std::size_t i = 0; i < y.size(); ++i) {
    if (std::isfinite(y[i])) {
      lo = lo ? std::min(*lo, y[i]) : y[i];
      hi = hi ? std::max(*hi, y[i]) : y[i];
      continue;
    }
    const int kind = std::isnan(y[i]) ? 0 : y[i] > 0 ? 1 : 2;
    const std::size_t bucket =
        reduce && span > 0 ? std::min<std::size_t>(q.width - 1, static_cast<std::size_t>((x[i] - x0) / span * q.width)) : i;
    if (!seen.insert({bucket, kind}).second) continue;
    marks.push_back({{"x", x[i]}, {"step", points[order[i]].step}, {"value", nonfinite_name(y[i])}});
  }
  return {{"source", q.source}, {"run", q.run},       {"tag", q.tag},       {"x", x_name(q.x)},
          {"count", points.size()}, {"reduced", reduce}, {"xs", std::move(xs)}, {"steps", std::move(steps)},
          {"ys", std::move(ys)}, {"smoothed", std::move(sm)}, {"smoothing", q.smoothing}, {"marks", std::move(marks)},
          {"min", lo ? Json(*lo) : Json(nullptr)}, {"max", hi ? Json(*hi) : Json(nullptr)}, {"start_wall", start_wall}};
}

std::string scalars_csv(const std::vector<SeriesPoint>& points) {
  std::string out = "step,wall_time,value\n";
  out.reserve(points.size() * 40);
  for (const auto& p : points) {
    out += std::to_string(p.step);
    out += ',';
    out += exact(p.wall_time);
    out += ',';
    out += std::isfinite(p.value) ? exact(p.value) : std::isnan(p.value) ? "nan" : p.value > 0 ? "inf" : "-inf";
    out += '\n';
  }
  return out;
}

Json histograms_json(const fs::path& logdir, EventRunCache& cache, const std::string& run, const std::string& tag) {
  const auto events = cache.get(logdir_run_dir(logdir, run));
  const auto it = events->histograms.find(tag);
  if (it == events->histograms.end()) throw NotFound("run '" + run + "' has no histogram '" + tag + "'");
  const std::vector<double> bps = {0, 668, 1587, 3085, 5000, 6915, 8413, 9332, 10000};
  Json steps = Json::array(), wall = Json::array(), percentiles = Json::array(), mins = Json::array(),
       maxs = Json::array(), nums = Json::array();
  for (const auto& h : it->second) {
    steps.push_back(h.step);
    wall.push_back(h.wall_time);
    percentiles.push_back(histogram_percentiles(h.histogram, bps));
    mins.push_back(h.histogram.num > 0 ? h.histogram.min : 0.0);
    maxs.push_back(h.histogram.num > 0 ? h.histogram.max : 0.0);
    nums.push_back(h.histogram.num);
  }
  return {{"run", run},     {"tag", tag},   {"bps", bps},     {"steps", steps}, {"wall", wall},
          {"percentiles", percentiles}, {"min", mins}, {"max", maxs}, {"num", nums}};
}

}  // namespace tensorhub
