// TaskQueue: TensorHub's task functions (create_task, check_unfinished_task, ...) over a
// hub's backend, plus the queue operations a runner needs (claim, heartbeat, finish, fail).
// The storage and its atomicity live in the Backend (store/); this class adds validation and
// the dispatcher's wait loop.
//
// Thread safety: as the Hub it wraps, one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tensorhub/store/hub.h"
#include "tensorhub/store/task.h"

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
  /// Uses `hub`'s connection and project; `hub` must outlive the queue.
  explicit TaskQueue(Hub& hub);

  /// Validates and stores a pending task; returns its id. Throws InvalidArgument if the
  /// task has no task_name, has neither command nor spec (or both), max_attempts < 1,
  /// timeout_s < 0, hyper_parameters is not an object, an empty saved_result_keys entry, or a
  /// command whose {name} placeholder names no hyperparameter (command_template.h).
  std::int64_t create_task(const TaskSpec& spec);

  /// The checks of create_task, without a hub: throws InvalidArgument as create_task does.
  /// For callers that must refuse a wrong spec before they open (and maybe create) a hub.
  static void validate(const TaskSpec& spec);

  /// True while a matching task is pending or running (expired leases are reaped first, so
  /// a task whose runner died does not keep this true forever).
  bool check_unfinished_task(const Json& filter = Json::object());

  /// Counts of matching tasks by status (after reaping expired leases).
  TaskCounts count_tasks(const Json& filter = Json::object());

  std::vector<Task> find_tasks(const Json& filter = Json::object(), const SortSpec& sort = {},
                               std::int64_t limit = 0);
  /// The task with this id. Throws NotFound.
  Task get_task(std::int64_t id);
  std::int64_t delete_tasks(const Json& filter = Json::object());
  std::int64_t cancel_tasks(const Json& filter = Json::object());

  /// Blocks until no matching task is pending or running, polling every `poll_s` seconds
  /// and calling `progress` whenever the counts change. Returns the final counts.
  /// Throws Unavailable if `timeout_s` > 0 passes first.
  TaskCounts wait(const Json& filter, const std::function<void(const TaskCounts&)>& progress,
                  double poll_s = 0.2, double timeout_s = 0);

  /// Sleeps until another process changes the queue (PostgreSQL NOTIFY) or `seconds` pass
  /// (SQLite, which has no notifications, always sleeps). True if woken by a change.
  bool wait_for_change(double seconds);

  // ---- runner side -----------------------------------------------------------------------

  /// Claims one task (see Backend::claim_task) with a lease of `lease_s` seconds.
  std::optional<Task> claim(const std::string& task_name, const std::string& owner, double lease_s,
                            ClaimOrder order = ClaimOrder::kNewestFirst);
  bool heartbeat(const Task& task, double lease_s);
  /// Finishes the task if `result` holds every saved_result_key (keeping `log_tail`, the end
  /// of its output, for `task show`); otherwise records a failed attempt naming the missing
  /// keys. Returns false when the attempt lost the task.
  bool complete(const Task& task, const Json& result, const std::string& log_tail = "");
  bool fail(const Task& task, const std::string& error, const std::string& log_tail);
  bool release(const Task& task);

 private:
  Hub& hub_;
};

/// The saved_result_keys of `spec` that `result` lacks (empty when complete); a key whose
/// value is null counts as missing.
std::vector<std::string> missing_result_keys(const TaskSpec& spec, const Json& result);

}  // namespace tensorhub
