#include "queue_raw_loop.h"

#include <libpq-fe.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <stdexcept>
#include <vector>

namespace tensorhub::bench {
namespace {

constexpr const char* kColumns =
    "id, project_name, time, task_name, command, spec, hyper_parameters, saved_result_keys, "
    "max_attempts, timeout_s, priority, tags, status, attempt, failures, lease_owner, "
    "lease_expires, started_at, finished_at, result, error, log_tail";

std::int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// SQLite through its C API, statements prepared once, each cycle's statements in their own
// BEGIN IMMEDIATE transactions.
class SqliteLoop {
 public:
  explicit SqliteLoop(const std::string& path) {
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) fail("open");
    sqlite3_busy_timeout(db_, 120'000);
    exec("PRAGMA synchronous=NORMAL");  // as the hub sets it (WAL is the file's own setting)
    insert_ = prepare(
        "INSERT INTO tasks (project_name, time, task_name, command, spec, hyper_parameters, saved_result_keys, "
        "max_attempts, timeout_s, priority, tags, status) VALUES ('bench', ?, 'noop', 'true', NULL, '{}', "
        "'[\"value\"]', 3, 0, 0, '{}', 'pending')");
    claim_ = prepare(std::string("UPDATE tasks SET status = 'running', attempt = attempt + 1, lease_owner = ?, "
                                 "lease_expires = ?, started_at = ? WHERE id = (SELECT id FROM tasks WHERE "
                                 "project_name = 'bench' AND status = 'pending' AND task_name = 'noop' ORDER BY "
                                 "priority DESC, time DESC, id DESC LIMIT 1) RETURNING ") + kColumns);
    complete_ = prepare(
        "UPDATE tasks SET status = 'finished', result = ?, finished_at = ?, lease_owner = '', error = '', "
        "log_tail = '' WHERE id = ? AND attempt = ? AND status = 'running'");
  }
  ~SqliteLoop() {
    for (sqlite3_stmt* s : {insert_, claim_, complete_}) sqlite3_finalize(s);
    sqlite3_close(db_);
  }

  void cycle(const std::string& owner, int i) {
    exec("BEGIN IMMEDIATE");
    sqlite3_bind_int64(insert_, 1, now_us());
    step_all(insert_);
    exec("COMMIT");

    exec("BEGIN IMMEDIATE");
    const std::int64_t now = now_us();
    sqlite3_bind_text(claim_, 1, owner.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(claim_, 2, now + 30'000'000);
    sqlite3_bind_int64(claim_, 3, now);
    if (sqlite3_step(claim_) != SQLITE_ROW) fail("claim");
    const std::int64_t id = sqlite3_column_int64(claim_, 0);
    const std::int64_t attempt = sqlite3_column_int64(claim_, 13);
    step_all(claim_);
    exec("COMMIT");

    exec("BEGIN IMMEDIATE");
    const std::string result = "{\"value\":" + std::to_string(i) + "}";
    sqlite3_bind_text(complete_, 1, result.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(complete_, 2, now_us());
    sqlite3_bind_int64(complete_, 3, id);
    sqlite3_bind_int64(complete_, 4, attempt);
    step_all(complete_);
    if (sqlite3_changes(db_) != 1) fail("complete");
    exec("COMMIT");
  }

 private:
  sqlite3_stmt* prepare(const std::string& sql) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr) != SQLITE_OK) fail("prepare");
    return s;
  }
  void step_all(sqlite3_stmt* s) {
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    }
    if (rc != SQLITE_DONE) fail("step");
    sqlite3_reset(s);
  }
  void exec(const char* sql) {
    if (sqlite3_exec(db_, sql, nullptr, nullptr, nullptr) != SQLITE_OK) fail(sql);
  }
  [[noreturn]] void fail(const std::string& what) {
    throw std::runtime_error("raw SQLite loop: " + what + ": " + (db_ ? sqlite3_errmsg(db_) : "no connection"));
  }

  sqlite3* db_ = nullptr;
  sqlite3_stmt *insert_ = nullptr, *claim_ = nullptr, *complete_ = nullptr;
};

// PostgreSQL through libpq, one autocommit statement per step (a transaction each), the
// server's clock, SKIP LOCKED as ours.
class PostgresLoop {
 public:
  explicit PostgresLoop(const std::string& uri) : conn_(PQconnectdb(uri.c_str())) {
    if (PQstatus(conn_) != CONNECTION_OK) fail("connect", nullptr);
  }
  ~PostgresLoop() { PQfinish(conn_); }

  void cycle(const std::string& owner, int i) {
    constexpr const char* kNow = "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::bigint";
    run(std::string("INSERT INTO tasks (project_name, time, task_name, command, spec, hyper_parameters, "
                    "saved_result_keys, max_attempts, timeout_s, priority, tags, status) VALUES ('bench', ") +
            kNow + ", 'noop', 'true', NULL, '{}', '[\"value\"]', 3, 0, 0, '{}', 'pending') RETURNING id",
        {});
    PGresult* claimed =
        run(std::string("UPDATE tasks SET status = 'running', attempt = attempt + 1, lease_owner = $1, lease_expires = ") +
                kNow + " + 30000000, started_at = " + kNow +
                " WHERE id = (SELECT id FROM tasks WHERE project_name = 'bench' AND status = 'pending' AND "
                "task_name = 'noop' ORDER BY priority DESC, time DESC, id DESC LIMIT 1 FOR UPDATE SKIP LOCKED) "
                "RETURNING " + kColumns,
            {owner});
    if (PQntuples(claimed) != 1) fail("claim", claimed);
    const std::string id = PQgetvalue(claimed, 0, 0), attempt = PQgetvalue(claimed, 0, 13);
    PQclear(claimed);
    PGresult* done = run(std::string("UPDATE tasks SET status = 'finished', result = $1, finished_at = ") + kNow +
                             ", lease_owner = '', error = '', log_tail = '' WHERE id = $2 AND attempt = $3 AND "
                             "status = 'running'",
                         {"{\"value\":" + std::to_string(i) + "}", id, attempt});
    if (std::string(PQcmdTuples(done)) != "1") fail("complete", done);
    PQclear(done);
  }

 private:
  PGresult* run(const std::string& sql, const std::vector<std::string>& params) {
    std::vector<const char*> values;
    for (const auto& p : params) values.push_back(p.c_str());
    PGresult* r = PQexecParams(conn_, sql.c_str(), static_cast<int>(values.size()), nullptr, values.data(), nullptr,
                               nullptr, 0);
    const auto status = PQresultStatus(r);
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) fail(sql.substr(0, 40), r);
    return r;
  }
  [[noreturn]] void fail(const std::string& what, PGresult* r) {
    const std::string why = r ? PQresultErrorMessage(r) : PQerrorMessage(conn_);
    if (r) PQclear(r);
    throw std::runtime_error("raw PostgreSQL loop: " + what + ": " + why);
  }

  PGconn* conn_;
};

template <typename Loop>
void run_worker(const std::string& target, int w, int per) {
  Loop loop(target);
  const std::string owner = "raw-" + std::to_string(w);
  for (int i = 0; i < per; ++i) loop.cycle(owner, i);
}

}  // namespace

double run_in_workers(int workers, const std::function<void(int)>& work, const std::string& what) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<pid_t> pids;
  for (int w = 0; w < workers; ++w) {
    const pid_t pid = fork();
    if (pid == 0) {
      try {
        work(w);
      } catch (const std::exception& e) {
        std::cerr << e.what() << std::endl;
        _exit(1);
      }
      _exit(0);
    }
    pids.push_back(pid);
  }
  for (pid_t p : pids) {
    int status = 0;
    waitpid(p, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw std::runtime_error("a " + what + " worker failed");
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double raw_cycles_per_s(const std::string& uri, int workers, int per) {
  const bool sqlite = uri.starts_with("sqlite://");
  const std::string target = sqlite ? uri.substr(std::string("sqlite://").size()) : uri;
  const double seconds = run_in_workers(
      workers,
      [&](int w) {
        if (sqlite) run_worker<SqliteLoop>(target, w, per);
        else run_worker<PostgresLoop>(target, w, per);
      },
      "raw");
  return workers * per / seconds;
}

}  // namespace tensorhub::bench
