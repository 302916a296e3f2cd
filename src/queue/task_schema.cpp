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
    // 7-9 (issue 25): what an attempt of the task needs (TaskResources): cores (fractional
    // allowed), GPUs (a count; the runner picks which) and memory in bytes; 0 = no request.
    "ALTER TABLE tasks ADD COLUMN cpus REAL NOT NULL DEFAULT 0",
    "ALTER TABLE tasks ADD COLUMN gpus INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE tasks ADD COLUMN memory_bytes INTEGER NOT NULL DEFAULT 0",
    // 10: the runners that run now, each with what it has (RunnerOptions' cpus, memory, gpus),
    // seen every heartbeat; a row whose last_seen is older than its lease is a dead runner's.
    R"sql(
CREATE TABLE IF NOT EXISTS runners (
  owner TEXT PRIMARY KEY,
  project_name TEXT NOT NULL,
  task_name TEXT NOT NULL DEFAULT '',
  host TEXT NOT NULL,
  pid INTEGER NOT NULL,
  cpus REAL NOT NULL,
  memory_bytes INTEGER NOT NULL,
  gpus TEXT NOT NULL,
  slots INTEGER NOT NULL,
  lease_s REAL NOT NULL,
  slurm_job_id TEXT NOT NULL DEFAULT '',
  started_at INTEGER NOT NULL,
  last_seen INTEGER NOT NULL
)
)sql",
    // 11: one row per attempt, written when it starts and completed when it ends: what it used.
    R"sql(
CREATE TABLE IF NOT EXISTS task_attempts (
  task_id INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  project_name TEXT NOT NULL,
  owner TEXT NOT NULL,
  host TEXT NOT NULL,
  started_at INTEGER NOT NULL,
  finished_at INTEGER NOT NULL DEFAULT 0,
  outcome TEXT NOT NULL DEFAULT 'running',
  error TEXT NOT NULL DEFAULT '',
  cpus REAL NOT NULL DEFAULT 0,
  memory_limit_bytes INTEGER NOT NULL DEFAULT 0,
  gpus TEXT NOT NULL DEFAULT '[]',
  wall_s REAL NOT NULL DEFAULT 0,
  cpu_s REAL NOT NULL DEFAULT 0,
  peak_memory_bytes INTEGER NOT NULL DEFAULT 0,
  memory_source TEXT NOT NULL DEFAULT '',
  gpu_samples TEXT NOT NULL DEFAULT '[]',
  PRIMARY KEY (task_id, attempt)
)
)sql",
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
    // 9-11 (issue 25): what an attempt of the task needs (TaskResources), as for SQLite.
    "ALTER TABLE tasks ADD COLUMN cpus DOUBLE PRECISION NOT NULL DEFAULT 0",
    "ALTER TABLE tasks ADD COLUMN gpus INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE tasks ADD COLUMN memory_bytes BIGINT NOT NULL DEFAULT 0",
    // 12: the runners that run now (see the SQLite step).
    R"sql(
CREATE TABLE IF NOT EXISTS runners (
  owner TEXT PRIMARY KEY,
  project_name TEXT NOT NULL,
  task_name TEXT NOT NULL DEFAULT '',
  host TEXT NOT NULL,
  pid INTEGER NOT NULL,
  cpus DOUBLE PRECISION NOT NULL,
  memory_bytes BIGINT NOT NULL,
  gpus JSONB NOT NULL,
  slots INTEGER NOT NULL,
  lease_s DOUBLE PRECISION NOT NULL,
  slurm_job_id TEXT NOT NULL DEFAULT '',
  started_at BIGINT NOT NULL,
  last_seen BIGINT NOT NULL
)
)sql",
    // 13: one row per attempt (see the SQLite step).
    R"sql(
CREATE TABLE IF NOT EXISTS task_attempts (
  task_id BIGINT NOT NULL,
  attempt INTEGER NOT NULL,
  project_name TEXT NOT NULL,
  owner TEXT NOT NULL,
  host TEXT NOT NULL,
  started_at BIGINT NOT NULL,
  finished_at BIGINT NOT NULL DEFAULT 0,
  outcome TEXT NOT NULL DEFAULT 'running',
  error TEXT NOT NULL DEFAULT '',
  cpus DOUBLE PRECISION NOT NULL DEFAULT 0,
  memory_limit_bytes BIGINT NOT NULL DEFAULT 0,
  gpus JSONB NOT NULL DEFAULT '[]',
  wall_s DOUBLE PRECISION NOT NULL DEFAULT 0,
  cpu_s DOUBLE PRECISION NOT NULL DEFAULT 0,
  peak_memory_bytes BIGINT NOT NULL DEFAULT 0,
  memory_source TEXT NOT NULL DEFAULT '',
  gpu_samples JSONB NOT NULL DEFAULT '[]',
  PRIMARY KEY (task_id, attempt)
)
)sql",
  };
}

}  // namespace

const sql::Schema& task_schema() {
  static const sql::Schema schema{
      .module = "queue", .tables = {"tasks", "runners", "task_attempts"}, .sqlite_steps = sqlite_steps(), .postgres_steps = postgres_steps()};
  return schema;
}

}  // namespace tensorhub::detail
