// SQLite backend. Concurrency model: WAL journal (readers never block the writer), every
// write in a BEGIN IMMEDIATE transaction (so two writers queue on the busy handler instead
// of deadlocking on a read->write lock upgrade), busy_timeout long enough for a large blob
// write by another process to finish.
#include "sqlite_backend.h"

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "blob_reader.h"
#include "blob_writer.h"
#include "query.h"
#include "schema_fields.h"
#include "stored_json.h"
#include "tensorhub/core/clock.h"
#include "tensorhub/core/error.h"
#include "tensorhub/core/hash.h"

namespace tensorhub {
namespace {

constexpr int kBusyTimeoutMs = 120'000;
constexpr int kSchemaVersion = 2;
constexpr std::int64_t kWalSizeLimit = 16 << 20;  // bytes

// Migrations, applied in order; index i brings the schema from version i to i + 1.
const char* const kMigrations[] = {
    R"sql(
CREATE TABLE blobs (
  sha256 TEXT PRIMARY KEY,
  size INTEGER NOT NULL,
  chunk_count INTEGER NOT NULL
);
CREATE TABLE blob_chunks (
  sha256 TEXT NOT NULL,
  idx INTEGER NOT NULL,
  data BLOB NOT NULL,
  PRIMARY KEY (sha256, idx)
);
CREATE TABLE documents (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  collection TEXT NOT NULL,
  project_name TEXT NOT NULL,
  time INTEGER NOT NULL,
  tags TEXT NOT NULL
);
CREATE INDEX documents_by_project ON documents (collection, project_name, time);
CREATE TABLE document_blobs (
  document_id INTEGER NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
  part TEXT NOT NULL,
  sha256 TEXT NOT NULL REFERENCES blobs (sha256),
  PRIMARY KEY (document_id, part)
);
CREATE INDEX document_blobs_by_sha ON document_blobs (sha256);
CREATE TABLE tasks (
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
);
CREATE INDEX tasks_claimable ON tasks (project_name, status, task_name, priority, time);
)sql",
    // 2: named leases (one tuner per search).
    R"sql(
CREATE TABLE leases (
  project_name TEXT NOT NULL,
  name TEXT NOT NULL,
  owner TEXT NOT NULL,
  expires INTEGER NOT NULL,
  PRIMARY KEY (project_name, name)
);
)sql",
};

class Statement;

std::string uri_of(const std::string& path) { return "sqlite://" + percent_encode_path(path); }

// The message of every "there is no hub here" error, so callers (the CLI) can add their advice.
[[noreturn]] void throw_no_hub(const std::string& path, const std::string& why) {
  throw NotFound("no hub at " + uri_of(path) + ": " + why +
                 " (check the hub URI; a hub is created when something is first saved to it)");
}

// One sqlite3 connection; closes on destruction. kExisting opens only a file that exists.
class Connection {
 public:
  Connection(const std::string& path, OpenMode mode) : path_(path) {
    std::error_code ec;
    if (mode == OpenMode::kExisting && !std::filesystem::exists(path, ec))
      throw_no_hub(path, "the file " + path + " does not exist");
    const int create = mode == OpenMode::kCreate ? SQLITE_OPEN_CREATE : 0;
    const int rc = sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | create | SQLITE_OPEN_NOMUTEX,
                                   nullptr);
    if (rc != SQLITE_OK) {
      std::string why = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
      sqlite3_close(db_);
      db_ = nullptr;
      throw Unavailable("cannot open SQLite hub " + path + ": " + why +
                        " (does the directory exist and is it writable?)");
    }
    sqlite3_busy_timeout(db_, kBusyTimeoutMs);
  }
  ~Connection() { sqlite3_close_v2(db_); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  sqlite3* get() const { return db_; }
  const std::string& path() const { return path_; }

  void exec(const std::string& sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      std::string why = err ? err : "unknown error";
      sqlite3_free(err);
      throw_error(why, sql);
    }
  }

  [[noreturn]] void throw_error(const std::string& why, const std::string& sql) const {
    const int code = sqlite3_errcode(db_) & 0xff;
    const std::string msg = "SQLite hub " + path_ + ": " + why;
    if (code == SQLITE_BUSY || code == SQLITE_LOCKED)
      throw Unavailable(msg + " (database busy for over " + std::to_string(kBusyTimeoutMs / 1000) + " s)");
    if (code == SQLITE_CORRUPT || code == SQLITE_NOTADB) throw DataLoss(msg);
    if (code == SQLITE_FULL || code == SQLITE_IOERR || code == SQLITE_CANTOPEN || code == SQLITE_READONLY)
      throw Unavailable(msg);
    throw Internal(msg + " in: " + sql.substr(0, 200));
  }

  std::int64_t changes() const { return sqlite3_changes64(db_); }
  std::int64_t last_insert_rowid() const { return sqlite3_last_insert_rowid(db_); }

 private:
  std::string path_;
  sqlite3* db_ = nullptr;
};

// One prepared statement; step() returns true while rows come.
class Statement {
 public:
  Statement(Connection& conn, const std::string& sql) : conn_(conn), sql_(sql) {
    if (sqlite3_prepare_v2(conn.get(), sql.c_str(), -1, &stmt_, nullptr) != SQLITE_OK)
      conn.throw_error(sqlite3_errmsg(conn.get()), sql);
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind(int i, const sql::Value& v) {
    int rc = SQLITE_OK;
    if (std::holds_alternative<std::nullptr_t>(v)) rc = sqlite3_bind_null(stmt_, i);
    else if (auto* n = std::get_if<std::int64_t>(&v)) rc = sqlite3_bind_int64(stmt_, i, *n);
    else if (auto* d = std::get_if<double>(&v)) rc = sqlite3_bind_double(stmt_, i, *d);
    else {
      const auto& s = std::get<std::string>(v);
      rc = sqlite3_bind_text(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
    }
    if (rc != SQLITE_OK) conn_.throw_error(sqlite3_errmsg(conn_.get()), sql_);
    return *this;
  }
  Statement& bind_blob(int i, const std::byte* data, std::size_t size) {
    if (sqlite3_bind_blob64(stmt_, i, data, size, SQLITE_STATIC) != SQLITE_OK)
      conn_.throw_error(sqlite3_errmsg(conn_.get()), sql_);
    return *this;
  }
  // Binds params to ?1..?n starting at `first`.
  Statement& bind_all(const std::vector<sql::Value>& params, int first = 1) {
    for (std::size_t i = 0; i < params.size(); ++i) bind(first + static_cast<int>(i), params[i]);
    return *this;
  }

  bool step() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    conn_.throw_error(sqlite3_errmsg(conn_.get()), sql_);
  }
  void run() {
    while (step()) {
    }
  }
  void reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }

  std::int64_t int64(int col) const { return sqlite3_column_int64(stmt_, col); }
  double real(int col) const { return sqlite3_column_double(stmt_, col); }
  bool is_null(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  std::string text(int col) const {
    const auto* p = sqlite3_column_text(stmt_, col);
    return p ? std::string(reinterpret_cast<const char*>(p), sqlite3_column_bytes(stmt_, col)) : "";
  }
  std::span<const std::byte> blob(int col) const {
    const void* p = sqlite3_column_blob(stmt_, col);
    return {static_cast<const std::byte*>(p), static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col))};
  }

 private:
  Connection& conn_;
  std::string sql_;
  sqlite3_stmt* stmt_ = nullptr;
};

// BEGIN IMMEDIATE (or DEFERRED for reads) ... COMMIT; rolls back if not committed.
class Transaction {
 public:
  Transaction(Connection& conn, bool write) : conn_(conn) {
    conn_.exec(write ? "BEGIN IMMEDIATE" : "BEGIN");
  }
  ~Transaction() {
    if (!done_) sqlite3_exec(conn_.get(), "ROLLBACK", nullptr, nullptr, nullptr);
  }
  void commit() {
    conn_.exec("COMMIT");
    done_ = true;
  }

 private:
  Connection& conn_;
  bool done_ = false;
};

Json parse_json_column(const std::string& text, const char* column) {
  if (text.empty()) return nullptr;
  return from_stored_json(text, column);
}

constexpr const char* kTaskColumns =
    "id, project_name, time, task_name, command, spec, hyper_parameters, saved_result_keys, "
    "max_attempts, timeout_s, priority, tags, status, attempt, failures, lease_owner, "
    "lease_expires, started_at, finished_at, result, error, log_tail";

Task read_task(const Statement& s) {
  Task t;
  t.id = s.int64(0);
  t.project_name = s.text(1);
  t.time = s.int64(2);
  t.spec.task_name = s.text(3);
  t.spec.command = s.text(4);
  t.spec.spec = s.is_null(5) ? Json() : parse_json_column(s.text(5), "spec");
  t.spec.hyper_parameters = parse_json_column(s.text(6), "hyper_parameters");
  t.spec.saved_result_keys = parse_json_column(s.text(7), "saved_result_keys").get<std::vector<std::string>>();
  t.spec.max_attempts = static_cast<int>(s.int64(8));
  t.spec.timeout_s = s.real(9);
  t.spec.priority = static_cast<int>(s.int64(10));
  t.spec.tags = parse_json_column(s.text(11), "tags");
  t.status = task_status_from_string(s.text(12));
  t.attempt = static_cast<int>(s.int64(13));
  t.failures = static_cast<int>(s.int64(14));
  t.lease_owner = s.text(15);
  t.lease_expires = s.int64(16);
  t.started_at = s.int64(17);
  t.finished_at = s.int64(18);
  t.result = s.is_null(19) ? Json() : parse_json_column(s.text(19), "result");
  t.error = s.text(20);
  t.log_tail = s.text(21);
  return t;
}

class SqliteBackend final : public Backend {
 public:
  SqliteBackend(const std::string& path, OpenMode mode) : conn_(path, mode) {
    // Switching a new file to WAL, or opening one while another process recovers its WAL,
    // can report SQLITE_BUSY without consulting the busy handler: retry for a while.
    for (int attempt = 0;; ++attempt) {
      try {
        // Checked before anything is written: a file that is not a hub stays as it was.
        if (mode == OpenMode::kExisting && !has_schema())
          throw_no_hub(conn_.path(), "the file " + conn_.path() + " holds no tensorhub hub (no tensorhub tables)");
        // Takes effect only in a new, empty database (before its first table): deletes then
        // give freed pages back to the file system (delete_documents). Older hubs: compact().
        conn_.exec("PRAGMA auto_vacuum=INCREMENTAL");
        conn_.exec("PRAGMA journal_mode=WAL");
        // A WAL grown by a large write shrinks back to this size once checkpointed.
        conn_.exec("PRAGMA journal_size_limit=" + std::to_string(kWalSizeLimit));
        conn_.exec("PRAGMA synchronous=NORMAL");
        conn_.exec("PRAGMA foreign_keys=ON");
        migrate();
        break;
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::kUnavailable || attempt >= 200) throw;
        std::this_thread::sleep_for(std::chrono::milliseconds(25 + attempt));
      }
    }
  }

  std::string uri() const override { return uri_of(conn_.path()); }

  using Backend::insert_document;
  std::int64_t insert_document(Collection c, const std::string& project, const Json& tags,
                               const PartSources& parts) override {
    if (!tags.is_object()) throw InvalidArgument("document tags must be a JSON object, got " + tags.dump());
    // Hash outside the transaction: it is the slow part and needs no lock.
    std::map<std::string, std::string> shas;
    for (const auto& [name, source] : parts) shas[name] = sha256_of(*source, name);
    Transaction tx(conn_, true);
    Statement ins(conn_, "INSERT INTO documents (collection, project_name, time, tags) VALUES (?, ?, ?, ?)");
    ins.bind_all({to_string(c), project, now_micros(), to_stored_json(tags)}).run();
    const std::int64_t id = conn_.last_insert_rowid();
    for (const auto& [name, source] : parts) {
      put_blob(shas[name], *source, name);
      Statement link(conn_, "INSERT INTO document_blobs (document_id, part, sha256) VALUES (?, ?, ?)");
      link.bind_all({id, name, shas[name]}).run();
    }
    tx.commit();
    return id;
  }

  std::vector<Document> find_documents(Collection c, const std::string& project, const Json& filter,
                                       const SortSpec& sort, std::int64_t limit) override {
    const auto where = sql::where_clause(filter, sql::Dialect::kSqlite, document_field);
    std::string q = "SELECT id, project_name, time, tags FROM documents WHERE collection = ? AND project_name = ? AND " +
                    where.sql + " ORDER BY " + sql::order_by(sort, sql::Dialect::kSqlite, document_field, "id ASC");
    if (limit > 0) q += " LIMIT " + std::to_string(limit);
    Transaction tx(conn_, false);
    Statement s(conn_, q);
    s.bind_all({to_string(c), project}).bind_all(where.params, 3);
    std::vector<Document> out;
    while (s.step()) {
      Document d;
      d.id = s.int64(0);
      d.project_name = s.text(1);
      d.time = s.int64(2);
      d.tags = parse_json_column(s.text(3), "tags");
      out.push_back(std::move(d));
    }
    Statement parts(conn_, "SELECT part, sha256 FROM document_blobs WHERE document_id = ?");
    for (auto& d : out) {
      parts.reset();
      parts.bind(1, d.id);
      while (parts.step()) d.parts[parts.text(0)] = parts.text(1);
    }
    tx.commit();
    return out;
  }

  std::int64_t count_documents(Collection c, const std::string& project, const Json& filter) override {
    const auto where = sql::where_clause(filter, sql::Dialect::kSqlite, document_field);
    Statement s(conn_, "SELECT COUNT(*) FROM documents WHERE collection = ? AND project_name = ? AND " + where.sql);
    s.bind_all({to_string(c), project}).bind_all(where.params, 3);
    s.step();
    return s.int64(0);
  }

  std::vector<std::string> list_projects() override {
    Transaction tx(conn_, false);
    Statement s(conn_, "SELECT project_name FROM documents UNION SELECT project_name FROM tasks");
    std::vector<std::string> out;
    while (s.step()) out.push_back(s.text(0));
    tx.commit();
    std::sort(out.begin(), out.end());  // bytewise, as on PostgreSQL (whose collation may differ)
    return out;
  }

  std::int64_t delete_documents(Collection c, const std::string& project, const Json& filter) override {
    const auto where = sql::where_clause(filter, sql::Dialect::kSqlite, document_field);
    Transaction tx(conn_, true);
    Statement del(conn_, "DELETE FROM documents WHERE collection = ? AND project_name = ? AND " + where.sql);
    del.bind_all({to_string(c), project}).bind_all(where.params, 3).run();
    const std::int64_t n = conn_.changes();
    const bool freed = collect_garbage() > 0;
    tx.commit();
    if (freed) give_back_free_pages();
    return n;
  }

  std::uint64_t read_blob_chunks(const std::string& sha256, const BlobChunkSink& sink) override {
    Transaction tx(conn_, false);
    const auto record = blob_record(sha256);
    if (!record) throw NotFound("blob " + sha256 + " is not in the hub " + conn_.path());
    detail::BlobVerifier verifier(sha256, record->first, record->second, conn_.path());
    Statement chunks(conn_, "SELECT idx, data FROM blob_chunks WHERE sha256 = ? ORDER BY idx");
    chunks.bind(1, sha256);
    while (chunks.step()) verifier.chunk(chunks.int64(0), chunks.blob(1), sink);
    const std::uint64_t size = verifier.finish();
    tx.commit();
    return size;
  }

  std::optional<std::uint64_t> blob_size(const std::string& sha256) override {
    Transaction tx(conn_, false);
    const auto record = blob_record(sha256);
    tx.commit();
    if (!record) return std::nullopt;
    return static_cast<std::uint64_t>(std::max<std::int64_t>(record->first, 0));
  }

  std::int64_t count_blobs() override {
    Statement s(conn_, "SELECT COUNT(*) FROM blobs");
    s.step();
    return s.int64(0);
  }

  std::int64_t storage_bytes() override {
    std::int64_t total = 0;
    for (const std::string& f : {conn_.path(), conn_.path() + "-wal"}) {
      std::error_code ec;
      const auto size = std::filesystem::file_size(f, ec);
      if (!ec) total += static_cast<std::int64_t>(size);
    }
    return total;
  }

  void compact() override {
    // VACUUM rebuilds the file without free pages; auto_vacuum set just before it applies to
    // the rebuilt file, so a hub created without it gives space back on delete from now on.
    conn_.exec("PRAGMA auto_vacuum=INCREMENTAL");
    conn_.exec("VACUUM");
    conn_.exec("PRAGMA wal_checkpoint(TRUNCATE)");
  }

  Lease acquire_lease(const std::string& project, const std::string& name, const std::string& owner,
                      std::int64_t lease_us) override {
    Transaction tx(conn_, true);  // BEGIN IMMEDIATE: the read and the write below are one step
    const std::int64_t now = now_micros();
    Statement get(conn_, "SELECT owner, expires FROM leases WHERE project_name = ? AND name = ?");
    get.bind_all({project, name});
    if (get.step()) {
      Lease held{get.text(0), get.int64(1) - now};
      get.run();
      if (!held.owner.empty() && held.owner != owner && held.remaining_us >= 0) return held;
    }
    Statement put(conn_, "INSERT OR REPLACE INTO leases (project_name, name, owner, expires) VALUES (?, ?, ?, ?)");
    put.bind_all({project, name, owner, now + lease_us}).run();
    tx.commit();
    return {owner, lease_us};
  }

  bool renew_lease(const std::string& project, const std::string& name, const std::string& owner,
                   std::int64_t lease_us) override {
    return fenced_update("UPDATE leases SET expires = ? WHERE project_name = ? AND name = ? AND owner = ?",
                         {now_micros() + lease_us, project, name, owner});
  }

  void release_lease(const std::string& project, const std::string& name, const std::string& owner) override {
    fenced_update("UPDATE leases SET owner = '', expires = 0 WHERE project_name = ? AND name = ? AND owner = ?",
                  {project, name, owner});
  }

  std::int64_t insert_task(const std::string& project, const TaskSpec& spec) override {
    Transaction tx(conn_, true);
    Statement s(conn_,
                "INSERT INTO tasks (project_name, time, task_name, command, spec, hyper_parameters, "
                "saved_result_keys, max_attempts, timeout_s, priority, tags, status) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending')");
    s.bind_all({project, now_micros(), spec.task_name, spec.command,
                spec.spec.is_null() ? sql::Value(nullptr) : sql::Value(to_stored_json(spec.spec)),
                to_stored_json(spec.hyper_parameters), Json(spec.saved_result_keys).dump(),
                static_cast<std::int64_t>(spec.max_attempts), spec.timeout_s,
                static_cast<std::int64_t>(spec.priority), to_stored_json(spec.tags)})
        .run();
    const std::int64_t id = conn_.last_insert_rowid();
    tx.commit();
    return id;
  }

  std::optional<Task> claim_task(const std::string& project, const std::string& task_name,
                                 const std::string& owner, std::int64_t lease_us,
                                 ClaimOrder order) override {
    Transaction tx(conn_, true);
    const std::int64_t now = now_micros();
    reap(project, now);
    const std::string dir = order == ClaimOrder::kNewestFirst ? "DESC" : "ASC";
    Statement s(conn_,
                std::string("UPDATE tasks SET status = 'running', attempt = attempt + 1, lease_owner = ?, "
                            "lease_expires = ?, started_at = ? WHERE id = (SELECT id FROM tasks "
                            "WHERE project_name = ? AND status = 'pending' AND (? = '' OR task_name = ?) "
                            "ORDER BY priority DESC, time ") + dir + ", id " + dir +
                    " LIMIT 1) RETURNING " + kTaskColumns);
    s.bind_all({owner, now + lease_us, now, project, task_name, task_name});
    std::optional<Task> out;
    if (s.step()) out = read_task(s);
    s.run();
    tx.commit();
    return out;
  }

  bool heartbeat_task(std::int64_t id, int attempt, std::int64_t lease_us) override {
    return fenced_update("UPDATE tasks SET lease_expires = ? WHERE id = ? AND attempt = ? AND status = 'running'",
                         {now_micros() + lease_us, id, static_cast<std::int64_t>(attempt)});
  }

  bool finish_task(std::int64_t id, int attempt, const Json& result, const std::string& log_tail) override {
    return fenced_update(
        "UPDATE tasks SET status = 'finished', result = ?, finished_at = ?, lease_owner = '', error = '', "
        "log_tail = ? WHERE id = ? AND attempt = ? AND status = 'running'",
        {to_stored_json(result), now_micros(), log_tail, id, static_cast<std::int64_t>(attempt)});
  }

  bool fail_task(std::int64_t id, int attempt, const std::string& error,
                 const std::string& log_tail) override {
    return fenced_update(
        "UPDATE tasks SET failures = failures + 1, "
        "status = CASE WHEN failures + 1 >= max_attempts THEN 'failed' ELSE 'pending' END, "
        "finished_at = CASE WHEN failures + 1 >= max_attempts THEN ? ELSE 0 END, "
        "error = ?, log_tail = ?, lease_owner = '' WHERE id = ? AND attempt = ? AND status = 'running'",
        {now_micros(), error, log_tail, id, static_cast<std::int64_t>(attempt)});
  }

  bool release_task(std::int64_t id, int attempt) override {
    return fenced_update(
        "UPDATE tasks SET status = 'pending', lease_owner = '' WHERE id = ? AND attempt = ? AND status = 'running'",
        {id, static_cast<std::int64_t>(attempt)});
  }

  std::int64_t cancel_tasks(const std::string& project, const Json& filter) override {
    const auto where = sql::where_clause(filter, sql::Dialect::kSqlite, task_field);
    Transaction tx(conn_, true);
    Statement s(conn_,
                "UPDATE tasks SET status = 'cancelled', finished_at = ?, lease_owner = '' WHERE project_name = ? "
                "AND status IN ('pending', 'running') AND " + where.sql);
    s.bind_all({now_micros(), project}).bind_all(where.params, 3).run();
    const std::int64_t n = conn_.changes();
    tx.commit();
    return n;
  }

  std::int64_t reap_expired_tasks(const std::string& project) override {
    Transaction tx(conn_, true);
    const std::int64_t n = reap(project, now_micros());
    tx.commit();
    return n;
  }

  std::vector<Task> find_tasks(const std::string& project, const Json& filter, const SortSpec& sort,
                               std::int64_t limit) override {
    const auto where = sql::where_clause(filter, sql::Dialect::kSqlite, task_field);
    std::string q = std::string("SELECT ") + kTaskColumns + " FROM tasks WHERE project_name = ? AND " +
                    where.sql + " ORDER BY " + sql::order_by(sort, sql::Dialect::kSqlite, task_field, "id ASC");
    if (limit > 0) q += " LIMIT " + std::to_string(limit);
    Statement s(conn_, q);
    s.bind(1, project).bind_all(where.params, 2);
    std::vector<Task> out;
    while (s.step()) out.push_back(read_task(s));
    return out;
  }

  std::int64_t delete_tasks(const std::string& project, const Json& filter) override {
    const auto where = sql::where_clause(filter, sql::Dialect::kSqlite, task_field);
    Transaction tx(conn_, true);
    Statement s(conn_, "DELETE FROM tasks WHERE project_name = ? AND " + where.sql);
    s.bind(1, project).bind_all(where.params, 2).run();
    const std::int64_t n = conn_.changes();
    tx.commit();
    return n;
  }

  std::map<std::string, std::int64_t> count_tasks(const std::string& project, const Json& filter) override {
    const auto where = sql::where_clause(filter, sql::Dialect::kSqlite, task_field);
    Statement s(conn_, "SELECT status, COUNT(*) FROM tasks WHERE project_name = ? AND " + where.sql +
                           " GROUP BY status");
    s.bind(1, project).bind_all(where.params, 2);
    std::map<std::string, std::int64_t> out;
    while (s.step()) out[s.text(0)] = s.int64(1);
    return out;
  }

 private:
  void migrate() {
    Transaction tx(conn_, true);
    Statement v(conn_, "PRAGMA user_version");
    v.step();
    const int version = static_cast<int>(v.int64(0));
    v.run();
    if (version > kSchemaVersion)
      throw FailedPrecondition("hub " + conn_.path() + " has schema version " + std::to_string(version) +
                               ", newer than this tensorhub understands (" + std::to_string(kSchemaVersion) +
                               "); upgrade tensorhub");
    for (int i = version; i < kSchemaVersion; ++i) conn_.exec(kMigrations[i]);
    if (version != kSchemaVersion) conn_.exec("PRAGMA user_version = " + std::to_string(kSchemaVersion));
    tx.commit();
  }

  // (size, chunk_count) of a stored blob, or nothing. REQUIRES: inside a transaction.
  std::optional<std::pair<std::int64_t, std::int64_t>> blob_record(const std::string& sha256) {
    Statement meta(conn_, "SELECT size, chunk_count FROM blobs WHERE sha256 = ?");
    meta.bind(1, sha256);
    if (!meta.step()) return std::nullopt;
    return std::pair{meta.int64(0), meta.int64(1)};
  }

  // Stores a blob unless one with this hash exists. REQUIRES: inside a write transaction.
  void put_blob(const std::string& sha, const BlobSource& source, const std::string& part) {
    Statement ins(conn_, "INSERT OR IGNORE INTO blobs (sha256, size, chunk_count) VALUES (?, ?, ?)");
    ins.bind_all({sha, static_cast<std::int64_t>(source.size()), chunk_count_of(source.size())}).run();
    if (conn_.changes() == 0) return;  // content-addressed: the same bytes are stored already
    Statement chunk(conn_, "INSERT INTO blob_chunks (sha256, idx, data) VALUES (?, ?, ?)");
    write_chunks(source, sha, part, [&](std::int64_t i, std::span<const std::byte> bytes) {
      chunk.reset();
      chunk.bind(1, sha).bind(2, i).bind_blob(3, bytes.data(), bytes.size());
      chunk.run();
    });
  }

  // Removes blobs no document references; returns how many chunks went. REQUIRES: inside a
  // write transaction.
  std::int64_t collect_garbage() {
    conn_.exec(
        "DELETE FROM blob_chunks WHERE sha256 IN (SELECT sha256 FROM blobs b WHERE NOT EXISTS "
        "(SELECT 1 FROM document_blobs d WHERE d.sha256 = b.sha256))");
    const std::int64_t chunks = conn_.changes();
    conn_.exec(
        "DELETE FROM blobs WHERE NOT EXISTS (SELECT 1 FROM document_blobs d WHERE d.sha256 = blobs.sha256)");
    return chunks;
  }

  // Truncates the file by the pages deletes freed (a no-op in a hub created without
  // auto_vacuum), then copies the WAL back and empties it, so that the database file itself
  // shrinks. The checkpoint does not wait: while another process reads, it copies what it
  // can and a later checkpoint finishes the job.
  void give_back_free_pages() {
    conn_.exec("PRAGMA incremental_vacuum");
    sqlite3_busy_timeout(conn_.get(), 0);
    try {
      conn_.exec("PRAGMA wal_checkpoint(TRUNCATE)");
    } catch (const Error&) {
      // Busy: the deleted data is gone either way; only the file's size waits.
    }
    sqlite3_busy_timeout(conn_.get(), kBusyTimeoutMs);
  }

  // True when the file holds tensorhub's tables (any schema version).
  bool has_schema() {
    Statement s(conn_, "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name IN ('documents', 'tasks')");
    s.step();
    return s.int64(0) == 2;
  }

  // Expired leases count as a failed attempt. REQUIRES: inside a write transaction.
  std::int64_t reap(const std::string& project, std::int64_t now) {
    Statement s(conn_,
                "UPDATE tasks SET failures = failures + 1, "
                "status = CASE WHEN failures + 1 >= max_attempts THEN 'failed' ELSE 'pending' END, "
                "finished_at = CASE WHEN failures + 1 >= max_attempts THEN ? ELSE 0 END, "
                "error = 'lease of runner ' || lease_owner || ' expired (runner killed or unreachable)', "
                "lease_owner = '' WHERE project_name = ? AND status = 'running' AND lease_expires < ?");
    s.bind_all({now, project, now}).run();
    return conn_.changes();
  }

  bool fenced_update(const std::string& q, const std::vector<sql::Value>& params) {
    Transaction tx(conn_, true);
    Statement s(conn_, q);
    s.bind_all(params).run();
    const bool ok = conn_.changes() == 1;
    tx.commit();
    return ok;
  }

  Connection conn_;
};

}  // namespace

std::unique_ptr<Backend> open_sqlite_backend(const std::string& path, OpenMode mode) {
  return std::make_unique<SqliteBackend>(path, mode);
}

}  // namespace tensorhub
