// Runner: claims tasks from the queue and runs each as a child process (a process
// supervisor). A crash, leak or endless loop in a task kills the task, never the runner.
//
// Per task the runner: claims it with a lease; starts `/bin/sh -c <command>` with each {name}
// placeholder turned into a reference to the variable TENSORHUB_HP_<name> that carries the
// value (command_template.h: a value is never read as shell syntax), for a spec task,
// RunnerOptions::spec_command with TENSORHUB_SPEC_FILE, or, for a script task, a Python
// interpreter on the script (below); each in its own process group with the
// environment of task_context.h, OMP_NUM_THREADS and TENSORHUB_NUM_THREADS set to cores /
// slots (the runner's own TENSORHUB_* variables are not passed on, except TENSORHUB_BLOB_CACHE*:
// tasks share the machine's blob cache, store/blob_cache.h); heartbeats the lease every lease_s / 3; kills the task (whole process group) when its
// timeout passes, its lease is lost or it is cancelled (read once a second); stores the result file when the
// process exits 0 with every saved_result_key,
// and otherwise records a failed attempt with the error and the tail of the task's output.
//
// Spec tasks may start as forks of a fork server instead (RunnerOptions::fork_server).
//
// A script task (TaskSpec::script) runs as TensorHub ran it, but in a child process: the runner
// writes the script to <work_dir>/<attempt>/<script_name> and runs
//   PYTHON <work_dir>/tensorhub_script_bootstrap.py <script> <saved_result_keys as JSON>
// where PYTHON is the task's TaskSpec::python, else RunnerOptions::python (a name without "/" is
// looked up on the task's PATH). The bootstrap (src/queue/script_bootstrap.py, embedded in this
// library and written to the work directory by the runner) runs the script as module __main__
// (importlib's SourceFileLoader, as runpy.run_path would),
// its hyperparameters bound as global variables, and writes the globals named by
// saved_result_keys to TENSORHUB_RESULT_FILE (numpy scalars through .item(); any other value
// that is not JSON data fails the attempt naming the key). A script that raises exits 1 and its
// last output line, the attempt's error, names the exception and the script's line. Leases,
// timeouts, cancel, retries and process clean-up are those of any task.
//
// Every process a task starts, daemons included, is killed when its attempt ends
// (task_processes.h: the runner is a child subreaper and gives each attempt a cgroup).
//
// Stopping: request_stop() (also wired to SIGTERM and SIGINT by the CLI) stops claiming,
// sends SIGTERM to running tasks, waits `stop_grace_s`, kills what is left and releases
// those tasks to the queue without counting a failure.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tensorhub/queue/task.h"

namespace tensorhub {

struct RunnerOptions {
  std::string hub_uri;                  ///< required
  std::string project_name = "default";
  std::string task_name;                ///< claim only tasks of this name; empty = any
  int slots = 1;                        ///< tasks run at once
  int threads_per_task = 0;             ///< 0 = max(1, floor(cpus / slots)), cpus as resolved below
  double lease_s = 30;                  ///< lease length; heartbeats every lease_s / 3
  double poll_s = 0.25;                 ///< sleep between claims while idle
  double exit_when_idle_s = -1;         ///< exit after this long with nothing to do; < 0 never
  /// Claims at most this many tasks, then runs those to their end and returns (TensorHub's
  /// run_top_task: 1 with exit_when_idle_s = 0; a cluster job that runs one task); 0: no limit.
  std::int64_t max_claims = 0;
  bool notifications = true;            ///< wake on PostgreSQL NOTIFY; false: poll only
  ClaimOrder order = ClaimOrder::kNewestFirst;
  double stop_grace_s = 10;             ///< SIGTERM -> SIGKILL delay for tasks at shutdown
  std::string owner;                    ///< lease owner; default "<hostname>:<pid>"
  std::filesystem::path work_dir;       ///< per-task logs and result files; default a temp dir
  std::size_t log_tail_bytes = 4096;    ///< output kept with a failed attempt
  /// The trainer for spec tasks: a program and its arguments, run directly (no shell) with
  /// TENSORHUB_SPEC_FILE naming the task's spec (written to work_dir as
  /// task-<id>.spec.json) besides the environment of task_context.h, and supervised like a
  /// command task. `tensorhub runner` gives {"<its directory>/tensorhub-torch", "train-spec"}; empty:
  /// a runner without a trainer fails spec tasks with an error saying how to give it one. A
  /// trainer given here that is not an executable file makes the constructor throw
  /// InvalidArgument.
  std::vector<std::string> spec_command;
  /// A fork server for spec tasks (fork_server.h): a program and its arguments that serve fork
  /// requests, whose entry function runs spec_command's argv as the trainer's own program
  /// would. When given, spec tasks start as forks of that server, which has the trainer's
  /// libraries loaded already, instead of new processes (a trial starts in milliseconds, not
  /// the ~1 s of loading libtorch); supervision, cgroups and logs are the same. Started at the
  /// first spec task; if it cannot start or dies, the runner says so and executes spec_command
  /// as without it. `tensorhub runner` gives {"<its directory>/tensorhub-torch", "fork-server"}
  /// when it trains with its own train-spec (not with --trainer, not with --no-fork-server).
  /// Empty: every task is a new process.
  std::vector<std::string> fork_server;
  /// How the runner's user gives a trainer, added to the error when spec_command is empty or
  /// not executable (the CLI: "give the runner --trainer ..."); "" for none.
  std::string trainer_hint;
  /// One line per event ("task 3 started", ...); default prints to stderr.
  std::function<void(const std::string&)> log;
  /// Each attempt in its own cgroup v2 (task_processes.h) where the runner may create one, so
  /// a task's daemons are killed with it and a SIGKILLed runner's by the next runner; false:
  /// only the process group and the orphans the runner collects as subreaper.
  bool task_cgroups = true;
  /// Records what each attempt used in the task_attempts table (task_attempt.h: wall time, CPU
  /// seconds, peak memory, GPU samples where NVML is present); false: no attempt rows (the
  /// accounting bench's peer configuration).
  bool accounting = true;
  /// The Python interpreter of script tasks that name none (TaskSpec::python): a path, or a
  /// name looked up on the tasks' PATH when a script task starts, so a runner started inside a
  /// virtual environment runs scripts with that environment's packages. `tensorhub runner
  /// --python PATH`. A path given here that is not an executable file makes the constructor
  /// throw InvalidArgument; a name not found on PATH fails the script tasks saying so.
  std::string python = "python3";
  /// Directories put in front of the tasks' PATH (":"-separated); `tensorhub runner` gives its
  /// own directory, so a task can call `tensorhub task report-epoch`. Empty: PATH as inherited.
  std::string path_prepend;
  /// Cores this runner gives its tasks (TaskResources::cpus are taken from it); 0: detect
  /// (runner_resources.h: SLURM_CPUS_PER_TASK, SLURM_CPUS_ON_NODE, else available_cores()).
  double cpus = 0;
  /// Memory this runner gives its tasks, bytes; 0: detect (SLURM_MEM_PER_NODE,
  /// SLURM_MEM_PER_CPU * cpus, else the cgroup's limit, else MemTotal).
  std::int64_t memory_bytes = 0;
  /// GPU ids it hands out, one task per GPU at a time; unset: detect (CUDA_VISIBLE_DEVICES,
  /// else SLURM_STEP_GPUS / SLURM_JOB_GPUS, else none). Each id at most once.
  std::optional<std::vector<int>> gpus;
};

/// Counters of one runner's life.
struct RunnerStats {
  std::int64_t claimed = 0;   ///< tasks claimed (RunnerOptions::max_claims limits them)
  std::int64_t started = 0;   ///< attempts started (a claimed task may fail before it starts)
  std::int64_t finished = 0;  ///< tasks finished
  std::int64_t failed = 0;    ///< tasks failed for good (their last attempt failed here)
  std::int64_t retried = 0;   ///< failed attempts whose task went back to the queue
  std::int64_t lost = 0;       ///< attempts whose lease passed to another runner
  std::int64_t cancelled = 0;  ///< attempts stopped because their task was cancelled
  std::int64_t released = 0;  ///< tasks given back at shutdown
};

class Runner {
 public:
  /// Throws InvalidArgument for slots < 1, lease_s <= 0, a spec_command whose program is not
  /// executable or a python path that is not executable; Unavailable if the hub cannot
  /// be opened or the work directory cannot be created.
  explicit Runner(RunnerOptions options);
  ~Runner();
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  /// Runs until request_stop(), until max_claims tasks were claimed and have ended, or, with
  /// exit_when_idle_s >= 0, until idle that long. Returns the counters. Database errors while running are logged and retried.
  RunnerStats run();

  /// Asks run() to stop; safe to call from a signal handler or another thread.
  void request_stop() { stop_.store(true); }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::atomic<bool> stop_{false};
};

/// Number of cores this process may use (sched_getaffinity, else hardware_concurrency).
int available_cores();

}  // namespace tensorhub
