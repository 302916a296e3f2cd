#include "task_schema.h"

namespace tensorhub::detail {
namespace {

// Steps 0-1 (SQLite) and 0-3 (PostgreSQL) are the table and indexes a hub of the store's
// schema 2 already holds (they were the store's then): "IF NOT EXISTS" lets such a hub take
// them as they are. Later steps are appended, never edited: a hub records how many it has run.
std::vector<std::string> sqlite_steps() {
  return {
    R"sql(
CREATE TABLE IF NOT EXISTS tasks (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  project_name TEXT NOT NULL,
  time INTEGER NOT NULL,
  task_name TEXT NOT NULL,
  command TEXT NOT NULL,
  spec TEXT,
  hyper_parameters TEXT NOT NULL,
  saved_result_keys TEXT NOT NULL,
  max_attempts INTEGER NOT NULL,
  timeout_s REAL NOT NULL,
  priority INTEGER NOT NULL,
  tags TEXT NOT NULL,
  status TEXT NOT NULL,
  attempt INTEGER NOT NULL DEFAULT 0,
  failures INTEGER NOT NULL DEFAULT 0,
  lease_owner TEXT NOT NULL DEFAULT '',
  lease_expires INTEGER NOT NULL DEFAULT 0,
  started_at INTEGER NOT NULL DEFAULT 0,
  finished_at INTEGER NOT NULL DEFAULT 0,
  result TEXT,
  error TEXT NOT NULL DEFAULT '',
  log_tail TEXT NOT NULL DEFAULT ''
)
)sql",
    R"sql(
CREATE INDEX IF NOT EXISTS tasks_claimable ON tasks (project_name, status, task_name, priority, time)
)sql",
    // 2: epoch reports move from the tuner's trials collection to their own (epoch_report.h).
    "UPDATE documents SET collection = 'epoch_reports' WHERE collection = 'trials' AND "
    "json_extract(tags, '$.kind') = 'epoch'",
    // 3-6 (issue 23): script tasks, TensorHub's create_task(script=...): the script's source
    // (UTF-8 text), its file name, the SHA-256 of its bytes, and the task's own interpreter.
    "ALTER TABLE tasks ADD COLUMN script TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE tasks ADD COLUMN script_name TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE tasks ADD COLUMN script_sha256 TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE tasks ADD COLUMN python TEXT NOT NULL DEFAULT ''",
  };
}

std::vector<std::string> postgres_steps() {
  return {
    R"sql(
CREATE TABLE IF NOT EXISTS tasks (
  id BIGSERIAL PRIMARY KEY,
  project_name TEXT NOT NULL,
  time BIGINT NOT NULL,
  task_name TEXT NOT NULL,
  command TEXT NOT NULL,
  spec JSONB,
  hyper_parameters JSONB NOT NULL,
  saved_result_keys JSONB NOT NULL,
  max_attempts INTEGER NOT NULL,
  timeout_s DOUBLE PRECISION NOT NULL,
  priority INTEGER NOT NULL,
  tags JSONB NOT NULL,
  status TEXT NOT NULL,
  attempt INTEGER NOT NULL DEFAULT 0,
  failures INTEGER NOT NULL DEFAULT 0,
  lease_owner TEXT NOT NULL DEFAULT '',
  lease_expires BIGINT NOT NULL DEFAULT 0,
  started_at BIGINT NOT NULL DEFAULT 0,
  finished_at BIGINT NOT NULL DEFAULT 0,
  result JSONB,
  error TEXT NOT NULL DEFAULT '',
  log_tail TEXT NOT NULL DEFAULT ''
)
)sql",
    R"sql(
CREATE INDEX IF NOT EXISTS tasks_pending ON tasks (project_name, priority DESC, time, id) WHERE status = 'pending'
)sql",
    R"sql(
CREATE INDEX IF NOT EXISTS tasks_running ON tasks (project_name, lease_expires) WHERE status = 'running'
)sql",
    R"sql(
CREATE INDEX IF NOT EXISTS tasks_by_project ON tasks (project_name, status)
)sql",
    "UPDATE documents SET collection = 'epoch_reports' WHERE collection = 'trials' AND tags->>'kind' = 'epoch'",
    // 5-8 (issue 23): script tasks, TensorHub's create_task(script=...): the script's source
    // (UTF-8 text), its file name, the SHA-256 of its bytes, and the task's own interpreter.
    "ALTER TABLE tasks ADD COLUMN script TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE tasks ADD COLUMN script_name TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE tasks ADD COLUMN script_sha256 TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE tasks ADD COLUMN python TEXT NOT NULL DEFAULT ''",
  };
}

}  // namespace

const sql::Schema& task_schema() {
  static const sql::Schema schema{
      .module = "queue", .tables = {"tasks"}, .sqlite_steps = sqlite_steps(), .postgres_steps = postgres_steps()};
  return schema;
}

}  // namespace tensorhub::detail
