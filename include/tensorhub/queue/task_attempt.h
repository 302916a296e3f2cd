// What one attempt of a task used: a row of the task_attempts table, written by the runner when
// the attempt starts (TaskQueue::begin_attempt: who runs it, where, with which cores, memory
// limit and GPUs) and completed when it ends (TaskQueue::end_attempt: its outcome and usage,
// measured as src/queue/attempt_usage.h says). An attempt whose runner died without ending it
// is marked "lost" when its lease is reaped (TaskQueue::reap_expired).
// The methods are TaskQueue's (task_queue.h), implemented in src/queue/task_attempt.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensorhub/store/document.h"

namespace tensorhub {

/// One GPU utilisation sample of a running attempt (NVIDIA's management library, NVML).
struct GpuSample {
  double t = 0;                   ///< seconds since the attempt started
  double utilization = 0;         ///< percent of time a kernel ran over the last sample period (0-100)
  std::int64_t memory_bytes = 0;  ///< device memory in use (all processes on the device), bytes
  int gpu = 0;                    ///< the device id (the runner's numbering, as CUDA_VISIBLE_DEVICES)
};

/// What an attempt used, measured when it ends (attempt_usage.h).
struct AttemptUsage {
  double wall_s = 0;                  ///< seconds from start to the end of its main process
  double cpu_s = 0;                   ///< user + system CPU seconds of its processes
  std::int64_t peak_memory_bytes = 0; ///< the most memory it held at once, bytes
  /// Where peak_memory_bytes comes from: "cgroup" (the attempt's cgroup: memory.peak of cgroup
  /// v2 or memory.max_usage_in_bytes of v1, every process of the attempt together) or "rusage"
  /// (ru_maxrss: the largest resident set of one process the attempt waited for); "" unmeasured.
  std::string memory_source;
  std::vector<GpuSample> gpu_samples;  ///< over time, at most a few hundred (downsampled)
};

/// One row of task_attempts.
struct TaskAttempt {
  std::int64_t task_id = 0;
  int attempt = 0;                  ///< the task's attempt number (1, 2, ...)
  std::string project_name;
  std::string owner;                ///< the runner (its lease owner, "<host>:<pid>" by default)
  std::string host;                 ///< the runner's machine (gethostname)
  std::int64_t started_at = 0;      ///< UTC microseconds (the database's clock)
  std::int64_t finished_at = 0;     ///< UTC microseconds; 0 while running
  /// "running", then "finished", "failed", "released" (given back at the runner's stop, not a
  /// failure), "lost" (its lease passed on: the runner died or lost the hub) or "cancelled".
  std::string outcome = "running";
  /// Why it failed, for "failed" and "lost"; for "finished", a note of what went wrong that
  /// did not fail it ("the kernel killed 1 process of it for memory (limit 64 MiB)"), else "".
  std::string error;
  double cpus = 0;                  ///< cores it was given (TaskResources::cpus; 0 = no request)
  std::int64_t memory_limit_bytes = 0;  ///< its memory limit, bytes; 0 = none
  std::vector<int> gpus;            ///< the GPU ids it was given
  AttemptUsage usage;               ///< zero while running

  /// {"task_id", "attempt", "owner", "host", "started_at" and "finished_at" (format_time
  /// strings, "" while running), "outcome", "error", "cpus", "memory_limit_bytes", "gpus",
  /// "wall_s", "cpu_s", "peak_memory_bytes", "memory_source", "gpu_samples": [{"t",
  /// "utilization", "memory_bytes", "gpu"}], "gpu_utilization_mean", "gpu_utilization_max"
  /// (null without samples), "peak_memory" (format_memory_size)}; without `with_samples`,
  /// "gpu_samples" is left out (task lists: the summary only).
  Json to_json(bool with_samples = true) const;
};

/// The mean and the largest utilisation of `samples` (percent); {-1, -1} without samples.
std::pair<double, double> gpu_utilization_summary(const std::vector<GpuSample>& samples);

}  // namespace tensorhub
