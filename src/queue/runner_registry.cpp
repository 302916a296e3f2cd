// The runners table (runner_registry.h): TaskQueue's registry methods, the fit checks that read
// it (create_task's refusal, `task list`'s "waiting for"), and the count of pending tasks that
// fit a capacity (`tensorhub slurm scale`).
#include "tensorhub/queue/runner_registry.h"

#include <algorithm>
#include <cstdio>

#include "tensorhub/core/clock.h"
#include "tensorhub/core/error.h"
#include "tensorhub/queue/task_queue.h"
#include "tensorhub/store/stored_json.h"

namespace tensorhub {
namespace {

constexpr const char* kRunnerColumns =
    "owner, project_name, task_name, host, pid, cpus, memory_bytes, gpus, slots, lease_s, slurm_job_id, "
    "started_at, last_seen";

// A row's lease in microseconds, as SQL over the runners table.
constexpr const char* kLeaseUs = "CAST(lease_s * 1000000 AS BIGINT)";

RunnerInfo read_runner(const sql::Rows& r, std::size_t i) {
  RunnerInfo info;
  info.owner = r.text(i, 0);
  info.project_name = r.text(i, 1);
  info.task_name = r.text(i, 2);
  info.host = r.text(i, 3);
  info.pid = r.int64(i, 4);
  info.cpus = r.real(i, 5);
  info.memory_bytes = r.int64(i, 6);
  info.gpus = from_stored_json(r.text(i, 7), "gpus").get<std::vector<int>>();
  info.slots = static_cast<int>(r.int64(i, 8));
  info.lease_s = r.real(i, 9);
  info.slurm_job_id = r.text(i, 10);
  info.started_at = r.int64(i, 11);
  info.last_seen = r.int64(i, 12);
  info.live = r.int64(i, 13) != 0;
  return info;
}

}  // namespace

Json RunnerInfo::to_json() const {
  return {{"owner", owner},
          {"project_name", project_name},
          {"task_name", task_name},
          {"host", host},
          {"pid", pid},
          {"cpus", cpus},
          {"memory", format_memory_size(memory_bytes)},
          {"memory_bytes", memory_bytes},
          {"gpus", gpus},
          {"slots", slots},
          {"lease_s", lease_s},
          {"slurm_job_id", slurm_job_id},
          {"started_at", format_time(started_at)},
          {"last_seen", format_time(last_seen)},
          {"live", live}};
}

std::vector<RunnerInfo> runners_for_task(const std::vector<RunnerInfo>& runners, const std::string& task_name) {
  std::vector<RunnerInfo> out;
  for (const auto& r : runners)
    if (r.task_name.empty() || r.task_name == task_name) out.push_back(r);
  return out;
}

std::string why_no_runner_fits(const TaskResources& need, const std::vector<RunnerInfo>& runners) {
  if (runners.empty()) return "";
  TaskResources largest{0, 0, 0};
  for (const auto& r : runners) {
    if (need.fits(r.capacity())) return "";
    largest.cpus = std::max(largest.cpus, r.cpus);
    largest.gpus = std::max(largest.gpus, static_cast<int>(r.gpus.size()));
    largest.memory_bytes = std::max(largest.memory_bytes, r.memory_bytes);
  }
  const char* runner = runners.size() == 1 ? "the live runner has " : "largest live runner has ";
  if (need.gpus > largest.gpus)
    return "needs " + std::to_string(need.gpus) + (need.gpus == 1 ? " GPU; " : " GPUs; ") + runner +
           std::to_string(largest.gpus);
  if (need.cpus > largest.cpus)
    return "needs " + format_cpus(need.cpus) + " cpus; " + runner + format_cpus(largest.cpus);
  if (need.memory_bytes > largest.memory_bytes)
    return "needs " + format_memory_size(need.memory_bytes) + " of memory; " + runner +
           format_memory_size(largest.memory_bytes);
  // Each field fits some runner, but no one runner has them all.
  return "needs " + need.to_string() + "; no live runner has all of that at once";
}

void TaskQueue::register_runner(const RunnerInfo& runner) {
  if (runner.owner.empty()) throw InvalidArgument("register_runner: owner must not be empty");
  if (runner.slots < 1 || !(runner.lease_s > 0))
    throw InvalidArgument("register_runner \"" + runner.owner + "\": slots must be >= 1 and lease_s > 0");
  // Rows of runners that died (SIGKILL, lost machine) are kept an hour for `slurm status`, then go.
  db().execute("DELETE FROM runners WHERE project_name = ? AND last_seen + " + std::string(kLeaseUs) +
                   " + 3600000000 < " + db().now_us(),
               {hub_.project_name()}, sql::Access::kWrite);
  const std::string now = db().now_us();
  db().execute("INSERT INTO runners (" + std::string(kRunnerColumns) + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, " +
                   now + ", " + now +
                   ") ON CONFLICT (owner) DO UPDATE SET project_name = excluded.project_name, task_name = "
                   "excluded.task_name, host = excluded.host, pid = excluded.pid, cpus = excluded.cpus, memory_bytes = "
                   "excluded.memory_bytes, gpus = excluded.gpus, slots = excluded.slots, lease_s = excluded.lease_s, "
                   "slurm_job_id = excluded.slurm_job_id, started_at = excluded.started_at, last_seen = "
                   "excluded.last_seen",
               {runner.owner, hub_.project_name(), runner.task_name, runner.host, runner.pid, runner.cpus,
                runner.memory_bytes, Json(runner.gpus).dump(), static_cast<std::int64_t>(runner.slots),
                runner.lease_s, runner.slurm_job_id},
               sql::Access::kWrite);
}

bool TaskQueue::touch_runner(const std::string& owner) {
  return db().execute("UPDATE runners SET last_seen = " + db().now_us() + " WHERE owner = ?", {owner},
                      sql::Access::kWrite)
             .changes() == 1;
}

bool TaskQueue::unregister_runner(const std::string& owner) {
  return db().execute("DELETE FROM runners WHERE owner = ?", {owner}, sql::Access::kWrite).changes() == 1;
}

std::vector<RunnerInfo> TaskQueue::list_runners(bool live_only) {
  const std::string live = "last_seen + " + std::string(kLeaseUs) + " >= " + db().now_us();
  const sql::Rows r = db().execute("SELECT " + std::string(kRunnerColumns) + ", CASE WHEN " + live +
                                       " THEN 1 ELSE 0 END FROM runners WHERE project_name = ?" +
                                       (live_only ? " AND " + live : std::string()) + " ORDER BY owner",
                                   {hub_.project_name()});
  std::vector<RunnerInfo> out;
  for (std::size_t i = 0; i < r.size(); ++i) out.push_back(read_runner(r, i));
  return out;
}

std::string TaskQueue::check_resources_fit(const TaskSpec& spec) {
  if (spec.resources.empty()) return "";
  const auto runners = runners_for_task(list_runners(true), spec.task_name);
  const std::string task = "task \"" + spec.task_name + "\" asks for " + spec.resources.to_string();
  if (runners.empty())
    return task + ", and no live runner of project \"" + hub_.project_name() +
           "\" is registered to check that against; it waits for a runner that has it";
  const std::string why = why_no_runner_fits(spec.resources, runners);
  if (!why.empty())
    throw InvalidArgument("create_task: " + task + ", which no live runner could ever run: " + why +
                          ". Ask for less, or start a runner with more (tensorhub runner --cpus/--gpus/--memory)");
  return "";
}

std::map<std::int64_t, std::string> TaskQueue::waiting_for(const std::vector<Task>& tasks) {
  std::map<std::int64_t, std::string> out;
  const auto pending = [](const Task& t) { return t.status == TaskStatus::kPending; };
  if (std::none_of(tasks.begin(), tasks.end(), pending)) return out;
  const auto runners = list_runners(true);
  for (const auto& t : tasks) {
    if (!pending(t)) continue;
    const auto takers = runners_for_task(runners, t.spec.task_name);
    // No runner claims it at all: the one reason that holds whatever it asks for. A task that
    // fits a runner which is busy gets none: it is simply queued.
    if (takers.empty())
      out[t.id] = runners.empty() ? "no live runner" : "no live runner takes task name \"" + t.spec.task_name + "\"";
    else if (const std::string why = why_no_runner_fits(t.spec.resources, takers); !why.empty())
      out[t.id] = why;
  }
  return out;
}

std::int64_t TaskQueue::count_pending_that_fit(const TaskResources& capacity, const std::string& task_name) {
  reap_expired();
  return db()
      .execute("SELECT COUNT(*) FROM tasks WHERE project_name = ? AND status = 'pending' AND (? = '' OR task_name = ?) "
               "AND cpus <= ? AND gpus <= ? AND memory_bytes <= ?",
               {hub_.project_name(), task_name, task_name, capacity.cpus,
                static_cast<std::int64_t>(std::min<int>(capacity.gpus, 2147483647)), capacity.memory_bytes})
      .int64(0, 0);
}

}  // namespace tensorhub
