#include "tensorhub/queue/task_queue.h"

#include <poll.h>

#include <chrono>
#include <cmath>
#include <thread>

#include "tensorhub/core/error.h"
#include "tensorhub/queue/command_template.h"

namespace tensorhub {
namespace {

std::int64_t micros(double seconds) { return static_cast<std::int64_t>(seconds * 1e6); }

}  // namespace

std::vector<std::string> missing_result_keys(const TaskSpec& spec, const Json& result) {
  std::vector<std::string> missing;
  for (const auto& key : spec.saved_result_keys)
    if (!result.is_object() || !result.contains(key) || result.at(key).is_null()) missing.push_back(key);
  return missing;
}

std::string to_string(const TaskCounts& c) {
  std::string out = std::to_string(c.total()) + (c.total() == 1 ? " task" : " tasks");
  std::string sep = ": ";
  auto add = [&](std::int64_t n, const char* what) {
    if (n == 0) return;
    out += sep + std::to_string(n) + " " + what;
    sep = ", ";
  };
  add(c.finished, "finished");
  add(c.running, "running");
  add(c.pending, "pending");
  add(c.failed, "failed");
  add(c.cancelled, "cancelled");
  return out;
}

TaskQueue::TaskQueue(Hub& hub) : hub_(hub) {}

std::int64_t TaskQueue::create_task(const TaskSpec& spec) {
  validate(spec);
  return hub_.backend().insert_task(hub_.project_name(), spec);
}

void TaskQueue::validate(const TaskSpec& spec) {
  if (spec.task_name.empty()) throw InvalidArgument("create_task: task_name must not be empty");
  if (spec.command.empty() == spec.spec.is_null())
    throw InvalidArgument("create_task \"" + spec.task_name + "\": give exactly one of command or spec");
  if (spec.max_attempts < 1)
    throw InvalidArgument("create_task \"" + spec.task_name + "\": max_attempts must be at least 1");
  if (!(spec.timeout_s >= 0) || !std::isfinite(spec.timeout_s))
    throw InvalidArgument("create_task \"" + spec.task_name + "\": timeout_s must be a finite number >= 0 (0: no limit)");
  if (!spec.hyper_parameters.is_object())
    throw InvalidArgument("create_task \"" + spec.task_name + "\": hyper_parameters must be a JSON object, got " +
                          spec.hyper_parameters.dump());
  if (!spec.tags.is_object()) throw InvalidArgument("create_task: tags must be a JSON object");
  for (const auto& key : spec.saved_result_keys)
    if (key.empty()) throw InvalidArgument("create_task \"" + spec.task_name + "\": a saved_result_keys entry is empty");
  // A placeholder with no hyperparameter is a typo: say so now, not on a runner later.
  if (!spec.command.empty()) check_placeholders(spec.command, spec.hyper_parameters, "task \"" + spec.task_name + "\"");
}

TaskCounts TaskQueue::count_tasks(const Json& filter) {
  hub_.backend().reap_expired_tasks(hub_.project_name());
  TaskCounts c;
  for (const auto& [status, n] : hub_.backend().count_tasks(hub_.project_name(), filter)) {
    switch (task_status_from_string(status)) {
      case TaskStatus::kPending: c.pending = n; break;
      case TaskStatus::kRunning: c.running = n; break;
      case TaskStatus::kFinished: c.finished = n; break;
      case TaskStatus::kFailed: c.failed = n; break;
      case TaskStatus::kCancelled: c.cancelled = n; break;
    }
  }
  return c;
}

bool TaskQueue::check_unfinished_task(const Json& filter) { return count_tasks(filter).unfinished() > 0; }

std::vector<Task> TaskQueue::find_tasks(const Json& filter, const SortSpec& sort, std::int64_t limit) {
  return hub_.backend().find_tasks(hub_.project_name(), filter, sort, limit);
}

Task TaskQueue::get_task(std::int64_t id) {
  auto tasks = find_tasks({{"id", id}}, {}, 1);
  if (tasks.empty())
    throw NotFound("task " + std::to_string(id) + " is not in project \"" + hub_.project_name() + "\"");
  return tasks[0];
}

std::int64_t TaskQueue::delete_tasks(const Json& filter) {
  return hub_.backend().delete_tasks(hub_.project_name(), filter);
}

std::int64_t TaskQueue::cancel_tasks(const Json& filter) {
  return hub_.backend().cancel_tasks(hub_.project_name(), filter);
}

TaskCounts TaskQueue::wait(const Json& filter, const std::function<void(const TaskCounts&)>& progress,
                           double poll_s, double timeout_s) {
  const auto start = std::chrono::steady_clock::now();
  TaskCounts last{-1, -1, -1, -1, -1};
  while (true) {
    const TaskCounts c = count_tasks(filter);
    const bool changed = c.pending != last.pending || c.running != last.running ||
                         c.finished != last.finished || c.failed != last.failed ||
                         c.cancelled != last.cancelled;
    if (changed && progress) progress(c);
    last = c;
    if (c.unfinished() == 0) return c;
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (timeout_s > 0 && waited > timeout_s)
      throw Unavailable("tasks still unfinished after " + std::to_string(static_cast<int>(timeout_s)) +
                        " s: " + std::to_string(c.pending) + " pending, " + std::to_string(c.running) +
                        " running; is a runner started for them?");
    wait_for_change(poll_s);
  }
}

bool TaskQueue::wait_for_change(double seconds) {
  int fd = -1;
  try {
    fd = hub_.backend().notification_fd();
  } catch (const Error&) {
    // Connection down: sleep; the next query reconnects or reports the outage.
  }
  if (fd < 0) {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    return false;
  }
  pollfd p{fd, POLLIN, 0};
  ::poll(&p, 1, static_cast<int>(seconds * 1000));
  try {
    return hub_.backend().consume_notifications();
  } catch (const Error&) {
    return false;
  }
}

std::optional<Task> TaskQueue::claim(const std::string& task_name, const std::string& owner, double lease_s,
                                     ClaimOrder order) {
  return hub_.backend().claim_task(hub_.project_name(), task_name, owner, micros(lease_s), order);
}

bool TaskQueue::heartbeat(const Task& task, double lease_s) {
  return hub_.backend().heartbeat_task(task.id, task.attempt, micros(lease_s));
}

bool TaskQueue::complete(const Task& task, const Json& result, const std::string& log_tail) {
  const auto missing = missing_result_keys(task.spec, result);
  if (!missing.empty()) {
    std::string names;
    for (const auto& k : missing) names += (names.empty() ? "" : ", ") + k;
    return fail(task, "the task's result lacks saved_result_keys: " + names, log_tail);
  }
  return hub_.backend().finish_task(task.id, task.attempt, result, log_tail);
}

bool TaskQueue::fail(const Task& task, const std::string& error, const std::string& log_tail) {
  return hub_.backend().fail_task(task.id, task.attempt, error, log_tail);
}

bool TaskQueue::release(const Task& task) { return hub_.backend().release_task(task.id, task.attempt); }

}  // namespace tensorhub
