// The runners table as a registry: every runner writes a row when it starts (what it has:
// cores, memory, GPU ids, slots), touches it on its heartbeat rounds and deletes it when it
// exits cleanly. A row whose last_seen is older than its lease_s belongs to a runner that died
// (SIGKILL, machine lost) and is "stale": list_runners(true) leaves it out, and the next
// register_runner of the project deletes rows stale for longer than an hour.
//
// Readers: create_task refuses a task whose resources no live runner of its project could ever
// meet (when at least one is live), `task list` says why a pending task waits (no live runner,
// none of its task name, or why_no_runner_fits), and `tensorhub slurm status` lists the runners with their Slurm jobs.
// The methods are TaskQueue's (task_queue.h), implemented in src/queue/runner_registry.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensorhub/queue/task.h"
#include "tensorhub/store/document.h"

namespace tensorhub {

/// One row of the runners table: a runner and what it has.
struct RunnerInfo {
  std::string owner;          ///< its lease owner (RunnerOptions::owner), unique; the key
  std::string project_name;   ///< the project it claims from
  std::string task_name;      ///< the task name it claims; "" = any
  std::string host;           ///< gethostname()
  std::int64_t pid = 0;
  double cpus = 0;            ///< cores it gives its tasks (RunnerOptions::cpus)
  std::int64_t memory_bytes = 0;  ///< memory it gives its tasks, bytes
  std::vector<int> gpus;      ///< GPU device ids it hands out (CUDA_VISIBLE_DEVICES numbering)
  int slots = 1;              ///< tasks at once
  double lease_s = 30;        ///< its lease; a row not touched for this long is stale
  /// "<SLURM_ARRAY_JOB_ID>_<SLURM_ARRAY_TASK_ID>" for an element of a job array, else
  /// SLURM_JOB_ID, else "" (runner_resources.h: detect_slurm_job_id).
  std::string slurm_job_id;
  std::int64_t started_at = 0;  ///< UTC microseconds (the database's clock)
  std::int64_t last_seen = 0;   ///< UTC microseconds of the last register/touch
  bool live = true;             ///< last_seen within lease_s of the database's now (when read)

  /// The most one task could ask of it: {cpus, gpus.size(), memory_bytes}.
  TaskResources capacity() const {
    return {cpus, static_cast<int>(gpus.size()), memory_bytes};
  }
  /// Every field as JSON (times as format_time, memory also as format_memory_size).
  Json to_json() const;
};

/// Why a task needing `need` fits none of `runners` (each taken whole, as capacity()), e.g.
/// "needs 2 GPUs; largest live runner has 0"; "" when it fits at least one of them or
/// `runners` is empty. Names the first field (cpus, gpus, memory) that no runner meets, with the
/// largest value any runner has for it.
std::string why_no_runner_fits(const TaskResources& need, const std::vector<RunnerInfo>& runners);

/// The runners of `runners` that claim tasks named `task_name` (their task_name is "" or it).
std::vector<RunnerInfo> runners_for_task(const std::vector<RunnerInfo>& runners, const std::string& task_name);

}  // namespace tensorhub
