// The task_attempts table (task_attempt.h): TaskQueue's begin_attempt, end_attempt,
// find_attempts and the marking of lost attempts, for SQLite and PostgreSQL alike.
#include "tensorhub/queue/task_attempt.h"

#include <algorithm>

#include "task_schema.h"
#include "tensorhub/core/clock.h"
#include "tensorhub/queue/task.h"
#include "tensorhub/queue/task_queue.h"
#include "tensorhub/store/stored_json.h"

namespace tensorhub {
namespace {

constexpr const char* kAttemptColumns =
    "task_id, attempt, project_name, owner, host, started_at, finished_at, outcome, error, cpus, "
    "memory_limit_bytes, gpus, wall_s, cpu_s, peak_memory_bytes, memory_source, gpu_samples";

// Task ids per query of find_attempts(ids): well under any database's parameter limit.
constexpr std::size_t kIdsPerQuery = 500;

Json samples_json(const std::vector<GpuSample>& samples) {
  Json out = Json::array();
  for (const auto& s : samples)
    out.push_back({{"t", s.t}, {"utilization", s.utilization}, {"memory_bytes", s.memory_bytes}, {"gpu", s.gpu}});
  return out;
}

std::vector<GpuSample> samples_of(const Json& j) {
  std::vector<GpuSample> out;
  if (!j.is_array()) return out;
  for (const auto& s : j)
    if (s.is_object())
      out.push_back({s.value("t", 0.0), s.value("utilization", 0.0), s.value("memory_bytes", std::int64_t{0}),
                     s.value("gpu", 0)});
  return out;
}

TaskAttempt read_attempt(const sql::Rows& r, std::size_t i) {
  TaskAttempt a;
  a.task_id = r.int64(i, 0);
  a.attempt = static_cast<int>(r.int64(i, 1));
  a.project_name = r.text(i, 2);
  a.owner = r.text(i, 3);
  a.host = r.text(i, 4);
  a.started_at = r.int64(i, 5);
  a.finished_at = r.int64(i, 6);
  a.outcome = r.text(i, 7);
  a.error = r.text(i, 8);
  a.cpus = r.real(i, 9);
  a.memory_limit_bytes = r.int64(i, 10);
  const Json gpus = Json::parse(r.text(i, 11), nullptr, false);
  if (gpus.is_array())
    for (const auto& g : gpus)
      if (g.is_number_integer()) a.gpus.push_back(g.get<int>());
  a.usage.wall_s = r.real(i, 12);
  a.usage.cpu_s = r.real(i, 13);
  a.usage.peak_memory_bytes = r.int64(i, 14);
  a.usage.memory_source = r.text(i, 15);
  a.usage.gpu_samples = samples_of(Json::parse(r.text(i, 16), nullptr, false));
  return a;
}

}  // namespace

std::pair<double, double> gpu_utilization_summary(const std::vector<GpuSample>& samples) {
  if (samples.empty()) return {-1, -1};
  double sum = 0, most = 0;
  for (const auto& s : samples) {
    sum += s.utilization;
    most = std::max(most, s.utilization);
  }
  return {sum / static_cast<double>(samples.size()), most};
}

Json TaskAttempt::to_json(bool with_samples) const {
  const auto [mean, most] = gpu_utilization_summary(usage.gpu_samples);
  Json out = {{"task_id", task_id},
          {"attempt", attempt},
          {"owner", owner},
          {"host", host},
          {"started_at", started_at ? format_time(started_at) : ""},
          {"finished_at", finished_at ? format_time(finished_at) : ""},
          {"outcome", outcome},
          {"error", error},
          {"cpus", cpus},
          {"memory_limit_bytes", memory_limit_bytes},
          {"gpus", gpus},
          {"wall_s", usage.wall_s},
          {"cpu_s", usage.cpu_s},
          {"peak_memory_bytes", usage.peak_memory_bytes},
          {"memory_source", usage.memory_source},
          {"gpu_samples", samples_json(usage.gpu_samples)},
          {"gpu_utilization_mean", mean < 0 ? Json() : Json(mean)},
          {"gpu_utilization_max", most < 0 ? Json() : Json(most)},
          {"peak_memory", format_memory_size(usage.peak_memory_bytes)}};
  if (!with_samples) out.erase("gpu_samples");
  return out;
}

void TaskQueue::begin_attempt(const TaskAttempt& a) {
  db().execute(
      "INSERT INTO task_attempts (task_id, attempt, project_name, owner, host, started_at, cpus, "
      "memory_limit_bytes, gpus) VALUES (?, ?, ?, ?, ?, " + db().now_us() + ", ?, ?, ?) "
      "ON CONFLICT (task_id, attempt) DO UPDATE SET owner = excluded.owner, host = excluded.host, "
      "started_at = excluded.started_at, finished_at = 0, outcome = 'running', error = '', cpus = excluded.cpus, "
      "memory_limit_bytes = excluded.memory_limit_bytes, gpus = excluded.gpus",
      {a.task_id, static_cast<std::int64_t>(a.attempt), hub_.project_name(), a.owner, a.host, a.cpus,
       a.memory_limit_bytes, Json(a.gpus).dump()},
      sql::Access::kWrite);
}

bool TaskQueue::end_attempt(std::int64_t task_id, int attempt, const std::string& outcome, const std::string& error,
                            const AttemptUsage& usage) {
  return db().execute("UPDATE task_attempts SET finished_at = " + db().now_us() +
                          ", outcome = ?, error = ?, wall_s = ?, cpu_s = ?, peak_memory_bytes = ?, memory_source = ?, "
                          "gpu_samples = ? WHERE task_id = ? AND attempt = ? AND project_name = ?",
                      {outcome, error, usage.wall_s, usage.cpu_s, usage.peak_memory_bytes, usage.memory_source,
                       samples_json(usage.gpu_samples).dump(), task_id, static_cast<std::int64_t>(attempt),
                       hub_.project_name()},
                      sql::Access::kWrite)
             .changes() == 1;
}

void TaskQueue::mark_attempt_lost(std::int64_t task_id, int attempt, const std::string& error) {
  db().execute("UPDATE task_attempts SET finished_at = " + db().now_us() +
                   ", outcome = 'lost', error = ? WHERE task_id = ? AND attempt = ? AND outcome = 'running'",
               {error, task_id, static_cast<std::int64_t>(attempt)}, sql::Access::kWrite);
}

std::vector<TaskAttempt> TaskQueue::find_attempts(std::int64_t task_id) {
  auto all = find_attempts(std::vector<std::int64_t>{task_id});
  return std::move(all[task_id]);
}

std::map<std::int64_t, std::vector<TaskAttempt>> TaskQueue::find_attempts(const std::vector<std::int64_t>& task_ids) {
  std::map<std::int64_t, std::vector<TaskAttempt>> out;
  for (std::size_t start = 0; start < task_ids.size(); start += kIdsPerQuery) {
    const std::size_t end = std::min(task_ids.size(), start + kIdsPerQuery);
    std::string marks;
    std::vector<sql::Value> params = {hub_.project_name()};
    for (std::size_t i = start; i < end; ++i) {
      marks += i == start ? "?" : ", ?";
      params.emplace_back(task_ids[i]);
    }
    const auto r = db().execute(std::string("SELECT ") + kAttemptColumns +
                                    " FROM task_attempts WHERE project_name = ? AND task_id IN (" + marks +
                                    ") ORDER BY task_id, attempt",
                                params);
    for (std::size_t i = 0; i < r.size(); ++i) {
      TaskAttempt a = read_attempt(r, i);
      out[a.task_id].push_back(std::move(a));
    }
  }
  return out;
}

}  // namespace tensorhub
