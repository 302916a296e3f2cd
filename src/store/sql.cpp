#include "tensorhub/store/sql.h"

#include <cctype>
#include <charconv>
#include <cstdio>
#include <sstream>

#include "read_only.h"
#include "tensorhub/core/error.h"

namespace tensorhub::sql {

const Value& Rows::cell(std::size_t row, std::size_t col) const {
  if (row >= rows_.size() || col >= rows_[row].size())
    throw Internal("SQL result: no cell (" + std::to_string(row) + ", " + std::to_string(col) + ") in " +
                   std::to_string(rows_.size()) + " rows");
  return rows_[row][col];
}

bool Rows::is_null(std::size_t row, std::size_t col) const {
  return std::holds_alternative<std::nullptr_t>(cell(row, col));
}

std::int64_t Rows::int64(std::size_t row, std::size_t col) const {
  const Value& v = cell(row, col);
  if (const auto* n = std::get_if<std::int64_t>(&v)) return *n;
  if (const auto* d = std::get_if<double>(&v)) return static_cast<std::int64_t>(*d);
  if (const auto* s = std::get_if<std::string>(&v)) {
    std::int64_t n = 0;
    const auto [end, ec] = std::from_chars(s->data(), s->data() + s->size(), n);
    if (ec == std::errc() && end == s->data() + s->size()) return n;
    throw Internal("SQL result: \"" + s->substr(0, 40) + "\" is not an integer");
  }
  return 0;  // NULL
}

double Rows::real(std::size_t row, std::size_t col) const {
  const Value& v = cell(row, col);
  if (const auto* d = std::get_if<double>(&v)) return *d;
  if (const auto* n = std::get_if<std::int64_t>(&v)) return static_cast<double>(*n);
  if (const auto* s = std::get_if<std::string>(&v)) {
    // strtod, not from_chars: PostgreSQL prints "Infinity" and "NaN", which strtod reads.
    char* end = nullptr;
    const double d = std::strtod(s->c_str(), &end);
    if (!s->empty() && end == s->c_str() + s->size()) return d;
    throw Internal("SQL result: \"" + s->substr(0, 40) + "\" is not a number");
  }
  return 0;
}

std::string Rows::text(std::size_t row, std::size_t col) const { return to_text(cell(row, col)); }

namespace {

// Every module's tables take this lock on PostgreSQL while they migrate (the store's own
// migration takes another), so many runners connecting to a new database at once create
// them once.
constexpr std::int64_t kModuleSchemaLock = 7310252;

std::int64_t module_version(Connection& db, const std::string& module) {
  const Rows r = db.execute("SELECT version FROM module_schemas WHERE module = ?", {module});
  return r.empty() ? 0 : r.int64(0, 0);
}

// The statement's first two words in upper case, one space apart ("CREATE TABLE").
std::string leading_words(const std::string& statement) {
  std::istringstream in(statement);
  std::string first, second;
  in >> first >> second;
  std::string out = first + " " + second;
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ",") + n;
  return out;
}

}  // namespace

void Connection::ensure_schema(const Schema& schema) {
  if (ensured_modules_.contains(schema.module)) return;
  if (read_only()) return ensure_schema_read_only(schema);
  const auto& steps = dialect() == Dialect::kSqlite ? schema.sqlite_steps : schema.postgres_steps;
  const auto latest = static_cast<std::int64_t>(steps.size());
  // A read first: the common case (the tables are there) takes no write lock.
  if (module_version(*this, schema.module) != latest) {
    Transaction tx(*this, Access::kWrite);
    if (dialect() == Dialect::kPostgres)
      execute("SELECT pg_advisory_xact_lock(?)", {kModuleSchemaLock}, Access::kWrite);
    const std::int64_t version = module_version(*this, schema.module);
    if (version > latest)
      throw FailedPrecondition("the hub's " + schema.module + " tables are at version " + std::to_string(version) +
                               ", newer than this tensorhub understands (" + std::to_string(latest) +
                               "); upgrade tensorhub");
    for (std::int64_t i = version; i < latest; ++i) execute(steps[static_cast<std::size_t>(i)], {}, Access::kWrite);
    execute("INSERT INTO module_schemas (module, version, tables) VALUES (?, ?, ?) "
            "ON CONFLICT (module) DO UPDATE SET version = excluded.version, tables = excluded.tables",
            {schema.module, latest, joined(schema.tables)}, Access::kWrite);
    tx.commit();
  }
  ensured_modules_.insert(schema.module);
}

void Connection::ensure_schema_read_only(const Schema& schema) {
  const auto& steps = dialect() == Dialect::kSqlite ? schema.sqlite_steps : schema.postgres_steps;
  const auto latest = static_cast<std::int64_t>(steps.size());
  const std::int64_t version = module_version(*this, schema.module);
  if (version == latest) {
    // Another process made the real tables since the stand-ins were made: use them from now on.
    if (stand_in_modules_.contains(schema.module)) drop_stand_in_tables(schema);
    ensured_modules_.insert(schema.module);
    return;
  }
  if (version > latest)
    throw FailedPrecondition("the hub's " + schema.module + " tables are at version " + std::to_string(version) +
                             ", newer than this tensorhub understands (" + std::to_string(latest) +
                             "); upgrade tensorhub");
  if (stand_in_modules_.contains(schema.module)) return;  // still none of its own: keep reading the stand-ins
  // A hub of the store's schema 2 holds the queue's tables without a module_schemas row.
  if (version > 0 || any_table_exists(schema.tables))
    throw FailedPrecondition("the hub " + display_uri() + " holds " + schema.module + " tables of version " +
                             std::to_string(version) + ", older than this tensorhub's (" + std::to_string(latest) +
                             "), and is opened read-only: " + detail::older_schema_advice(display_uri()));
  create_stand_in_tables(schema);
}

void Connection::create_stand_in_tables(const Schema& schema) {
  const auto& steps = dialect() == Dialect::kSqlite ? schema.sqlite_steps : schema.postgres_steps;
  drop_stand_in_tables(schema);  // a half-made set from an earlier failure
  for (const std::string& step : steps) {
    const std::string words = leading_words(step);
    if (words == "CREATE TABLE") {
      // "CREATE" + " TEMP" + the rest. Temporary tables are the connection's own: SQLite keeps
      // them outside the hub's file, PostgreSQL needs only the TEMPORARY privilege (every
      // role's by default).
      const auto after_create = step.find_first_not_of(" \n\t\r") + std::string("CREATE").size();
      execute(step.substr(0, after_create) + " TEMP" + step.substr(after_create));
    } else if (words == "ALTER TABLE") {
      execute(step);  // an unqualified name finds the temporary table first (both databases)
    }
    // Indexes and data moves: an empty stand-in needs neither.
  }
  stand_in_modules_.insert(schema.module);
}

void Connection::drop_stand_in_tables(const Schema& schema) {
  const std::string temp = dialect() == Dialect::kSqlite ? "temp." : "pg_temp.";
  for (const std::string& table : schema.tables) execute("DROP TABLE IF EXISTS " + temp + table);
  stand_in_modules_.erase(schema.module);
}

bool Connection::any_table_exists(const std::vector<std::string>& tables) {
  for (const std::string& table : tables) {
    // The database's own tables, not temporary ones (which stand in for them on this connection).
    const Rows r = dialect() == Dialect::kSqlite
                       ? execute("SELECT COUNT(*) FROM main.sqlite_master WHERE type = 'table' AND name = ?", {table})
                       : execute("SELECT COUNT(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                                 "WHERE c.relname = ? AND c.relkind IN ('r', 'p') AND "
                                 "n.nspname = ANY (current_schemas(false))",
                                 {table});
    if (r.int64(0, 0) > 0) return true;
  }
  return false;
}

std::string to_text(const Value& v) {
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  if (const auto* n = std::get_if<std::int64_t>(&v)) return std::to_string(*n);
  if (const auto* d = std::get_if<double>(&v)) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", *d);  // repr-exact: reads back as the same double
    return buf;
  }
  return "";
}

}  // namespace tensorhub::sql
