// PostgreSQL backend. Concurrency model: READ COMMITTED. It supplies the dialect hooks
// TaskQueue uses: FOR UPDATE SKIP LOCKED for claims (runners never wait on each other's
// claims) and NOTIFY tensorhub_queue for the changes a waiter cares about (creates, cancels,
// completions, failures, releases, reaps), so that runners and dispatchers wake at once.
// Times come from the server's clock, so leases mean the same on every machine.
// A dropped connection raises Unavailable; the next call reconnects (callers retry with
// backoff), and LISTEN is renewed.
#include "postgres_backend.h"

#include <libpq-fe.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>

#include "blob_reader.h"
#include "blob_writer.h"
#include "read_only.h"
#include "tensorhub/store/query.h"
#include "schema_fields.h"
#include "tensorhub/store/stored_json.h"
#include "tensorhub/core/error.h"
#include "tensorhub/core/hash.h"
#include "tensorhub/store/sql.h"

namespace tensorhub {
namespace {

constexpr int kSchemaVersion = 4;
constexpr const char* kChannel = "tensorhub_queue";
// The store's tables, for storage_bytes() and compact(); the modules above it list theirs in
// module_schemas.
constexpr const char* kTableList = "blobs,blob_chunks,documents,document_blobs,module_schemas,tensorhub_schema";
// Server time in microseconds since the epoch.
constexpr const char* kNowUs = "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::bigint";

const char* const kMigrations[] = {
    R"sql(
CREATE TABLE blobs (
  sha256 TEXT PRIMARY KEY,
  size BIGINT NOT NULL,
  chunk_count BIGINT NOT NULL
);
CREATE TABLE blob_chunks (
  sha256 TEXT NOT NULL,
  idx BIGINT NOT NULL,
  data BYTEA NOT NULL,
  PRIMARY KEY (sha256, idx)
);
CREATE TABLE documents (
  id BIGSERIAL PRIMARY KEY,
  collection TEXT NOT NULL,
  project_name TEXT NOT NULL,
  time BIGINT NOT NULL,
  tags JSONB NOT NULL
);
CREATE INDEX documents_by_project ON documents (collection, project_name, time);
CREATE TABLE document_blobs (
  document_id BIGINT NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
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
    // 4: blob chunks compressed with lz4 instead of the default pglz where the server has it
    // (PostgreSQL 14 and later, built with lz4): saving a dataset spent most of its time in
    // pglz on the server, about 5x longer than with lz4 (bench/python_hub.py). Where it is
    // missing, chunks stay pglz as before; chunks stored before keep theirs (both read back).
    R"sql(
DO $$
BEGIN
  EXECUTE 'ALTER TABLE blob_chunks ALTER COLUMN data SET COMPRESSION lz4';
EXCEPTION WHEN OTHERS THEN
  NULL;
END
$$;
)sql",
};

// A query result; frees itself.
class Result {
 public:
  explicit Result(PGresult* r) : r_(r) {}
  ~Result() { PQclear(r_); }
  Result(Result&& o) noexcept : r_(o.r_) { o.r_ = nullptr; }
  Result(const Result&) = delete;
  Result& operator=(const Result&) = delete;

  int rows() const { return PQntuples(r_); }
  const PGresult* get() const { return r_; }
  bool is_null(int row, int col) const { return PQgetisnull(r_, row, col); }
  std::string text(int row, int col) const {
    return std::string(PQgetvalue(r_, row, col), PQgetlength(r_, row, col));
  }
  std::int64_t int64(int row, int col) const { return std::stoll(text(row, col)); }
  double real(int row, int col) const { return std::stod(text(row, col)); }
  std::int64_t affected() const {
    const char* n = PQcmdTuples(r_);
    return n && *n ? std::stoll(n) : 0;
  }

 private:
  PGresult* r_;
};

// One libpq connection that reconnects on demand; also the hub's SQL connection (sql.h).
class Connection final : public sql::Connection {
 public:
  explicit Connection(std::string uri) : uri_(std::move(uri)) {
    conn_ = PQconnectdb(uri_.c_str());
    if (PQstatus(conn_) != CONNECTION_OK) {
      const std::string why = PQerrorMessage(conn_);
      PQfinish(conn_);
      conn_ = nullptr;
      // libpq's own text may quote parts of the URI: the whole message is masked.
      throw Unavailable(mask_passwords("cannot connect to PostgreSQL hub " + uri_ + ": " + trim(why)) +
                        " (is the server running, and are host, port, user and password right?)");
    }
    quiet_notices();
  }
  ~Connection() override { PQfinish(conn_); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  const std::string& uri() const { return uri_; }

  // Reconnects if the connection was lost. Throws Unavailable while the server is down.
  void ensure() {
    if (PQstatus(conn_) == CONNECTION_OK) return;
    PQreset(conn_);
    if (PQstatus(conn_) != CONNECTION_OK)
      throw Unavailable(mask_passwords("PostgreSQL hub " + uri_ + " is unreachable: " + trim(PQerrorMessage(conn_))));
    quiet_notices();
    in_transaction_ = false;
    if (listening_) {
      listening_ = false;
      listen();
    }
  }

  // Runs `sql` with "?" placeholders bound to `params` (text format; PostgreSQL infers the
  // types). `binary` optionally adds one trailing binary parameter (bytea).
  Result exec(const std::string& sql, const std::vector<sql::Value>& params = {},
              std::span<const std::byte> binary = {}, bool has_binary = false) {
    if (!in_transaction_) ensure();
    Bound b(params);
    if (has_binary) {
      b.values.push_back(reinterpret_cast<const char*>(binary.data()));
      b.lengths.push_back(static_cast<int>(binary.size()));
      b.formats.push_back(1);
    }
    const std::string numbered = sql::numbered_placeholders(sql);
    PGresult* r = PQexecParams(conn_, numbered.c_str(), static_cast<int>(b.values.size()), nullptr, b.values.data(),
                               b.lengths.data(), b.formats.data(), 0);
    const auto status = PQresultStatus(r);
    if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return Result(r);
    Result owned(r);
    throw_error(r, numbered);
  }

  // Runs the query `sql` (parameters as exec's) and passes each row of its binary-format
  // result to `row` as it arrives (libpq's single-row mode): the server reads and sends the
  // next rows while this process handles one, and libpq holds about one row at a time. If
  // `row` throws, the rest of the result is read and dropped, so that the connection stays
  // usable, and the exception is rethrown; so is the server's error.
  void stream_rows(const std::string& sql, const std::vector<sql::Value>& params,
                   const std::function<void(const PGresult* row)>& row) {
    if (!in_transaction_) ensure();
    const Bound b(params);
    const std::string numbered = sql::numbered_placeholders(sql);
    if (!PQsendQueryParams(conn_, numbered.c_str(), static_cast<int>(b.values.size()), nullptr, b.values.data(),
                           b.lengths.data(), b.formats.data(), 1))
      throw Unavailable(mask_passwords("PostgreSQL hub " + uri_ + ": " + trim(PQerrorMessage(conn_))));
    const bool single_rows = PQsetSingleRowMode(conn_) == 1;  // else the whole result at once, as exec
    std::exception_ptr failure;
    while (PGresult* r = PQgetResult(conn_)) {
      const Result owned(r);
      const auto status = PQresultStatus(r);
      if (failure) continue;
      try {
        if (status == PGRES_SINGLE_TUPLE || (!single_rows && status == PGRES_TUPLES_OK && PQntuples(r) > 0)) {
          row(r);
        } else if (status != PGRES_TUPLES_OK) {
          throw_error(r, numbered);
        }
      } catch (...) {
        failure = std::current_exception();
      }
    }
    if (failure) std::rethrow_exception(failure);
  }

  // Runs several ";"-separated statements without parameters (schema migrations).
  void exec_script(const std::string& sql) {
    PGresult* r = PQexec(conn_, sql.c_str());
    Result owned(r);
    if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK) throw_error(r, sql);
  }

  // ---- sql::Connection ---------------------------------------------------------------------

  sql::Dialect dialect() const noexcept override { return sql::Dialect::kPostgres; }

  // Outside a transaction a statement is its own (autocommit): one round trip.
  sql::Rows execute(const std::string& sql, const std::vector<sql::Value>& params, sql::Access access) override {
    if (access == sql::Access::kWrite) require_writable();
    const Result r = exec(sql, params);
    sql::Rows rows;
    const int columns = PQnfields(r.get());
    for (int i = 0; i < r.rows(); ++i) {
      std::vector<sql::Value> row;
      row.reserve(columns);
      for (int c = 0; c < columns; ++c) {
        if (r.is_null(i, c)) row.emplace_back(nullptr);
        else row.emplace_back(r.text(i, c));
      }
      rows.add_row(std::move(row));
    }
    rows.set_changes(r.affected());
    return rows;
  }

  void begin(sql::Access access) override {
    if (access == sql::Access::kWrite) require_writable();
    exec("BEGIN");
    in_transaction_ = true;
  }
  void commit() override {
    in_transaction_ = false;
    exec("COMMIT");
  }
  void rollback() noexcept override {
    in_transaction_ = false;
    if (PQstatus(conn_) == CONNECTION_OK) PQclear(PQexec(conn_, "ROLLBACK"));
  }

  std::string now_us() const override { return kNowUs; }
  std::string skip_locked() const override { return " FOR UPDATE SKIP LOCKED"; }
  // A CTE keeps it one statement, and pg_notify runs once per changed row only.
  std::string notifying(const std::string& statement, const std::string& kept_columns) const override {
    return "WITH changed AS (" + statement + ") SELECT " + (kept_columns.empty() ? "" : kept_columns + ", ") +
           "pg_notify('" + kChannel + "', project_name) FROM changed";
  }
  int notification_fd() override { return listen(); }
  bool read_only() const noexcept override { return read_only_; }
  std::string display_uri() const override { return mask_passwords(uri_); }

  /// Makes this connection refuse every write (OpenMode::kReadOnly).
  void set_read_only() noexcept { read_only_ = true; }

  // Throws the read-only error when this connection may not write (OpenMode::kReadOnly).
  void require_writable() const {
    if (read_only_) detail::throw_read_only(display_uri(), "it was opened only to be read");
  }

  // The role this connection logs in as, for messages.
  std::string user() const { return conn_ ? PQuser(conn_) : ""; }
  bool consume_notifications() override { return consume(); }

  int listen() {
    ensure();
    if (!listening_) {
      exec(std::string("LISTEN ") + kChannel);
      listening_ = true;
    }
    return PQsocket(conn_);
  }

  bool consume() {
    if (PQstatus(conn_) != CONNECTION_OK) return false;
    if (!PQconsumeInput(conn_)) return false;  // the connection broke; ensure() repairs it
    bool any = false;
    while (PGnotify* n = PQnotifies(conn_)) {
      any = true;
      PQfreemem(n);
    }
    return any;
  }

 private:
  static std::string trim(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
  }

  void quiet_notices() {
    PQsetNoticeProcessor(conn_, [](void*, const char*) {}, nullptr);
  }

  [[noreturn]] void throw_error(PGresult* r, const std::string& sql) {
    const char* state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    const std::string code = state ? state : "";
    const std::string msg = mask_passwords("PostgreSQL hub " + uri_ + ": " + trim(PQresultErrorMessage(r)));
    if (PQstatus(conn_) != CONNECTION_OK || code.starts_with("08") || code.starts_with("57P") || code.empty())
      throw Unavailable(msg);
    if (code == "40001" || code == "40P01" || code == "55P03") throw Unavailable(msg + " (retry)");
    if (code == "23505") throw AlreadyExists(msg);
    // foreign_key_violation: a row another table names (a model an alias points at).
    if (code == "23503") throw FailedPrecondition(msg);
    // insufficient_privilege, read_only_sql_transaction (a hot standby, or a role or database
    // whose transactions are read-only by default).
    if (code == "42501" || code == "25006") throw_refused(msg, sql);
    if (code == "22P02" || code == "42883" || code == "22023") throw InvalidArgument(msg);
    throw Internal(msg + " in: " + sql.substr(0, 200));
  }

  // A statement the server refused for this role's rights: a write, the hub is read-only for
  // it; a read, it lacks SELECT.
  [[noreturn]] void throw_refused(const std::string& msg, const std::string& sql) const {
    const auto first = sql.find_first_not_of(" \n\t(");
    const std::string verb = first == std::string::npos ? "" : sql.substr(first, 6);
    if (verb == "SELECT" || verb == "select")
      throw FailedPrecondition(msg + " (the role " + user() + " may not read this table of the hub: reading a hub "
                                     "needs SELECT on tensorhub's tables)");
    detail::throw_read_only(display_uri(), "the role " + user() + " may not write it: " + msg);
  }

  // Parameters in libpq's arrays, all text ("?" values as sql::to_text writes them).
  struct Bound {
    explicit Bound(const std::vector<sql::Value>& params) {
      texts.reserve(params.size());  // no reallocation: values point into it
      for (const auto& p : params) {
        const bool null = std::holds_alternative<std::nullptr_t>(p);
        texts.push_back(null ? std::string() : sql::to_text(p));
        values.push_back(null ? nullptr : texts.back().c_str());
        lengths.push_back(0);
        formats.push_back(0);
      }
    }
    std::vector<std::string> texts;
    std::vector<const char*> values;
    std::vector<int> lengths, formats;
  };

  std::string uri_;
  PGconn* conn_ = nullptr;
  bool listening_ = false;
  bool in_transaction_ = false;
  bool read_only_ = false;
};

using sql::Transaction;

Json parse_json(const std::string& text, const char* column) { return from_stored_json(text, column); }

// A BIGINT cell of a binary-format row: 8 bytes, big-endian (PostgreSQL's int8send).
std::int64_t binary_int8(const PGresult* row, int col) {
  if (PQgetlength(row, 0, col) != 8) throw Internal("a BIGINT column came back in " + std::to_string(PQgetlength(row, 0, col)) + " bytes");
  const auto* p = reinterpret_cast<const unsigned char*>(PQgetvalue(row, 0, col));
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return static_cast<std::int64_t>(v);
}

// A BYTEA cell of a binary-format row: its bytes as they are.
std::span<const std::byte> binary_bytes(const PGresult* row, int col) {
  return {reinterpret_cast<const std::byte*>(PQgetvalue(row, 0, col)), static_cast<std::size_t>(PQgetlength(row, 0, col))};
}

class PostgresBackend final : public Backend {
 public:
  PostgresBackend(const std::string& uri, OpenMode mode) : conn_(uri) {
    if (mode != OpenMode::kCreate && !has_schema())
      throw NotFound("no hub at " + display_uri() + ": the database has no tensorhub tables (check the hub URI; "
                     "a hub is created when something is first saved to it)");
    if (mode == OpenMode::kReadOnly) {
      conn_.set_read_only();
      check_schema();
      return;
    }
    migrate();
    check_may_write();
  }

  std::string uri() const override { return conn_.uri(); }

  sql::Connection& sql() override { return conn_; }

  using Backend::insert_document;
  std::int64_t insert_document(Collection c, const std::string& project, const Json& tags,
                               const PartSources& parts) override {
    if (!tags.is_object()) throw InvalidArgument("document tags must be a JSON object, got " + tags.dump());
    conn_.require_writable();  // before hashing what may be a large dataset
    std::map<std::string, std::string> shas;
    for (const auto& [name, source] : parts) shas[name] = sha256_of(*source, name);
    Transaction tx(conn_, sql::Access::kWrite);
    const auto r = conn_.exec(std::string("INSERT INTO documents (collection, project_name, time, tags) VALUES (?, ?, ") +
                                  kNowUs + ", ?::jsonb) RETURNING id",
                              {to_string(c), project, to_stored_json(tags)});
    const std::int64_t id = r.int64(0, 0);
    for (const auto& [name, source] : parts) {
      put_blob(shas[name], *source, name);
      conn_.exec("INSERT INTO document_blobs (document_id, part, sha256) VALUES (?, ?, ?)", {id, name, shas[name]});
    }
    tx.commit();
    return id;
  }

  std::vector<Document> find_documents(Collection c, const std::string& project, const Json& filter,
                                       const SortSpec& sort, std::int64_t limit) override {
    const auto where = sql::where_clause(filter, sql::Dialect::kPostgres, document_field);
    std::string q = "SELECT id, project_name, time, tags::text FROM documents WHERE collection = ? AND project_name = ? AND " +
                    where.sql + " ORDER BY " + sql::order_by(sort, sql::Dialect::kPostgres, document_field, "id ASC");
    if (limit > 0) q += " LIMIT " + std::to_string(limit);
    std::vector<sql::Value> params = {to_string(c), project};
    params.insert(params.end(), where.params.begin(), where.params.end());
    Transaction tx(conn_, sql::Access::kRead);
    const auto r = conn_.exec(q, params);
    std::vector<Document> out;
    std::string ids;
    for (int i = 0; i < r.rows(); ++i) {
      Document d;
      d.id = r.int64(i, 0);
      d.project_name = r.text(i, 1);
      d.time = r.int64(i, 2);
      d.tags = parse_json(r.text(i, 3), "tags");
      ids += (ids.empty() ? "" : ",") + std::to_string(d.id);
      out.push_back(std::move(d));
    }
    if (!out.empty()) {
      const auto parts = conn_.exec("SELECT document_id, part, sha256 FROM document_blobs WHERE document_id = ANY(?::bigint[])",
                                    {"{" + ids + "}"});
      std::map<std::int64_t, Document*> by_id;
      for (auto& d : out) by_id[d.id] = &d;
      for (int i = 0; i < parts.rows(); ++i) by_id[parts.int64(i, 0)]->parts[parts.text(i, 1)] = parts.text(i, 2);
    }
    tx.commit();
    return out;
  }

  std::int64_t delete_documents(Collection c, const std::string& project, const Json& filter) override {
    const auto where = sql::where_clause(filter, sql::Dialect::kPostgres, document_field);
    std::vector<sql::Value> params = {to_string(c), project};
    params.insert(params.end(), where.params.begin(), where.params.end());
    Transaction tx(conn_, sql::Access::kWrite);
    const auto r = conn_.exec("DELETE FROM documents WHERE collection = ? AND project_name = ? AND " + where.sql, params);
    const std::int64_t n = r.affected();
    // Serialise garbage collection with blob inserts of other sessions: a blob another
    // transaction is about to reference must not be collected under it.
    conn_.exec("LOCK TABLE blobs IN SHARE ROW EXCLUSIVE MODE");
    conn_.exec("DELETE FROM blob_chunks WHERE sha256 IN (SELECT sha256 FROM blobs b WHERE NOT EXISTS "
               "(SELECT 1 FROM document_blobs d WHERE d.sha256 = b.sha256))");
    conn_.exec("DELETE FROM blobs b WHERE NOT EXISTS (SELECT 1 FROM document_blobs d WHERE d.sha256 = b.sha256)");
    tx.commit();
    return n;
  }

  std::uint64_t read_blob_chunks(const std::string& sha256, const BlobChunkSink& sink) override {
    // One chunk per round trip: libpq would otherwise buffer the whole result before
    // handing it over. One snapshot for all of them (REPEATABLE READ).
    conn_.ensure();
    conn_.exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
    struct Rollback {
      Connection& c;
      ~Rollback() { c.rollback(); }
    } rollback{conn_};
    const auto meta = conn_.exec("SELECT size, chunk_count FROM blobs WHERE sha256 = ?", {sha256});
    if (meta.rows() == 0) throw NotFound("blob " + sha256 + " is not in the hub " + display_uri());
    detail::BlobVerifier verifier(sha256, meta.int64(0, 0), meta.int64(0, 1), display_uri());
    // One query, its rows (the chunks in order) handed over one at a time as they arrive: the
    // server reads and sends chunk i + 1 while this process hashes and copies chunk i.
    conn_.stream_rows("SELECT idx, data FROM blob_chunks WHERE sha256 = ? ORDER BY idx", {sha256},
                      [&](const PGresult* row) {
                        verifier.chunk(binary_int8(row, 0), binary_bytes(row, 1), sink);
                      });
    return verifier.finish();
  }

  std::optional<std::uint64_t> blob_size(const std::string& sha256) override {
    const auto meta = conn_.exec("SELECT size FROM blobs WHERE sha256 = ?", {sha256});
    if (meta.rows() == 0) return std::nullopt;
    return static_cast<std::uint64_t>(std::max<std::int64_t>(meta.int64(0, 0), 0));
  }

  std::int64_t count_documents(Collection c, const std::string& project, const Json& filter) override {
    const auto where = sql::where_clause(filter, sql::Dialect::kPostgres, document_field);
    std::vector<sql::Value> params = {to_string(c), project};
    params.insert(params.end(), where.params.begin(), where.params.end());
    return conn_
        .exec("SELECT COUNT(*) FROM documents WHERE collection = ? AND project_name = ? AND " + where.sql, params)
        .int64(0, 0);
  }

  std::vector<std::string> list_projects() override {
    const auto r = conn_.exec("SELECT DISTINCT project_name FROM documents");
    std::vector<std::string> out;
    for (int i = 0; i < r.rows(); ++i) out.push_back(r.text(i, 0));
    std::sort(out.begin(), out.end());  // bytewise, as on SQLite, whatever the database's collation
    return out;
  }

  std::int64_t count_blobs() override { return conn_.exec("SELECT COUNT(*) FROM blobs").int64(0, 0); }

  std::int64_t storage_bytes() override {
    return conn_
        .exec("SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c "
              "WHERE c.relkind = 'r' AND pg_table_is_visible(c.oid) AND c.relname = ANY (string_to_array(?, ','))",
              {all_tables()})
        .int64(0, 0);
  }

  void compact() override {
    conn_.require_writable();
    conn_.ensure();
    // VACUUM takes no parameters; the names are the store's and those modules registered.
    conn_.exec_script("VACUUM FULL " + all_tables());
  }

 private:
  // The stored schema version, or 0 where there is no tensorhub_schema table yet.
  int stored_version() {
    if (!has_schema()) return 0;
    const auto r = conn_.exec("SELECT version FROM tensorhub_schema");
    return r.rows() ? static_cast<int>(r.int64(0, 0)) : 0;
  }

  [[noreturn]] void throw_newer_schema(int version) {
    throw FailedPrecondition("hub " + display_uri() + " has schema version " + std::to_string(version) +
                             ", newer than this tensorhub understands (" + std::to_string(kSchemaVersion) +
                             "); upgrade tensorhub");
  }

  // The schema of a hub opened to be read (kReadOnly): read, never changed.
  void check_schema() {
    const int version = stored_version();
    if (version > kSchemaVersion) throw_newer_schema(version);
    if (version < kSchemaVersion)
      throw FailedPrecondition("the hub " + display_uri() + " has schema version " + std::to_string(version) +
                               ", older than this tensorhub's (" + std::to_string(kSchemaVersion) +
                               "), and is opened read-only: " + detail::older_schema_advice(display_uri()));
  }

  // A hub opened to be written, by a role that may not insert into it (GRANT SELECT only):
  // said now, not after a command's work when it first saves.
  void check_may_write() {
    if (conn_.exec("SELECT has_table_privilege('documents', 'INSERT')").text(0, 0) != "t")
      detail::throw_read_only(display_uri(), "the role " + conn_.user() + " has no INSERT privilege on its table "
                                             "documents");
  }

  void migrate() {
    // A read first: an up-to-date hub takes no lock and needs no right but SELECT.
    if (stored_version() == kSchemaVersion) return;
    Transaction tx(conn_, sql::Access::kWrite);
    // One migrator at a time, even when many runners connect to a new database at once.
    conn_.exec("SELECT pg_advisory_xact_lock(7310251)");
    conn_.exec("CREATE TABLE IF NOT EXISTS tensorhub_schema (version INTEGER NOT NULL)");
    const auto r = conn_.exec("SELECT version FROM tensorhub_schema");
    const int version = r.rows() ? static_cast<int>(r.int64(0, 0)) : 0;
    if (version > kSchemaVersion)
      throw FailedPrecondition("hub " + display_uri() + " has schema version " + std::to_string(version) +
                               ", newer than this tensorhub understands (" + std::to_string(kSchemaVersion) +
                               "); upgrade tensorhub");
    for (int i = version; i < kSchemaVersion; ++i) conn_.exec_script(kMigrations[i]);
    if (r.rows() == 0) conn_.exec("INSERT INTO tensorhub_schema (version) VALUES (?)", {std::int64_t{kSchemaVersion}});
    else if (version != kSchemaVersion)
      conn_.exec("UPDATE tensorhub_schema SET version = ?", {std::int64_t{kSchemaVersion}});
    tx.commit();
  }

  // The store's tables and every module's (module_schemas.tables), comma-separated.
  std::string all_tables() {
    const auto r = conn_.exec("SELECT string_agg(tables, ',') FROM module_schemas WHERE tables <> ''");
    const std::string modules = r.text(0, 0);
    return modules.empty() ? std::string(kTableList) : kTableList + ("," + modules);
  }

  // True when the database holds tensorhub's schema table (any version).
  bool has_schema() {
    return conn_.exec("SELECT to_regclass('tensorhub_schema') IS NOT NULL").text(0, 0) == "t";
  }

  // REQUIRES: inside a transaction.
  void put_blob(const std::string& sha, const BlobSource& source, const std::string& part) {
    // Conflicts with the lock garbage collection takes (see delete_documents), so a blob is
    // never collected between this insert and the reference to it.
    conn_.exec("LOCK TABLE blobs IN ROW EXCLUSIVE MODE");
    const auto r = conn_.exec("INSERT INTO blobs (sha256, size, chunk_count) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                              {sha, static_cast<std::int64_t>(source.size()), chunk_count_of(source.size())});
    if (r.affected() == 0) return;  // content-addressed: the same bytes are stored already
    // One chunk per statement, straight from the source: neither this process nor libpq ever
    // holds more than a chunk of the blob.
    write_chunks(source, sha, part, [&](std::int64_t i, std::span<const std::byte> bytes) {
      conn_.exec("INSERT INTO blob_chunks (sha256, idx, data) VALUES (?, ?, ?)", {sha, i}, bytes, true);
    });
  }

  Connection conn_;
};

}  // namespace

std::unique_ptr<Backend> open_postgres_backend(const std::string& uri, OpenMode mode) {
  return std::make_unique<PostgresBackend>(uri, mode);
}

}  // namespace tensorhub
