#include "tensorhub/tune/search_lease.h"

namespace tensorhub {
namespace {

// The leases table, tune/'s own (sql::Schema). Version 1 is the table a hub of the store's
// schema 2 already holds (it was the store's then): "IF NOT EXISTS" takes it as it is.
sql::Connection& with_leases(sql::Connection& db) {
  static const sql::Schema schema{
      .module = "tune",
      .tables = {"leases"},
      .sqlite_steps = {"CREATE TABLE IF NOT EXISTS leases (project_name TEXT NOT NULL, name TEXT NOT NULL, "
                       "owner TEXT NOT NULL, expires INTEGER NOT NULL, PRIMARY KEY (project_name, name))"},
      .postgres_steps = {"CREATE TABLE IF NOT EXISTS leases (project_name TEXT NOT NULL, name TEXT NOT NULL, "
                         "owner TEXT NOT NULL, expires BIGINT NOT NULL, PRIMARY KEY (project_name, name))"},
  };
  db.ensure_schema(schema);
  return db;
}

}  // namespace

Lease acquire_lease(sql::Connection& db, const std::string& project, const std::string& name,
                    const std::string& owner, std::int64_t lease_us) {
  // One statement: the upsert's row lock (PostgreSQL) or the write lock (SQLite) makes the
  // check and the take one step. DO UPDATE's WHERE leaves a live lease of another owner as it
  // is, and then RETURNING gives no row.
  const auto taken = with_leases(db).execute(
      "INSERT INTO leases AS l (project_name, name, owner, expires) VALUES (?, ?, ?, " + db.now_us() +
          " + ?) ON CONFLICT (project_name, name) DO UPDATE SET owner = excluded.owner, expires = excluded.expires "
          "WHERE l.owner = '' OR l.owner = excluded.owner OR l.expires < " + db.now_us() + " RETURNING owner",
      {project, name, owner, lease_us}, sql::Access::kWrite);
  if (!taken.empty()) return {owner, lease_us};
  const auto held = db.execute("SELECT owner, expires - " + db.now_us() + " FROM leases WHERE project_name = ? AND name = ?",
                               {project, name});
  if (held.empty()) return {};  // released in between: nobody holds it now
  return {held.text(0, 0), held.int64(0, 1)};
}

bool renew_lease(sql::Connection& db, const std::string& project, const std::string& name,
                 const std::string& owner, std::int64_t lease_us) {
  return with_leases(db).execute("UPDATE leases SET expires = " + db.now_us() + " + ? WHERE project_name = ? AND name = ? AND owner = ?",
                    {lease_us, project, name, owner}, sql::Access::kWrite)
             .changes() == 1;
}

void release_lease(sql::Connection& db, const std::string& project, const std::string& name,
                   const std::string& owner) {
  with_leases(db).execute("UPDATE leases SET owner = '', expires = 0 WHERE project_name = ? AND name = ? AND owner = ?",
             {project, name, owner}, sql::Access::kWrite);
}

}  // namespace tensorhub
