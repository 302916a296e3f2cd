// Per-attempt resource limits in cgroups: an attempt that asked for memory gets it as the
// cgroup's memory limit, one that asked for cpus gets it as a CPU quota, so the kernel enforces
// them (a task over its memory is killed by the kernel's OOM killer inside its cgroup, not by
// the runner) and the runner can tell an OOM kill afterwards.
//
// Where (Documentation/admin-guide/cgroup-v2.rst, cgroup-v1/memory.rst, scheduler/sched-bwc.rst):
// - cgroup v2, when the memory (cpu) controller can be enabled down to the attempt's cgroup of
//   task_cgroup.h: memory.max = bytes, memory.swap.max = 0, cpu.max = "<cpus*100000> 100000"
//   (a quota of at least 1000, the kernel's least);
//   an OOM kill shows as "oom_kill N" in memory.events.
// - else cgroup v1 (RHEL 8, CentOS 7, hybrid hosts): a directory per attempt under this
//   runner's own v1 memory cgroup, tensorhub-runner-<pid>-<start time>/task-<id>-<attempt>, with
//   memory.limit_in_bytes and memory.memsw.limit_in_bytes (where swap accounting exists, so swap
//   does not dodge the limit), and likewise under the v1 cpu hierarchy cpu.cfs_period_us =
//   100000 and cpu.cfs_quota_us = cpus * 100000; an OOM kill shows as "oom_kill N" in
//   memory.oom_control (Linux 4.13), else as a memory.failcnt > 0 with a SIGKILLed task.
// The forked child joins by writing "0" to each cgroup.procs before exec (as task_cgroup.h).
//
// Thread-safety: one TaskLimits belongs to one runner thread.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tensorhub/queue/task.h"

namespace tensorhub {

class TaskLimits {
 public:
  /// Finds where limits can be set. `v2_runner_dir` is the runner's cgroup v2 directory of
  /// task_cgroup.h ("" without one). Returns nullptr, with the reason in *why_not, where no
  /// memory controller can be used (not root, no delegation, no controller).
  static std::unique_ptr<TaskLimits> open(const std::filesystem::path& v2_runner_dir, std::string* why_not);
  /// Kills what is left in this runner's v1 directories and removes them.
  ~TaskLimits();
  TaskLimits(const TaskLimits&) = delete;
  TaskLimits& operator=(const TaskLimits&) = delete;

  /// Sets the limits of attempt `name` (e.g. "task-3-1") for `resources` (fields 0 are not
  /// limited). Returns open, close-on-exec descriptors of the v1 cgroup.procs files the forked
  /// child writes "0" to (the caller closes them after fork); for v2 the limits are written
  /// into the attempt's existing cgroup and nothing is returned. Throws Unavailable naming the
  /// file when a directory cannot be made or a limit not written.
  std::vector<int> apply(const std::string& name, const TaskResources& resources);

  /// How many processes of attempt `name` the kernel OOM-killed (call before remove()): the
  /// oom_kill count of memory.events (v2) or memory.oom_control (v1, Linux 4.13); 0 for an
  /// attempt without a memory limit. v1 without that count gives 1 when `killed_by_sigkill`
  /// (the main process died of SIGKILL, or a shell reported 137) and memory.failcnt > 0, which
  /// tells an OOM kill from a failed allocation, else 0. A main process that exited 0 may still
  /// have lost children this way (the runner notes it on the finished attempt).
  long long oom_kills(const std::string& name, bool killed_by_sigkill) const;

  /// Attempt `name`'s v1 memory cgroup directory (its memory.max_usage_in_bytes is the
  /// attempt's peak), or "" where it has none (cgroup v2, or no memory request). Read it
  /// before remove().
  std::filesystem::path memory_v1_dir(const std::string& name) const;

  /// Kills what is left in attempt `name`'s v1 cgroups and removes them (no-op for v2, whose
  /// cgroup task_cgroup.h removes).
  void remove(const std::string& name);

  /// "cgroup v2 under DIR" or "cgroup v1 memory under DIR (cpu under DIR2)", for the log.
  std::string describe() const;

 private:
  TaskLimits() = default;
  std::filesystem::path v2_dir_;                  // runner dir of task_cgroup.h when v2 limits work
  bool v2_cpu_ = false;                           // cpu controller enabled there
  std::filesystem::path v1_memory_, v1_cpu_;      // this runner's v1 dirs, "" when not used
  std::map<std::string, std::int64_t> limited_;   // attempt -> its memory limit
};

}  // namespace tensorhub
