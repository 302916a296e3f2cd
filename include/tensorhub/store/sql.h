// The small SQL interface both backends implement, for the modules that keep tables of their
// own in the hub's database (queue/'s tasks, tune/'s search leases, each created and brought
// forward by its sql::Schema): statements with bound values, transactions, and the few places
// where SQLite and PostgreSQL differ (placeholders, the clock, SKIP LOCKED, NOTIFY) as hooks,
// so that each statement is written once.
//
//   sql::Connection& db = hub.sql();
//   sql::Rows r = db.execute("UPDATE tasks SET lease_expires = " + db.now_us() +
//                            " + ? WHERE id = ? AND attempt = ? RETURNING id", {lease_us, id, attempt},
//                            sql::Access::kWrite);
//
// Thread safety: a Connection is the backend's one database connection: one thread at a
// time, as the Hub that owns it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <variant>
#include <vector>

namespace tensorhub::sql {

/// A value bound to a "?" placeholder, or read from a result column.
using Value = std::variant<std::nullptr_t, std::int64_t, double, std::string>;

/// `v` as SQL's text form: a string as it is, an integer in decimal, a double with 17
/// significant digits (read back exactly), "" for NULL. PostgreSQL's text-format parameters
/// and Rows::text use it.
std::string to_text(const Value& v);

/// The SQL dialect to write: SQLite's JSON1 functions on TEXT columns, or PostgreSQL's jsonb.
enum class Dialect { kSqlite, kPostgres };

/// What a statement or transaction does: kWrite takes the write lock at its start on SQLite
/// (BEGIN IMMEDIATE: two writers queue on the busy handler instead of deadlocking on a
/// read-to-write upgrade); PostgreSQL needs no such hint.
enum class Access { kRead, kWrite };

/// The rows one statement returned, each cell as the database gave it: SQLite's typed values,
/// PostgreSQL's text (converted on access). NULL is std::nullptr_t.
class Rows {
 public:
  std::size_t size() const noexcept { return rows_.size(); }
  bool empty() const noexcept { return rows_.empty(); }
  /// Rows an INSERT, UPDATE or DELETE changed (with or without RETURNING).
  std::int64_t changes() const noexcept { return changes_; }

  bool is_null(std::size_t row, std::size_t col) const;
  /// The cell as a 64-bit integer. Throws Internal when it holds text that is not one.
  std::int64_t int64(std::size_t row, std::size_t col) const;
  /// The cell as a double (integers converted). Throws Internal for text that is not a number.
  double real(std::size_t row, std::size_t col) const;
  /// The cell as text ("" for NULL; numbers as SQL would print them).
  std::string text(std::size_t row, std::size_t col) const;

  /// For implementations: appends a row / sets the count of changed rows.
  void add_row(std::vector<Value> row) { rows_.push_back(std::move(row)); }
  void set_changes(std::int64_t n) noexcept { changes_ = n; }

 private:
  const Value& cell(std::size_t row, std::size_t col) const;

  std::vector<std::vector<Value>> rows_;
  std::int64_t changes_ = 0;
};

/// The tables a module above the store keeps in the hub's database (queue/'s tasks, tune/'s
/// leases), as migrations per dialect: step i brings the module's tables from version i to
/// i + 1, so a hub written by an older tensorhub is brought forward and one written by a newer
/// one is refused. Each step is one statement.
///
/// On a read-only connection where the module never made its tables, its "CREATE TABLE" and
/// "ALTER TABLE" steps are replayed on temporary tables (CREATE TEMP TABLE) and every other
/// step (indexes, data moves) is skipped: the module's readers then see empty tables of the
/// latest version, as on a new hub. Write steps with that in mind.
struct Schema {
  std::string module;               ///< e.g. "queue"; the key of its row in module_schemas
  std::vector<std::string> tables;  ///< the tables it creates (counted in the hub's size, compacted)
  std::vector<std::string> sqlite_steps;
  std::vector<std::string> postgres_steps;
};

/// One database connection, as SQL. Errors: Unavailable when the database cannot be reached
/// or stays busy (the caller may retry), DataLoss for a corrupt database, AlreadyExists for a
/// unique-key conflict, InvalidArgument for a value the database refuses, Internal otherwise
/// (naming the statement).
class Connection {
 public:
  virtual ~Connection() = default;

  virtual Dialect dialect() const noexcept = 0;

  /// Runs one statement whose values are bound to "?" placeholders (written as "?" for both
  /// dialects; the backend numbers them for PostgreSQL) and returns its rows. Outside a
  /// Transaction the statement is a transaction of its own: with Access::kWrite it takes
  /// SQLite's write lock first. Values are bound, never pasted into the SQL.
  virtual Rows execute(const std::string& sql, const std::vector<Value>& params = {},
                       Access access = Access::kRead) = 0;

  /// Starts a transaction (SQLite: BEGIN IMMEDIATE for kWrite, BEGIN for kRead; PostgreSQL:
  /// BEGIN, READ COMMITTED). Use Transaction rather than these three.
  virtual void begin(Access access) = 0;
  virtual void commit() = 0;
  /// Rolls back the open transaction, if any; never throws.
  virtual void rollback() noexcept = 0;

  // ---- the dialect's differences, as SQL text to splice into a statement --------------------

  /// An expression for the database's clock in UTC microseconds (a BIGINT). On PostgreSQL
  /// it is the server's clock, so leases mean the same on every machine.
  virtual std::string now_us() const = 0;
  /// " FOR UPDATE SKIP LOCKED" where the database has row locks (PostgreSQL: claimers never
  /// wait on each other's rows), "" on SQLite (whose write transactions are serial).
  virtual std::string skip_locked() const = 0;
  /// `statement` (an INSERT, UPDATE or DELETE ending in "RETURNING [<columns>, ]project_name")
  /// made to announce each row it changed as a change of that project on the hub's
  /// notification channel, still one statement and one round trip. Its result has a row per
  /// changed row whose first columns are `kept_columns` (e.g. "id"; "" for none). SQLite has
  /// no notifications: the statement as it is.
  virtual std::string notifying(const std::string& statement, const std::string& kept_columns = "") const = 0;

  // ---- change notifications -------------------------------------------------------------

  /// A file descriptor that becomes readable when a process announces a change (notifying()),
  /// or -1 when the database has none (SQLite: callers poll). The first call starts listening
  /// (PostgreSQL LISTEN); the descriptor may change after a reconnect, so ask again before
  /// each wait.
  virtual int notification_fd() { return -1; }
  /// Reads and discards pending notifications; true if any had arrived.
  virtual bool consume_notifications() { return false; }

  // ---- modules' tables --------------------------------------------------------------------

  /// Brings `schema`'s tables up to date in this database (once per connection: later calls
  /// return at once), in one write transaction that concurrent processes take in turn. Throws
  /// FailedPrecondition when the database holds a newer version of the module's tables than
  /// `schema` knows (upgrade tensorhub), and what execute() throws.
  ///
  /// On a read_only() connection it writes nothing: tables at the latest version are used as
  /// they are; a module that never made its tables here gets empty temporary stand-ins (see
  /// Schema), checked again at each call so that the real ones are used once another process
  /// makes them; older tables throw FailedPrecondition saying how to bring them forward.
  void ensure_schema(const Schema& schema);

  // ---- read-only hubs -----------------------------------------------------------------------

  /// True for a connection that only reads (a hub opened with OpenMode::kReadOnly): execute()
  /// and begin() with Access::kWrite throw FailedPrecondition ("the hub ... is read-only
  /// (...): ...") before anything reaches the database, and ensure_schema writes nothing.
  virtual bool read_only() const noexcept { return false; }
  /// The hub's URI for messages, its password masked (e.g. "sqlite:///data/hub.db").
  virtual std::string display_uri() const = 0;

 protected:
  /// For implementations that reopen their database connection (temporary tables are gone):
  /// the next ensure_schema of each module checks its tables again.
  void forget_ensured_schemas() noexcept {
    ensured_modules_.clear();
    stand_in_modules_.clear();
  }

 private:
  void ensure_schema_read_only(const Schema& schema);
  void create_stand_in_tables(const Schema& schema);
  void drop_stand_in_tables(const Schema& schema);
  bool any_table_exists(const std::vector<std::string>& tables);

  std::set<std::string> ensured_modules_;
  std::set<std::string> stand_in_modules_;  // modules read through empty temporary tables
};

/// A transaction over `db` that rolls back unless committed (RAII). Not nestable.
class Transaction {
 public:
  Transaction(Connection& db, Access access) : db_(db) { db_.begin(access); }
  ~Transaction() {
    if (!done_) db_.rollback();
  }
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  /// Commits; if that throws, the destructor still rolls back (so a SQLite connection whose
  /// COMMIT failed is not left inside the transaction).
  void commit() {
    db_.commit();
    done_ = true;
  }

 private:
  Connection& db_;
  bool done_ = false;
};

}  // namespace tensorhub::sql
