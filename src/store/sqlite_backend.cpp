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
#include <unordered_map>

#include "blob_reader.h"
#include "blob_writer.h"
#include "read_only.h"
#include "sqlite_files.h"
#include "tensorhub/store/query.h"
#include "schema_fields.h"
#include "tensorhub/store/stored_json.h"
#include "tensorhub/core/clock.h"
#include "tensorhub/core/error.h"
#include "tensorhub/core/hash.h"
#include "tensorhub/store/sql.h"

namespace tensorhub {
namespace {

constexpr int kBusyTimeoutMs = 120'000;
constexpr int kSchemaVersion = 3;
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
)sql",
    // 2 once created the tuner's leases table; tune/ keeps it now (search_lease.cpp).
    "SELECT 1",
    // 3: the versions of the tables modules above the store keep (sql::Schema): queue/'s
    // tasks, tune/'s leases. A hub of version 2 holds both already; their schemas create
    // them only if they do not exist.
    R"sql(
CREATE TABLE module_schemas (
  module TEXT PRIMARY KEY,
  version INTEGER NOT NULL,
  tables TEXT NOT NULL
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

// Binds `v` to placeholder `i` (1-based); SQLite's result code.
int bind(sqlite3_stmt* stmt, int i, const sql::Value& v) {
  if (std::holds_alternative<std::nullptr_t>(v)) return sqlite3_bind_null(stmt, i);
  if (auto* n = std::get_if<std::int64_t>(&v)) return sqlite3_bind_int64(stmt, i, *n);
  if (auto* d = std::get_if<double>(&v)) return sqlite3_bind_double(stmt, i, *d);
  const auto& s = std::get<std::string>(v);
  return sqlite3_bind_text(stmt, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
}

// One sqlite3 connection, also the hub's SQL connection (sql.h); closes on destruction.
// kExisting and kReadOnly open only a file that exists; kCreate and kExisting only one this
// user may write; kReadOnly never writes (see OpenMode::kReadOnly for how it reads).
class Connection final : public sql::Connection {
 public:
  Connection(const std::string& path, OpenMode mode) : path_(path), mode_(mode) {
    std::error_code ec;
    if (mode != OpenMode::kCreate && !std::filesystem::exists(path, ec))
      throw_no_hub(path, "the file " + path + " does not exist");
    if (mode == OpenMode::kReadOnly) {
      open_for_reading();
    } else {
      // Refused here, at once: SQLite would open a write-protected file read-only and fail
      // only at the first write, or keep retrying a lock it can never take.
      if (const std::string why = detail::why_not_writable(path); !why.empty())
        detail::throw_read_only(uri_of(path), why);
      open_handle(path, SQLITE_OPEN_READWRITE | (mode == OpenMode::kCreate ? SQLITE_OPEN_CREATE : 0));
    }
  }
  ~Connection() override { close_handle(); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  sqlite3* get() const { return db_; }
  const std::string& path() const { return path_; }

  // Runs ";"-separated statements without parameters (pragmas, migrations).
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
    if (immutable_ && detail::FileStamp::of(path_) != stamp_.database) throw_changed_while_read();
    if (code == SQLITE_READONLY) throw_readonly_error(why);
    if (code == SQLITE_BUSY || code == SQLITE_LOCKED)
      throw Unavailable(msg + " (database busy for over " + std::to_string(kBusyTimeoutMs / 1000) + " s)");
    if (code == SQLITE_CORRUPT || code == SQLITE_NOTADB) throw DataLoss(msg);
    if (code == SQLITE_FULL || code == SQLITE_IOERR || code == SQLITE_CANTOPEN) throw Unavailable(msg);
    const int extended = sqlite3_extended_errcode(db_);
    if (extended == SQLITE_CONSTRAINT_PRIMARYKEY || extended == SQLITE_CONSTRAINT_UNIQUE) throw AlreadyExists(msg);
    // A row another table names (a model an alias points at).
    if (extended == SQLITE_CONSTRAINT_FOREIGNKEY) throw FailedPrecondition(msg);
    throw Internal(msg + " in: " + sql.substr(0, 200));
  }

  std::int64_t changes() const { return sqlite3_changes64(db_); }
  std::int64_t last_insert_rowid() const { return sqlite3_last_insert_rowid(db_); }

  // ---- sql::Connection ---------------------------------------------------------------------

  sql::Dialect dialect() const noexcept override { return sql::Dialect::kSqlite; }

  sql::Rows execute(const std::string& sql, const std::vector<sql::Value>& params,
                    sql::Access access) override {
    if (access == sql::Access::kWrite) require_writable();
    if (db_ == nullptr) open_for_reading();  // a reopening that failed (kReadOnly only), tried again
    const bool autocommit = sqlite3_get_autocommit(db_);
    const bool own_transaction = access == sql::Access::kWrite && autocommit;
    if (own_transaction) begin(sql::Access::kWrite);
    else if (autocommit) check_before_read();
    try {
      sql::Rows rows = run_cached(sql, params);
      if (own_transaction) commit();
      else if (autocommit) check_after_read();
      return rows;
    } catch (...) {
      if (own_transaction) rollback();
      throw;
    }
  }

  void begin(sql::Access access) override {
    if (access == sql::Access::kWrite) require_writable();
    check_before_read();
    exec(access == sql::Access::kWrite ? "BEGIN IMMEDIATE" : "BEGIN");
  }
  void commit() override {
    exec("COMMIT");
    check_after_read();
  }
  void rollback() noexcept override {
    if (!sqlite3_get_autocommit(db_)) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }

  std::string now_us() const override { return "tensorhub_now_us()"; }
  std::string skip_locked() const override { return ""; }
  std::string notifying(const std::string& statement, const std::string&) const override { return statement; }
  bool read_only() const noexcept override { return mode_ == OpenMode::kReadOnly; }
  std::string display_uri() const override { return uri_of(path_); }

  // Throws the read-only error when this connection may not write (OpenMode::kReadOnly).
  void require_writable() const {
    if (mode_ != OpenMode::kReadOnly) return;
    const std::string why = detail::why_not_writable(path_);
    detail::throw_read_only(uri_of(path_), why.empty() ? "it was opened only to be read" : why);
  }

 private:
  // Opens `name` (a path, or a "file:" URI with SQLITE_OPEN_URI) with `flags` as this
  // connection's handle. Throws Unavailable when SQLite cannot open it.
  void open_handle(const std::string& name, int flags) {
    const int rc = sqlite3_open_v2(name.c_str(), &db_, flags | SQLITE_OPEN_NOMUTEX, nullptr);
    if (rc != SQLITE_OK) {
      std::string why = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
      sqlite3_close(db_);
      db_ = nullptr;
      throw Unavailable("cannot open SQLite hub " + path_ + ": " + why +
                        " (does the directory exist and is it writable?)");
    }
    sqlite3_busy_timeout(db_, kBusyTimeoutMs);
    // now_us(): the clock of this machine (SQLite has no server), in UTC microseconds.
    sqlite3_create_function_v2(
        db_, "tensorhub_now_us", 0, SQLITE_UTF8, nullptr,
        [](sqlite3_context* ctx, int, sqlite3_value**) { sqlite3_result_int64(ctx, now_micros()); }, nullptr,
        nullptr, nullptr);
  }

  void close_handle() noexcept {
    for (auto& [text, stmt] : cache_) sqlite3_finalize(stmt);
    cache_.clear();
    sqlite3_close_v2(db_);
    db_ = nullptr;
  }

  // Opens the hub to be read (OpenMode::kReadOnly), the way this user's rights allow.
  void open_for_reading() {
    close_handle();
    immutable_ = false;
    if (detail::why_not_writable(path_).empty()) {
      // As usual: the last connection to close checkpoints the WAL and removes it. Writes are
      // refused by require_writable, not by SQLite.
      open_handle(path_, SQLITE_OPEN_READWRITE);
    } else if (std::filesystem::exists(path_ + "-wal") && std::filesystem::exists(path_ + "-shm")) {
      // A writer's files: SQLite reads its latest commits through them (sqlite.org/wal.html,
      // "Read-Only Databases", case 1).
      open_handle(path_, SQLITE_OPEN_READONLY);
    } else {
      // None, and this user may not make them (or must not: files it made in a directory it
      // shares with the owner would be read-only to the owner's writers). Nothing writes the
      // hub now; the stamp tells when that changes.
      stamp_ = detail::HubStamp::of(path_);
      open_handle(detail::immutable_uri(path_), SQLITE_OPEN_READONLY | SQLITE_OPEN_URI);
      immutable_ = true;
    }
    // The temporary tables of modules (sql::Schema's stand-ins) went with the old handle.
    forget_ensured_schemas();
  }

  // Before a read outside a transaction (immutable only): a hub whose file or -wal changed
  // since it was opened is opened afresh, since an immutable handle keeps pages it has read.
  // So is one whose reopening failed (no handle).
  void check_before_read() {
    if (mode_ == OpenMode::kReadOnly && (db_ == nullptr || (immutable_ && detail::HubStamp::of(path_) != stamp_)))
      open_for_reading();
  }

  // After a read (immutable only): a file written during the read may have been read torn.
  void check_after_read() const {
    if (immutable_ && detail::FileStamp::of(path_) != stamp_.database) throw_changed_while_read();
  }

  [[noreturn]] void throw_changed_while_read() const {
    // The next read sees the new stamp and reopens the hub.
    throw Unavailable("SQLite hub " + path_ + " changed while it was read (another process wrote it); read it again");
  }

  // SQLITE_READONLY: a write on a hub this user may not write, or (kReadOnly) a read that
  // SQLite could do only by writing the hub's -shm file (recovering after a writer stopped).
  [[noreturn]] void throw_readonly_error(const std::string& why) const {
    const std::string reason = detail::why_not_writable(path_);
    if (mode_ != OpenMode::kReadOnly)
      detail::throw_read_only(uri_of(path_), reason.empty() ? "SQLite: " + why : reason);
    throw Unavailable("cannot read SQLite hub " + path_ + " now: " + why +
                      " (SQLite must write its -shm file to read it, as after a writer stopped without closing it" +
                      (reason.empty() ? std::string() : "; " + reason) +
                      "); opening it once as a user who may write it repairs that");
  }

  // Prepared once per distinct text and kept (the queue's statements run thousands of times:
  // preparing each anew cost about as much as running it).
  sqlite3_stmt* cached(const std::string& sql) {
    if (auto it = cache_.find(sql); it != cache_.end()) return it->second;
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v3(db_, sql.c_str(), -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr) != SQLITE_OK)
      throw_error(sqlite3_errmsg(db_), sql);
    if (cache_.size() >= kStatementCacheSize) {
      for (auto& [text, old] : cache_) sqlite3_finalize(old);
      cache_.clear();
    }
    return cache_.emplace(sql, stmt).first->second;
  }

  sql::Rows run_cached(const std::string& sql, const std::vector<sql::Value>& params) {
    sqlite3_stmt* stmt = cached(sql);
    struct Reset {
      sqlite3_stmt* s;
      ~Reset() {
        sqlite3_reset(s);
        sqlite3_clear_bindings(s);
      }
    } reset{stmt};
    for (std::size_t i = 0; i < params.size(); ++i) bind_value(stmt, static_cast<int>(i) + 1, params[i], sql);
    sql::Rows rows;
    const int columns = sqlite3_column_count(stmt);
    while (true) {
      const int rc = sqlite3_step(stmt);
      if (rc == SQLITE_DONE) break;
      if (rc != SQLITE_ROW) throw_error(sqlite3_errmsg(db_), sql);
      std::vector<sql::Value> row;
      row.reserve(columns);
      for (int c = 0; c < columns; ++c) row.push_back(column_value(stmt, c));
      rows.add_row(std::move(row));
    }
    rows.set_changes(sqlite3_changes64(db_));
    return rows;
  }

  void bind_value(sqlite3_stmt* stmt, int i, const sql::Value& v, const std::string& sql) {
    if (bind(stmt, i, v) != SQLITE_OK) throw_error(sqlite3_errmsg(db_), sql);
  }

  static sql::Value column_value(sqlite3_stmt* stmt, int c) {
    switch (sqlite3_column_type(stmt, c)) {
      case SQLITE_INTEGER: return sqlite3_column_int64(stmt, c);
      case SQLITE_FLOAT: return sqlite3_column_double(stmt, c);
      case SQLITE_NULL: return nullptr;
      default: {
        const auto* p = static_cast<const char*>(sqlite3_column_blob(stmt, c));
        return std::string(p ? p : "", static_cast<std::size_t>(sqlite3_column_bytes(stmt, c)));
      }
    }
  }

  static constexpr std::size_t kStatementCacheSize = 64;

  std::string path_;
  OpenMode mode_;
  sqlite3* db_ = nullptr;
  std::unordered_map<std::string, sqlite3_stmt*> cache_;
  bool immutable_ = false;    // opened with immutable=1 (see open_for_reading)
  detail::HubStamp stamp_;    // the files when an immutable handle was opened
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
    if (tensorhub::bind(stmt_, i, v) != SQLITE_OK) conn_.throw_error(sqlite3_errmsg(conn_.get()), sql_);
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

using sql::Transaction;  // BEGIN IMMEDIATE for writes, BEGIN for reads (Connection::begin)

Json parse_json_column(const std::string& text, const char* column) {
  if (text.empty()) return nullptr;
  return from_stored_json(text, column);
}

class SqliteBackend final : public Backend {
 public:
  SqliteBackend(const std::string& path, OpenMode mode) : conn_(path, mode) {
    // Switching a new file to WAL, or opening one while another process recovers its WAL,
    // can report SQLITE_BUSY without consulting the busy handler: retry for a while.
    for (int attempt = 0;; ++attempt) {
      try {
        if (mode == OpenMode::kReadOnly) check_schema();
        else set_up(mode);
        break;
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::kUnavailable || attempt >= 200) throw;
        std::this_thread::sleep_for(std::chrono::milliseconds(25 + attempt));
      }
    }
  }

  std::string uri() const override { return uri_of(conn_.path()); }
  sql::Connection& sql() override { return conn_; }

  using Backend::insert_document;
  std::int64_t insert_document(Collection c, const std::string& project, const Json& tags,
                               const PartSources& parts) override {
    if (!tags.is_object()) throw InvalidArgument("document tags must be a JSON object, got " + tags.dump());
    conn_.require_writable();  // before hashing what may be a large dataset
    // Hash outside the transaction: it is the slow part and needs no lock.
    std::map<std::string, std::string> shas;
    for (const auto& [name, source] : parts) shas[name] = sha256_of(*source, name);
    Transaction tx(conn_, sql::Access::kWrite);
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
    Transaction tx(conn_, sql::Access::kRead);
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
    Transaction tx(conn_, sql::Access::kRead);  // every read in one (a read-only hub checks its file around it)
    Statement s(conn_, "SELECT COUNT(*) FROM documents WHERE collection = ? AND project_name = ? AND " + where.sql);
    s.bind_all({to_string(c), project}).bind_all(where.params, 3);
    s.step();
    const std::int64_t n = s.int64(0);
    s.reset();
    tx.commit();
    return n;
  }

  std::vector<std::string> list_projects() override {
    Transaction tx(conn_, sql::Access::kRead);
    Statement s(conn_, "SELECT DISTINCT project_name FROM documents");
    std::vector<std::string> out;
    while (s.step()) out.push_back(s.text(0));
    tx.commit();
    std::sort(out.begin(), out.end());  // bytewise, as on PostgreSQL (whose collation may differ)
    return out;
  }

  std::int64_t delete_documents(Collection c, const std::string& project, const Json& filter) override {
    const auto where = sql::where_clause(filter, sql::Dialect::kSqlite, document_field);
    Transaction tx(conn_, sql::Access::kWrite);
    Statement del(conn_, "DELETE FROM documents WHERE collection = ? AND project_name = ? AND " + where.sql);
    del.bind_all({to_string(c), project}).bind_all(where.params, 3).run();
    const std::int64_t n = conn_.changes();
    const bool freed = collect_garbage() > 0;
    tx.commit();
    if (freed) give_back_free_pages();
    return n;
  }

  std::uint64_t read_blob_chunks(const std::string& sha256, const BlobChunkSink& sink) override {
    Transaction tx(conn_, sql::Access::kRead);
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
    Transaction tx(conn_, sql::Access::kRead);
    const auto record = blob_record(sha256);
    tx.commit();
    if (!record) return std::nullopt;
    return static_cast<std::uint64_t>(std::max<std::int64_t>(record->first, 0));
  }

  std::int64_t count_blobs() override {
    Transaction tx(conn_, sql::Access::kRead);
    Statement s(conn_, "SELECT COUNT(*) FROM blobs");
    s.step();
    const std::int64_t n = s.int64(0);
    s.reset();
    tx.commit();
    return n;
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
    conn_.require_writable();
    // VACUUM rebuilds the file without free pages; auto_vacuum set just before it applies to
    // the rebuilt file, so a hub created without it gives space back on delete from now on.
    conn_.exec("PRAGMA auto_vacuum=INCREMENTAL");
    conn_.exec("VACUUM");
    conn_.exec("PRAGMA wal_checkpoint(TRUNCATE)");
  }

 private:
  // Pragmas and migrations of a hub opened to be written.
  void set_up(OpenMode mode) {
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
  }

  // The schema of a hub opened to be read (kReadOnly): read, never changed.
  void check_schema() {
    Transaction tx(conn_, sql::Access::kRead);
    if (!has_schema())
      throw_no_hub(conn_.path(), "the file " + conn_.path() + " holds no tensorhub hub (no tensorhub tables)");
    const int version = schema_version();
    tx.commit();
    if (version > kSchemaVersion) throw_newer_schema(version);
    if (version < kSchemaVersion)
      throw FailedPrecondition("the hub " + uri() + " has schema version " + std::to_string(version) +
                               ", older than this tensorhub's (" + std::to_string(kSchemaVersion) +
                               "), and is opened read-only: " + detail::older_schema_advice(uri()));
  }

  int schema_version() {
    Statement v(conn_, "PRAGMA user_version");
    v.step();
    const int version = static_cast<int>(v.int64(0));
    v.run();
    return version;
  }

  [[noreturn]] void throw_newer_schema(int version) {
    throw FailedPrecondition("hub " + conn_.path() + " has schema version " + std::to_string(version) +
                             ", newer than this tensorhub understands (" + std::to_string(kSchemaVersion) +
                             "); upgrade tensorhub");
  }

  void migrate() {
    Transaction tx(conn_, sql::Access::kWrite);
    const int version = schema_version();
    if (version > kSchemaVersion) throw_newer_schema(version);
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
    Statement s(conn_, "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'documents'");
    s.step();
    return s.int64(0) == 1;
  }

  Connection conn_;
};

}  // namespace

std::unique_ptr<Backend> open_sqlite_backend(const std::string& path, OpenMode mode) {
  return std::make_unique<SqliteBackend>(path, mode);
}

}  // namespace tensorhub
