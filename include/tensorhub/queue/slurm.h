// Runners on a Slurm cluster: the batch script of a job array whose elements are runners, its
// submission with sbatch, and our runner jobs as squeue lists them (`tensorhub slurm submit |
// scale | status`, src/cli/slurm_commands.cpp).
//
// Runners are pull workers with leases, so Slurm only has to start them: each array element
// `exec`s `tensorhub runner --exit-when-idle S ...` (exec, so the runner is the batch shell
// that `--signal=B:TERM@<grace>` warns before the time limit, and the process scancel and
// preemption signal first). On SIGTERM a runner stops claiming, stops its tasks and releases
// them to the queue without counting a failure (runner.h), so they go to other runners. The
// runner reads its resources from Slurm's variables (SLURM_CPUS_PER_TASK, SLURM_MEM_PER_NODE,
// SLURM_JOB_GPUS; runner_resources.h) and records its job as <array job>_<index> in the
// runners table, which `slurm status` joins with squeue's list.
//
// Slurm's commands are run as programs with an argv (Process), never through a shell; every
// value that goes into the batch script is either checked against the characters Slurm's
// option takes (#SBATCH lines) or shell-quoted (the runner's arguments).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "tensorhub/queue/task.h"

namespace tensorhub {

/// What `tensorhub slurm submit` asks of Slurm and of each runner.
struct SlurmJobOptions {
  int runners = 1;                  ///< array elements (--array=0-(runners-1)), >= 1
  std::string partition;            ///< --partition; "" = the cluster's default
  std::string gres;                 ///< --gres, e.g. "gpu:1"; "" = none
  int cpus_per_task = 0;            ///< --cpus-per-task; 0 = Slurm's default (1)
  std::string mem;                  ///< --mem as Slurm reads it ("8G", "512M"); "" = default
  std::string time;                 ///< --time as Slurm reads it ("30", "1:00:00", "1-0"); "" = default
  int grace_s = 60;                 ///< --signal=B:TERM@grace_s: seconds of warning before the limit
  std::string job_name = "tensorhub-runner";  ///< --job-name; squeue -n finds our jobs by it
  bool requeue = false;             ///< --requeue (else --no-requeue)
  std::filesystem::path output_dir; ///< where each element's output goes (%x-%A_%a.out); absolute
  std::string program;              ///< absolute path of the tensorhub program on every node
  std::string hub_uri;              ///< the hub every node reaches (absolute SQLite path or PostgreSQL)
  std::string project = "default";
  double exit_when_idle_s = 30;     ///< runner --exit-when-idle
  std::vector<std::string> runner_flags;  ///< more `tensorhub runner` flags, passed as given

  /// Throws InvalidArgument naming the flag (--runners, --partition, ...) for runners < 1,
  /// grace_s < 0, cpus_per_task < 0, a relative output_dir or program, an empty hub_uri, or
  /// a Slurm value with a character outside [A-Za-z0-9_.,:=+@%/-] (a space or newline would
  /// end the #SBATCH line and start another), and for runner_flags that set what the script
  /// sets itself (--hub, --project, --exit-when-idle).
  void validate() const;
};

/// The batch script for `options` (after validate()): "#!/bin/sh", one "#SBATCH" line per
/// Slurm option, then `exec PROGRAM runner --hub HUB --project P --exit-when-idle S FLAGS...`,
/// every word shell-quoted. Throws as validate().
std::string slurm_batch_script(const SlurmJobOptions& options);

/// What a Slurm command printed and how it ended.
struct SlurmCommandResult {
  int exit_code = 0;
  std::string out;  ///< its stdout
  std::string err;  ///< its stderr
};

/// Runs a Slurm client command (sbatch, squeue, scancel, ...) as `argv` (no shell) and returns
/// its output, with up to `timeout_s` seconds to finish (then killed). Throws NotFound "sbatch
/// not found on PATH ..." (how to get Slurm's client commands) when argv[0] cannot be run, and
/// Unavailable naming the command when it runs past the timeout. A non-zero exit is returned,
/// not thrown (slurm_check throws it).
SlurmCommandResult run_slurm_command(const std::vector<std::string>& argv, double timeout_s = 60);

/// Throws Unavailable "sbatch failed (exit 1): <its stderr>" when `result` is not a success,
/// with a hint when the stderr says munge (Slurm's authentication) could not be reached.
void slurm_check(const std::string& command, const SlurmCommandResult& result);

/// Writes `script` to `script_path` and submits it: `sbatch --parsable SCRIPT`. Returns the
/// job id (the array's id). Throws as run_slurm_command and slurm_check (the script is then
/// removed again); Unavailable when the script cannot be written or sbatch's answer holds no
/// job id.
std::string slurm_submit(const std::string& script, const std::filesystem::path& script_path);

/// What one runner of `job`'s shape has, as a claim compares it with a task's request:
/// cpus = --cpus-per-task (Slurm's default 1); gpus = the K of the gpu entry of --gres
/// ("gpu:K", "gpu:TYPE:K", "gpu" = 1; other entries such as "mps:100" are not GPUs);
/// memory_bytes = --mem, a bare number read as MiB as Slurm reads it (not given: INT64_MAX, the
/// node's default being unknown here). Throws InvalidArgument "--mem: ..." when it does not parse.
TaskResources slurm_runner_capacity(const SlurmJobOptions& job);

/// One job, or one element of a job array, as squeue lists it.
struct SlurmJob {
  std::string job_id;     ///< "123_4" for an element of array 123, "123" for a plain job
  std::string array_job_id;  ///< "123" (the plain job's own id when not an array)
  std::string state;      ///< PENDING, RUNNING, COMPLETING, REQUEUED, ... (squeue %T)
  std::string node;       ///< the node it runs on; "" while pending
  std::string elapsed;    ///< squeue's %M, e.g. "1:05"
  std::string reason;     ///< why it waits (squeue %r), "None" when running
  std::string partition;
  bool pending() const;   ///< waiting to start (PENDING, REQUEUED, CONFIGURING...)
  bool running() const;   ///< RUNNING or COMPLETING
};

/// Our jobs named `job_name` (squeue --me -h -r -n NAME), pending array elements one by one.
/// Throws as run_slurm_command and slurm_check.
std::vector<SlurmJob> slurm_list_jobs(const std::string& job_name);

/// Parses squeue output in the format slurm_list_jobs asks for ("%i|%A|%T|%N|%M|%r|%P" per
/// line). Throws Unavailable naming the line when one has not 7 fields.
std::vector<SlurmJob> parse_squeue_lines(const std::string& text);

/// How many runners `tensorhub slurm scale` submits now, and why.
struct SlurmScaleDecision {
  int submit = 0;
  std::string reason;  ///< "3 tasks pending that fit, 1 running; runner jobs: 1 queued, 0 running: submitting 2"
};

/// KEDA's ScaledJob rule for a work queue, with runners that take one task each: runners that
/// will still claim = queued jobs + running jobs not busy (running jobs - running tasks, at
/// least 0); submit the pending tasks they leave, at most max_runners - (queued + running).
/// `pending` counts tasks a runner of the submitted shape could take; `pending_too_big` the other
/// pending tasks (of the runners' task name), which no runner of that shape could take: with none
/// that fit, the reason says they wait for bigger runners instead of "nothing waits".
SlurmScaleDecision decide_slurm_scale(std::int64_t pending, std::int64_t running_tasks, std::int64_t queued_jobs,
                                      std::int64_t running_jobs, int max_runners, std::int64_t pending_too_big = 0);

}  // namespace tensorhub
