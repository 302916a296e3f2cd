// Model aliases and their history (model_aliases.h): two tables of the store's "registry"
// module, beside the documents they name.
#include "tensorhub/store/model_aliases.h"

#include <pwd.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <set>

#include "tensorhub/core/clock.h"
#include "tensorhub/core/error.h"
#include "tensorhub/store/hub.h"

namespace tensorhub {
namespace {

// model_aliases.model_id references documents (id) without ON DELETE: the database itself
// refuses to delete a model an alias names, on both backends, whatever process deletes it.
// PostgreSQL adds the key in a DO block: a read-only connection replays only CREATE TABLE and
// ALTER TABLE steps on temporary stand-ins (sql::Schema), and a temporary table may not
// reference a permanent one there; SQLite checks a temporary table's key only on writes,
// which a read-only connection never makes.
const sql::Schema& registry_schema() {
  static const sql::Schema schema{
      .module = "registry",
      .tables = {"model_aliases", "model_alias_history"},
      .sqlite_steps =
          {"CREATE TABLE model_aliases (project_name TEXT NOT NULL, model_name TEXT NOT NULL, alias TEXT NOT NULL, "
           "model_id INTEGER NOT NULL REFERENCES documents (id), time INTEGER NOT NULL, user_name TEXT NOT NULL, "
           "PRIMARY KEY (project_name, model_name, alias))",
           "CREATE INDEX model_aliases_by_model ON model_aliases (model_id)",
           "CREATE TABLE model_alias_history (id INTEGER PRIMARY KEY AUTOINCREMENT, project_name TEXT NOT NULL, "
           "model_name TEXT NOT NULL, alias TEXT NOT NULL, from_id INTEGER, to_id INTEGER, time INTEGER NOT NULL, "
           "user_name TEXT NOT NULL, reason TEXT NOT NULL)",
           "CREATE INDEX model_alias_history_by_alias ON model_alias_history (project_name, model_name, alias, id)"},
      .postgres_steps =
          {"CREATE TABLE model_aliases (project_name TEXT NOT NULL, model_name TEXT NOT NULL, alias TEXT NOT NULL, "
           "model_id BIGINT NOT NULL, time BIGINT NOT NULL, user_name TEXT NOT NULL, "
           "PRIMARY KEY (project_name, model_name, alias))",
           "DO $$ BEGIN ALTER TABLE model_aliases ADD CONSTRAINT model_aliases_model_id_fkey "
           "FOREIGN KEY (model_id) REFERENCES documents (id); END $$",
           "CREATE INDEX model_aliases_by_model ON model_aliases (model_id)",
           "CREATE TABLE model_alias_history (id BIGSERIAL PRIMARY KEY, project_name TEXT NOT NULL, "
           "model_name TEXT NOT NULL, alias TEXT NOT NULL, from_id BIGINT, to_id BIGINT, time BIGINT NOT NULL, "
           "user_name TEXT NOT NULL, reason TEXT NOT NULL)",
           "CREATE INDEX model_alias_history_by_alias ON model_alias_history (project_name, model_name, alias, id)"},
  };
  return schema;
}

sql::Connection& with_registry(sql::Connection& db) {
  db.ensure_schema(registry_schema());
  return db;
}

std::optional<std::int64_t> optional_int(const sql::Rows& r, std::size_t row, std::size_t col) {
  if (r.is_null(row, col)) return std::nullopt;
  return r.int64(row, col);
}

std::string who(const AliasChangeOptions& how) { return how.user.empty() ? current_user_name() : how.user; }

// The alias's current target, locked for this transaction on PostgreSQL (FOR UPDATE; SQLite's
// write transaction is the lock), so that two moves serialise and each history row's from_id
// is the previous row's to_id.
std::optional<std::int64_t> locked_target(sql::Connection& db, const std::string& project, const std::string& model_name,
                                          const std::string& alias) {
  const std::string lock = db.dialect() == sql::Dialect::kPostgres ? " FOR UPDATE" : "";
  const sql::Rows r = db.execute(
      "SELECT model_id FROM model_aliases WHERE project_name = ? AND model_name = ? AND alias = ?" + lock,
      {project, model_name, alias}, sql::Access::kWrite);
  if (r.empty()) return std::nullopt;
  return r.int64(0, 0);
}

void record_change(sql::Connection& db, const std::string& project, const std::string& model_name,
                   const std::string& alias, std::optional<std::int64_t> from, std::optional<std::int64_t> to,
                   const std::string& user, const std::string& reason) {
  const auto value = [](std::optional<std::int64_t> id) -> sql::Value {
    if (id) return *id;
    return nullptr;
  };
  db.execute("INSERT INTO model_alias_history (project_name, model_name, alias, from_id, to_id, time, user_name, "
             "reason) VALUES (?, ?, ?, ?, ?, " + db.now_us() + ", ?, ?)",
             {project, model_name, alias, value(from), value(to), user, reason}, sql::Access::kWrite);
}

// Runs `body` in a write transaction, again (up to 5 times) when a concurrent first move of
// the same alias won the insert (PostgreSQL: both saw no row to lock) or the database asked
// for a retry.
template <typename Body>
auto in_write_transaction(sql::Connection& db, Body body) {
  for (int attempt = 1;; ++attempt) {
    try {
      sql::Transaction tx(db, sql::Access::kWrite);
      auto result = body();
      tx.commit();
      return result;
    } catch (const Error& e) {
      const bool retry = e.kind() == ErrorKind::kAlreadyExists || e.kind() == ErrorKind::kUnavailable;
      if (!retry || attempt == 5) throw;
    }
  }
}

std::vector<ModelAlias> alias_rows(const sql::Rows& r) {
  std::vector<ModelAlias> out;
  for (std::size_t i = 0; i < r.size(); ++i)
    out.push_back({r.text(i, 0), r.text(i, 1), r.int64(i, 2), r.int64(i, 3), r.text(i, 4)});
  return out;
}

}  // namespace

Json to_json(const ModelAlias& a) {
  return {{"model_name", a.model_name}, {"alias", a.alias}, {"model_id", a.model_id},
          {"time", format_time(a.time)}, {"user", a.user}};
}

Json to_json(const ModelAliasChange& c) {
  const auto id = [](std::optional<std::int64_t> v) { return v ? Json(*v) : Json(nullptr); };
  return {{"id", c.id},          {"time", format_time(c.time)}, {"model_name", c.model_name}, {"alias", c.alias},
          {"from_id", id(c.from_id)}, {"to_id", id(c.to_id)},   {"user", c.user},             {"reason", c.reason}};
}

void check_alias_name(std::string_view alias) {
  const auto bad = [&](const std::string& why) {
    throw InvalidArgument("alias \"" + std::string(alias) + "\" " + why +
                          ": an alias is 1 to 64 letters, digits, '_', '.' or '-', starting with a letter, "
                          "e.g. champion");
  };
  if (alias.empty() || alias.size() > 64) bad("has " + std::to_string(alias.size()) + " characters");
  if (!std::isalpha(static_cast<unsigned char>(alias[0]))) bad("does not start with a letter");
  for (char c : alias)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-')
      bad(std::string("holds '") + c + "'");
  if (alias == "latest") bad("is reserved (TF Serving's version policy word)");
}

std::string current_user_name() {
  if (const char* user = std::getenv("USER"); user != nullptr && *user != '\0') return user;
  if (const passwd* pw = getpwuid(geteuid()); pw != nullptr && pw->pw_name != nullptr) return pw->pw_name;
  return "unknown";
}

std::optional<std::int64_t> Hub::set_model_alias(const std::string& model_name, const std::string& alias,
                                                  std::int64_t model_id, const AliasChangeOptions& how) {
  check_alias_name(alias);
  sql::Connection& db = with_registry(sql());
  const std::string user = who(how);
  return in_write_transaction(db, [&]() -> std::optional<std::int64_t> {
    const sql::Rows model = db.execute(
        "SELECT id FROM documents WHERE id = ? AND collection = ? AND project_name = ? AND " +
            std::string(db.dialect() == sql::Dialect::kSqlite ? "json_extract(tags, '$.model_name')"
                                                              : "tags->>'model_name'") +
            " = ?",
        {model_id, to_string(Collection::kModels), project_name_, model_name}, sql::Access::kWrite);
    if (model.empty())
      throw NotFound("no model " + std::to_string(model_id) + " named \"" + model_name + "\" in project \"" +
                     project_name_ + "\" of " + display_uri() + " to point alias \"" + alias +
                     "\" at; `tensorhub model list --filter '{\"model_name\": \"" + model_name + "\"}'` lists them");
    const auto before = locked_target(db, project_name_, model_name, alias);
    if (before == model_id) return before;
    if (before)
      db.execute("UPDATE model_aliases SET model_id = ?, time = " + db.now_us() +
                     ", user_name = ? WHERE project_name = ? AND model_name = ? AND alias = ?",
                 {model_id, user, project_name_, model_name, alias}, sql::Access::kWrite);
    else
      db.execute("INSERT INTO model_aliases (project_name, model_name, alias, model_id, time, user_name) VALUES "
                 "(?, ?, ?, ?, " + db.now_us() + ", ?)",
                 {project_name_, model_name, alias, model_id, user}, sql::Access::kWrite);
    record_change(db, project_name_, model_name, alias, before, model_id, user, how.reason);
    return before;
  });
}

std::optional<std::int64_t> Hub::delete_model_alias(const std::string& model_name, const std::string& alias,
                                                     const AliasChangeOptions& how) {
  sql::Connection& db = with_registry(sql());
  const std::string user = who(how);
  return in_write_transaction(db, [&]() -> std::optional<std::int64_t> {
    const auto before = locked_target(db, project_name_, model_name, alias);
    if (!before) return before;
    db.execute("DELETE FROM model_aliases WHERE project_name = ? AND model_name = ? AND alias = ?",
               {project_name_, model_name, alias}, sql::Access::kWrite);
    record_change(db, project_name_, model_name, alias, before, std::nullopt, user, how.reason);
    return before;
  });
}

std::optional<ModelAlias> Hub::find_model_alias(const std::string& model_name, const std::string& alias) {
  const auto rows = alias_rows(with_registry(sql()).execute(
      "SELECT model_name, alias, model_id, time, user_name FROM model_aliases WHERE project_name = ? AND "
      "model_name = ? AND alias = ?",
      {project_name_, model_name, alias}));
  if (rows.empty()) return std::nullopt;
  return rows[0];
}

std::vector<ModelAlias> Hub::find_model_aliases(const std::string& model_name) {
  const std::string by_name = model_name.empty() ? "" : " AND model_name = ?";
  std::vector<sql::Value> params{project_name_};
  if (!model_name.empty()) params.emplace_back(model_name);
  return alias_rows(with_registry(sql()).execute(
      "SELECT model_name, alias, model_id, time, user_name FROM model_aliases WHERE project_name = ?" + by_name +
          " ORDER BY model_name, alias",
      params));
}

std::vector<ModelAliasChange> Hub::model_alias_history(const std::string& model_name, const std::string& alias) {
  std::vector<sql::Value> params{project_name_, model_name};
  if (!alias.empty()) params.emplace_back(alias);
  const sql::Rows r = with_registry(sql()).execute(
      "SELECT id, model_name, alias, from_id, to_id, time, user_name, reason FROM model_alias_history WHERE "
      "project_name = ? AND model_name = ?" + std::string(alias.empty() ? "" : " AND alias = ?") + " ORDER BY id",
      params);
  std::vector<ModelAliasChange> out;
  for (std::size_t i = 0; i < r.size(); ++i)
    out.push_back({r.int64(i, 0), r.text(i, 1), r.text(i, 2), optional_int(r, i, 3), optional_int(r, i, 4),
                   r.int64(i, 5), r.text(i, 6), r.text(i, 7)});
  return out;
}

std::optional<ModelRecord> Hub::find_model_by_alias(const std::string& model_name, const std::string& alias) {
  const auto target = find_model_alias(model_name, alias);
  if (!target) return std::nullopt;
  const auto docs = find_models(Json{{"id", target->model_id}}, {}, 1);
  // The foreign key keeps the model while the alias names it; a move between the two reads
  // leaves the old model in place, so an absent document means a hub without the key.
  if (docs.empty())
    throw Internal("alias \"" + alias + "\" of \"" + model_name + "\" names model " +
                   std::to_string(target->model_id) + ", which is not in the hub");
  return load_model(docs[0]);
}

std::int64_t Hub::delete_models(const Json& filter, bool force) {
  if (!filter.is_null() && !filter.is_object())
    throw InvalidArgument("filter must be a JSON object, got " + filter.dump());
  const Json f = filter.is_null() ? Json::object() : filter;  // {} from C++ is null: every model
  with_registry(sql());
  std::set<std::int64_t> ids;
  for (const Document& d : find_models(f)) ids.insert(d.id);
  std::vector<ModelAlias> held;
  for (const ModelAlias& a : find_model_aliases())
    if (ids.contains(a.model_id)) held.push_back(a);
  if (!held.empty() && !force) {
    std::string names;
    for (const ModelAlias& a : held)
      names += (names.empty() ? "" : ", ") + a.model_name + "@" + a.alias + " -> " + std::to_string(a.model_id);
    throw FailedPrecondition("not deleting: aliases name " + std::string(held.size() == 1 ? "a model" : "models") +
                             " this would delete (" + names +
                             "); move them first (`tensorhub model alias set NAME ALIAS --id OTHER`), delete "
                             "them (`tensorhub model alias delete NAME ALIAS`), or force the delete (--force)");
  }
  for (const ModelAlias& a : held)
    delete_model_alias(a.model_name, a.alias, {.reason = "model " + std::to_string(a.model_id) + " deleted", .user = ""});
  try {
    return backend_->delete_documents(Collection::kModels, project_name_, f);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kFailedPrecondition || is_read_only_error(e)) throw;
    // The foreign key: an alias was set to one of these models after the check above.
    throw FailedPrecondition(std::string(e.what()) + " (an alias was pointed at a model being deleted; "
                             "`tensorhub model alias list` shows them; try again)");
  }
}

}  // namespace tensorhub
