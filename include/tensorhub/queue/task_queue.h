// TaskQueue: TensorHub's task functions (create_task, check_unfinished_task, ...) over a
// hub, plus the queue operations a runner needs (claim, heartbeat, complete, fail, release). The task
// lifecycle is written here once, as SQL over the hub's connection (store/sql.h), for SQLite
// and PostgreSQL alike: each transition is one statement, atomic by itself, and fenced by the
// attempt number where a runner holds the task.
//
// Thread safety: as the Hub it wraps, one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tensorhub/queue/runner_registry.h"
#include "tensorhub/queue/task_attempt.h"
#include "tensorhub/queue/task.h"
#include "tensorhub/store/hub.h"

namespace tensorhub {

/// Task counts by status.
struct TaskCounts {
  std::int64_t pending = 0, running = 0, finished = 0, failed = 0, cancelled = 0;
  std::int64_t unfinished() const { return pending + running; }
  std::int64_t total() const { return pending + running + finished + failed + cancelled; }
};

/// "3 tasks: 1 finished, 1 running, 1 pending" (zero counts left out).
std::string to_string(const TaskCounts& counts);

class TaskQueue {
 public:
  /// Uses `hub`'s connection and project; `hub` must outlive the queue. Touches no database:
  /// the first call that does creates the task table if the hub has none (or brings an older
  /// one forward), and throws FailedPrecondition for one of a newer tensorhub.
  explicit TaskQueue(Hub& hub);

  /// Validates and stores a pending task; returns its id. Throws InvalidArgument if the
  /// task has no task_name, has not exactly one of command, spec and script, max_attempts < 1,
  /// timeout_s < 0, hyper_parameters is not an object, an empty saved_result_keys entry, a
  /// command whose {name} placeholder names no hyperparameter (command_template.h), or a
  /// script that is not UTF-8, holds a NUL byte, has a script_name with a directory or a
  /// script_sha256 its bytes do not have. A script task is stored with its SHA-256 (computed
  /// when not given) and script_name kDefaultScriptName when none is given. Also throws
  /// InvalidArgument for invalid resources (TaskResources::validate) and for resources no live
  /// runner could ever meet while some runner is live (check_resources_fit).
  std::int64_t create_task(const TaskSpec& spec);

  /// The checks of create_task, without a hub: throws InvalidArgument as create_task does.
  /// For callers that must refuse a wrong spec before they open (and maybe create) a hub.
  static void validate(const TaskSpec& spec);

  /// True while a matching task is pending or running (expired leases are reaped first, so
  /// a task whose runner died does not keep this true forever).
  bool check_unfinished_task(const Json& filter = Json::object());

  /// Counts of matching tasks by status (after reaping expired leases; on a hub opened
  /// read-only, as stored: a running task whose lease expired counts as running).
  TaskCounts count_tasks(const Json& filter = Json::object());

  /// Every project of the hub that holds a task, sorted bytewise (as Hub::list_projects).
  std::vector<std::string> list_projects();

  std::vector<Task> find_tasks(const Json& filter = Json::object(), const SortSpec& sort = {},
                               std::int64_t limit = 0);
  /// The task with this id. Throws NotFound.
  Task get_task(std::int64_t id);
  std::int64_t delete_tasks(const Json& filter = Json::object());
  std::int64_t cancel_tasks(const Json& filter = Json::object());

  /// Blocks until no matching task is pending or running, checking every `poll_s` seconds, or
  /// sooner when a change is announced (PostgreSQL NOTIFY), and calling `progress` whenever the
  /// counts change. Returns the final counts.
  /// Throws Unavailable if `timeout_s` > 0 passes first.
  TaskCounts wait(const Json& filter, const std::function<void(const TaskCounts&)>& progress,
                  double poll_s = 0.2, double timeout_s = 0);

  /// Sleeps until another process changes the queue (PostgreSQL NOTIFY) or `seconds` pass
  /// (SQLite, which has no notifications, always sleeps). True if woken by a change.
  bool wait_for_change(double seconds);

  /// For callers that wait on several things at once (a runner: its tasks' pidfds too): a
  /// descriptor that becomes readable when the queue changes, or -1 without notifications
  /// (SQLite) or while the connection is down. Ask again before each poll: it may change
  /// after a reconnect. Never throws.
  int change_fd() noexcept;
  /// Reads and discards the changes announced on change_fd(); true if any. Never throws.
  bool consume_changes() noexcept;

  /// Requeues, or fails once their attempts are used up, the running tasks whose lease
  /// expired (on the database's clock); returns how many. claim() and count_tasks() do it
  /// first.
  std::int64_t reap_expired();

  // ---- runner side -----------------------------------------------------------------------

  /// Atomically claims one claimable task named `task_name` (any name when empty): the first
  /// pending one by priority (higher first), then creation time in `order`, after expired
  /// leases are reaped (reap_expired). Sets it running with lease (owner, now + lease_s) and
  /// attempt + 1. Returns nothing when no task is claimable. Owners must be unique per runner.
  std::optional<Task> claim(const std::string& task_name, const std::string& owner, double lease_s,
                            ClaimOrder order = ClaimOrder::kNewestFirst);
  /// As claim above, but only a task that fits `free` (what the runner has free now): its
  /// cpus, gpus and memory_bytes each at most free's, tested in the claim's own SQL, so a
  /// bigger task stays pending for a bigger runner. A task with no request (all 0) fits any
  /// `free`, even all zero.
  std::optional<Task> claim(const std::string& task_name, const std::string& owner, double lease_s,
                            ClaimOrder order, const TaskResources& free);
  /// Pending tasks named `task_name` (any when empty) of this project whose resources fit
  /// `capacity` (TaskResources::fits): the work a runner of that size could take
  /// (`tensorhub slurm scale`).
  std::int64_t count_pending_that_fit(const TaskResources& capacity, const std::string& task_name);

  // ---- the runners table (runner_registry.h; src/queue/runner_registry.cpp) --------------

  /// Writes (or rewrites) the row of `runner` (keyed by owner), with started_at and last_seen
  /// set to the database's now; deletes the project's rows stale for more than an hour
  /// first. Throws InvalidArgument for an empty owner, slots < 1 or lease_s <= 0.
  void register_runner(const RunnerInfo& runner);
  /// Sets the runner's last_seen to now. False when it has no row (deleted as stale): the
  /// caller registers again.
  bool touch_runner(const std::string& owner);
  /// Deletes the runner's row (a clean exit). False when it had none.
  bool unregister_runner(const std::string& owner);
  /// The runners of this project, by owner; with `live_only`, only those whose last_seen is
  /// within their lease_s of the database's now. RunnerInfo::live says which for each.
  std::vector<RunnerInfo> list_runners(bool live_only = true);
  /// The creation-time check of `spec.resources` against the live runners of its project and
  /// task name: throws InvalidArgument, saying the largest runner's resources and the field,
  /// when at least one is live and none could ever meet it; returns a warning text when none
  /// is live ("no live runner to check ... against"), "" otherwise (also for no request).
  /// create_task calls it (and drops the warning); the CLI and Python print the warning.
  std::string check_resources_fit(const TaskSpec& spec);
  /// Why each of `tasks` that is pending cannot be claimed by any live runner, keyed by task
  /// id: "no live runner" when the project has none, "no live runner takes task name \"x\""
  /// when none claims its name, else why_no_runner_fits for the runners that do ("needs 2
  /// GPUs; largest live runner has 0"). A pending task that some live runner could take is
  /// absent (it waits only for a free slot or free resources: a queue), as are tasks that are
  /// not pending. One query of the runners table, none when no task is pending.
  std::map<std::int64_t, std::string> waiting_for(const std::vector<Task>& tasks);
  /// Extends the lease of the task's attempt to now + lease_s. False when the attempt no
  /// longer holds the task (lease lost, cancelled, finished): the runner must stop it.
  bool heartbeat(const Task& task, double lease_s);
  /// Finishes the task if `result` holds every saved_result_key (keeping `log_tail`, the end
  /// of its output, for `task show`); otherwise records a failed attempt naming the missing
  /// keys. Returns false when the attempt lost the task.
  bool complete(const Task& task, const Json& result, const std::string& log_tail = "");
  /// Records a failed attempt: back to pending, or failed once max_attempts failures are
  /// reached. False when the attempt no longer holds the task.
  bool fail(const Task& task, const std::string& error, const std::string& log_tail);
  /// Gives the attempt's task back to the queue without counting a failure (runner shutdown).
  /// False when the attempt no longer holds it.
  bool release(const Task& task);

  // ---- the task_attempts table (task_attempt.h; src/queue/task_attempt.cpp) --------------

  /// Writes the row of an attempt that starts now: its task_id, attempt, owner, host, cpus,
  /// memory_limit_bytes and gpus (started_at is the database's now, outcome "running"); an
  /// existing row of the same attempt is overwritten.
  void begin_attempt(const TaskAttempt& attempt);
  /// Completes an attempt's row with its outcome ("finished", "failed", "released", "lost",
  /// "cancelled"), error and usage; finished_at is the database's now. False if it has no row.
  bool end_attempt(std::int64_t task_id, int attempt, const std::string& outcome, const std::string& error,
                   const AttemptUsage& usage);
  /// Marks a still "running" attempt "lost" with `error` (reap_expired, for a dead runner's).
  void mark_attempt_lost(std::int64_t task_id, int attempt, const std::string& error);
  /// The attempts of a task of this project, by attempt number (empty if none).
  std::vector<TaskAttempt> find_attempts(std::int64_t task_id);
  /// The attempts of each of `task_ids`, by attempt number, in one query per 500 ids; tasks
  /// without attempts are absent.
  std::map<std::int64_t, std::vector<TaskAttempt>> find_attempts(const std::vector<std::int64_t>& task_ids);

 private:
  // The connection, with the task table ensured on it (detail::task_schema()).
  sql::Connection& db();

  Hub& hub_;
  sql::Connection& db_;
};

/// The saved_result_keys of `spec` that `result` lacks (empty when complete); a key whose
/// value is null counts as missing.
std::vector<std::string> missing_result_keys(const TaskSpec& spec, const Json& result);

}  // namespace tensorhub
