#include "tensorhub/queue/task_queue.h"

#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <thread>

#include "task_fields.h"
#include "task_schema.h"
#include "tensorhub/core/error.h"
#include "tensorhub/core/hash.h"
#include "tensorhub/core/utf8.h"
#include "tensorhub/queue/command_template.h"
#include "tensorhub/store/query.h"
#include "tensorhub/store/stored_json.h"

namespace tensorhub {
namespace {

std::int64_t micros(double seconds) { return static_cast<std::int64_t>(seconds * 1e6); }

// The columns read_task reads, in its order. JSON columns come back as text on both
// databases (SQLite stores text; PostgreSQL prints jsonb as text).
constexpr const char* kTaskColumns =
    "id, project_name, time, task_name, command, spec, hyper_parameters, saved_result_keys, "
    "max_attempts, timeout_s, priority, tags, status, attempt, failures, lease_owner, "
    "lease_expires, started_at, finished_at, result, error, log_tail, script, script_name, script_sha256, python, "
    "cpus, gpus, memory_bytes";

Json json_column(const sql::Rows& r, std::size_t row, std::size_t col, const char* name) {
  if (r.is_null(row, col)) return nullptr;
  const std::string text = r.text(row, col);
  return text.empty() ? Json() : from_stored_json(text, name);
}

Task read_task(const sql::Rows& r, std::size_t i) {
  Task t;
  t.id = r.int64(i, 0);
  t.project_name = r.text(i, 1);
  t.time = r.int64(i, 2);
  t.spec.task_name = r.text(i, 3);
  t.spec.command = r.text(i, 4);
  t.spec.train_spec = json_column(r, i, 5, "spec");
  t.spec.hyper_parameters = json_column(r, i, 6, "hyper_parameters");
  t.spec.saved_result_keys = json_column(r, i, 7, "saved_result_keys").get<std::vector<std::string>>();
  t.spec.max_attempts = static_cast<int>(r.int64(i, 8));
  t.spec.timeout_s = r.real(i, 9);
  t.spec.priority = static_cast<int>(r.int64(i, 10));
  t.spec.tags = json_column(r, i, 11, "tags");
  t.status = task_status_from_string(r.text(i, 12));
  t.attempt = static_cast<int>(r.int64(i, 13));
  t.failures = static_cast<int>(r.int64(i, 14));
  t.lease_owner = r.text(i, 15);
  t.lease_expires = r.int64(i, 16);
  t.started_at = r.int64(i, 17);
  t.finished_at = r.int64(i, 18);
  t.result = json_column(r, i, 19, "result");
  t.error = r.text(i, 20);
  t.log_tail = r.text(i, 21);
  t.spec.script = r.text(i, 22);
  t.spec.script_name = r.text(i, 23);
  t.spec.script_sha256 = r.text(i, 24);
  t.spec.python = r.text(i, 25);
  t.spec.resources = {r.real(i, 26), static_cast<int>(r.int64(i, 27)), r.int64(i, 28)};
  return t;
}

// The one rule for a failed attempt (a runner's report or an expired lease): count it, and
// fail the task for good once max_attempts failures are reached, else make it pending again.
std::string failed_attempt(const sql::Connection& db) {
  return "failures = failures + 1, "
         "status = CASE WHEN failures + 1 >= max_attempts THEN 'failed' ELSE 'pending' END, "
         "finished_at = CASE WHEN failures + 1 >= max_attempts THEN " + db.now_us() + " ELSE 0 END, "
         "lease_owner = ''";
}

// The condition every runner-side transition is fenced by: this attempt still holds the task.
constexpr const char* kHeldByAttempt = " WHERE id = ? AND attempt = ? AND status = 'running'";

// "project_name = ? AND <filter>" over the tasks table, with the filter's values after the project.
sql::Clause project_filter(const sql::Connection& db, const std::string& project, const Json& filter) {
  sql::Clause where = sql::where_clause(filter, db.dialect(), detail::task_field);
  sql::Clause out{"project_name = ? AND " + where.sql, {project}};
  out.params.insert(out.params.end(), where.params.begin(), where.params.end());
  return out;
}

// The checks of a script task (TaskQueue::validate).
void validate_script(const TaskSpec& spec) {
  const std::string task = "create_task \"" + spec.task_name + "\": ";
  if (spec.script.empty()) {
    if (!spec.script_name.empty() || !spec.script_sha256.empty() || !spec.python.empty())
      throw InvalidArgument(task + "script_name, script_sha256 and python belong to a script task; give its script");
    return;
  }
  if (const auto bad = first_invalid_utf8(spec.script))
    throw InvalidArgument(task + "the script " + spec.script_name + " is not UTF-8 text (byte " + std::to_string(*bad) +
                          " begins no UTF-8 character); Python source must be UTF-8");
  if (spec.script.find('\0') != std::string::npos)
    throw InvalidArgument(task + "the script " + spec.script_name + " holds a NUL byte, which Python source cannot");
  const std::string& name = spec.script_name;
  if (name == "." || name == ".." || name.size() > 255 || name.find_first_of(std::string("/\0", 2)) != std::string::npos)
    throw InvalidArgument(task + "script_name \"" + name + "\" must be a file name without directories, e.g. task_script.py");
  if (!spec.script_sha256.empty() && spec.script_sha256 != sha256_hex(spec.script))
    throw InvalidArgument(task + "the script's bytes do not have the SHA-256 given (" + spec.script_sha256 +
                          "): the script changed or was cut short");
  if (spec.python.find('\0') != std::string::npos) throw InvalidArgument(task + "python holds a NUL byte");
}

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

TaskQueue::TaskQueue(Hub& hub) : hub_(hub), db_(hub.sql()) {}

sql::Connection& TaskQueue::db() {
  db_.ensure_schema(detail::task_schema());
  return db_;
}

std::vector<std::string> TaskQueue::list_projects() {
  const sql::Rows r = db().execute("SELECT DISTINCT project_name FROM tasks");
  std::vector<std::string> out;
  for (std::size_t i = 0; i < r.size(); ++i) out.push_back(r.text(i, 0));
  std::sort(out.begin(), out.end());  // bytewise, whatever the database's collation
  return out;
}

std::int64_t TaskQueue::create_task(const TaskSpec& spec) {
  validate(spec);
  check_resources_fit(spec);  // throws when every live runner is too small
  const bool script = !spec.script.empty();
  const auto r = db().execute(
      db().notifying("INSERT INTO tasks (project_name, time, task_name, command, spec, hyper_parameters, "
                    "saved_result_keys, max_attempts, timeout_s, priority, tags, status, script, script_name, "
                    "script_sha256, python, cpus, gpus, memory_bytes) VALUES (?, " +
                        db().now_us() + ", ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?, ?, ?) RETURNING id, project_name",
                    "id"),
      {hub_.project_name(), spec.task_name, spec.command,
       spec.train_spec.is_null() ? sql::Value(nullptr) : sql::Value(to_stored_json(spec.train_spec)),
       to_stored_json(spec.hyper_parameters), Json(spec.saved_result_keys).dump(),
       static_cast<std::int64_t>(spec.max_attempts), spec.timeout_s, static_cast<std::int64_t>(spec.priority),
       to_stored_json(spec.tags), spec.script,
       script && spec.script_name.empty() ? std::string(kDefaultScriptName) : spec.script_name,
       script && spec.script_sha256.empty() ? sha256_hex(spec.script) : spec.script_sha256, spec.python,
       spec.resources.cpus, static_cast<std::int64_t>(spec.resources.gpus), spec.resources.memory_bytes},
      sql::Access::kWrite);
  return r.int64(0, 0);
}

void TaskQueue::validate(const TaskSpec& spec) {
  if (spec.task_name.empty()) throw InvalidArgument("create_task: task_name must not be empty");
  const int kinds = !spec.command.empty() + !spec.train_spec.is_null() + !spec.script.empty();
  if (kinds != 1)
    throw InvalidArgument("create_task \"" + spec.task_name + "\": give exactly one of command, spec or script");
  validate_script(spec);
  spec.resources.validate("create_task \"" + spec.task_name + "\": ");
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
  // A reader of a read-only hub counts tasks as stored: reaping leases is a write.
  if (!db_.read_only()) reap_expired();
  const sql::Clause where = project_filter(db_, hub_.project_name(), filter);
  const auto r = db().execute("SELECT status, COUNT(*) FROM tasks WHERE " + where.sql + " GROUP BY status", where.params);
  TaskCounts c;
  for (std::size_t i = 0; i < r.size(); ++i) {
    const std::int64_t n = r.int64(i, 1);
    switch (task_status_from_string(r.text(i, 0))) {
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
  const sql::Clause where = project_filter(db_, hub_.project_name(), filter);
  std::string q = std::string("SELECT ") + kTaskColumns + " FROM tasks WHERE " + where.sql + " ORDER BY " +
                  sql::order_by(sort, db().dialect(), detail::task_field, "id ASC");
  if (limit > 0) q += " LIMIT " + std::to_string(limit);
  const auto r = db().execute(q, where.params);
  std::vector<Task> out;
  out.reserve(r.size());
  for (std::size_t i = 0; i < r.size(); ++i) out.push_back(read_task(r, i));
  return out;
}

Task TaskQueue::get_task(std::int64_t id) {
  auto tasks = find_tasks({{"id", id}}, {}, 1);
  if (tasks.empty())
    throw NotFound("task " + std::to_string(id) + " is not in project \"" + hub_.project_name() + "\"");
  return tasks[0];
}

std::int64_t TaskQueue::delete_tasks(const Json& filter) {
  const sql::Clause where = project_filter(db_, hub_.project_name(), filter);
  sql::Transaction tx(db(), sql::Access::kWrite);
  const std::int64_t deleted =
      db().execute("DELETE FROM tasks WHERE " + where.sql, where.params, sql::Access::kWrite).changes();
  // Their attempts' rows (task_attempt.h) go with them, and any left by an earlier delete.
  if (deleted > 0)
    db().execute("DELETE FROM task_attempts WHERE project_name = ? AND NOT EXISTS "
                  "(SELECT 1 FROM tasks WHERE tasks.id = task_attempts.task_id)",
                  {hub_.project_name()}, sql::Access::kWrite);
  tx.commit();
  return deleted;
}

std::int64_t TaskQueue::cancel_tasks(const Json& filter) {
  // Runners see it at their next cancel check (Runner reads it once a second).
  const sql::Clause where = project_filter(db_, hub_.project_name(), filter);
  return static_cast<std::int64_t>(
      db().execute(db().notifying("UPDATE tasks SET status = 'cancelled', finished_at = " + db().now_us() +
                                ", lease_owner = '' WHERE status IN ('pending', 'running') AND " + where.sql +
                                " RETURNING project_name"),
                  where.params, sql::Access::kWrite)
          .size());
}

std::int64_t TaskQueue::reap_expired() {
  const sql::Rows r =
      db().execute(db().notifying("UPDATE tasks SET " + failed_attempt(db_) +
                                ", error = 'lease of runner ' || lease_owner || ' expired (runner killed or "
                                "unreachable)' WHERE project_name = ? AND status = 'running' AND lease_expires < " +
                                db().now_us() + " RETURNING id, attempt, error, project_name", "id, attempt, error"),
                  {hub_.project_name()}, sql::Access::kWrite);
  // The dead runner could not end its attempts' rows (task_attempt.h): they are lost.
  for (std::size_t i = 0; i < r.size(); ++i) mark_attempt_lost(r.int64(i, 0), static_cast<int>(r.int64(i, 1)), r.text(i, 2));
  return static_cast<std::int64_t>(r.size());
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
  const int fd = change_fd();
  if (fd < 0) {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    return false;
  }
  pollfd p{fd, POLLIN, 0};
  ::poll(&p, 1, static_cast<int>(seconds * 1000));
  return consume_changes();
}

int TaskQueue::change_fd() noexcept {
  try {
    return db_.notification_fd();
  } catch (const std::exception&) {
    return -1;  // connection down: poll; the next query reconnects or reports the outage
  }
}

bool TaskQueue::consume_changes() noexcept {
  try {
    return db_.consume_notifications();
  } catch (const std::exception&) {
    return false;
  }
}

std::optional<Task> TaskQueue::claim(const std::string& task_name, const std::string& owner, double lease_s,
                                     ClaimOrder order) {
  // Unlimited: every task fits (gpus as a 32-bit bound: PostgreSQL reads the parameter as INTEGER).
  return claim(task_name, owner, lease_s, order,
               {1e300, std::numeric_limits<std::int32_t>::max(), std::numeric_limits<std::int64_t>::max()});
}

std::optional<Task> TaskQueue::claim(const std::string& task_name, const std::string& owner, double lease_s,
                                     ClaimOrder order, const TaskResources& free) {
  reap_expired();
  const std::string dir = order == ClaimOrder::kNewestFirst ? "DESC" : "ASC";
  const auto r = db().execute(
      "UPDATE tasks SET status = 'running', attempt = attempt + 1, lease_owner = ?, lease_expires = " +
          db().now_us() + " + ?, started_at = " + db().now_us() +
          " WHERE id = (SELECT id FROM tasks WHERE project_name = ? AND status = 'pending' AND "
          "(? = '' OR task_name = ?) AND cpus <= ? AND gpus <= ? AND memory_bytes <= ? "
          "ORDER BY priority DESC, time " + dir + ", id " + dir + " LIMIT 1" +
          db().skip_locked() + ") RETURNING " + kTaskColumns,
      {owner, micros(lease_s), hub_.project_name(), task_name, task_name, free.cpus,
       static_cast<std::int64_t>(free.gpus), free.memory_bytes},
      sql::Access::kWrite);
  if (r.empty()) return std::nullopt;
  return read_task(r, 0);
}

bool TaskQueue::heartbeat(const Task& task, double lease_s) {
  return db().execute("UPDATE tasks SET lease_expires = " + db().now_us() + " + ?" + kHeldByAttempt,
                     {micros(lease_s), task.id, static_cast<std::int64_t>(task.attempt)}, sql::Access::kWrite)
             .changes() == 1;
}

bool TaskQueue::complete(const Task& task, const Json& result, const std::string& log_tail) {
  const auto missing = missing_result_keys(task.spec, result);
  if (!missing.empty()) {
    std::string names;
    for (const auto& k : missing) names += (names.empty() ? "" : ", ") + k;
    return fail(task, "the task's result lacks saved_result_keys: " + names, log_tail);
  }
  return db().execute(db().notifying("UPDATE tasks SET status = 'finished', result = ?, finished_at = " +
                                   db().now_us() + ", lease_owner = '', error = '', log_tail = ?" + kHeldByAttempt +
                                   " RETURNING project_name"),
                     {to_stored_json(result), log_tail, task.id, static_cast<std::int64_t>(task.attempt)},
                     sql::Access::kWrite)
             .size() == 1;
}

bool TaskQueue::fail(const Task& task, const std::string& error, const std::string& log_tail) {
  return db().execute(db().notifying("UPDATE tasks SET " + failed_attempt(db_) + ", error = ?, log_tail = ?" +
                                   kHeldByAttempt + " RETURNING project_name"),
                     {error, log_tail, task.id, static_cast<std::int64_t>(task.attempt)}, sql::Access::kWrite)
             .size() == 1;
}

bool TaskQueue::release(const Task& task) {
  return db().execute(db().notifying(std::string("UPDATE tasks SET status = 'pending', lease_owner = ''") +
                                   kHeldByAttempt + " RETURNING project_name"),
                     {task.id, static_cast<std::int64_t>(task.attempt)}, sql::Access::kWrite)
             .size() == 1;
}

}  // namespace tensorhub
