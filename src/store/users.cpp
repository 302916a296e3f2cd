// Dashboard users (users.h): one table of the store's "users" module, hub-wide.
#include "tensorhub/store/users.h"

#include <cctype>

#include "tensorhub/core/clock.h"
#include "tensorhub/core/error.h"
#include "tensorhub/core/hash.h"
#include "tensorhub/core/secure_random.h"
#include "tensorhub/store/hub.h"
#include "tensorhub/store/model_aliases.h"  // current_user_name

namespace tensorhub {
namespace {

const sql::Schema& users_schema() {
  static const sql::Schema schema{
      .module = "users",
      .tables = {"hub_users"},
      .sqlite_steps = {"CREATE TABLE hub_users (name TEXT PRIMARY KEY, role TEXT NOT NULL, "
                       "token_sha256 TEXT NOT NULL UNIQUE, time INTEGER NOT NULL, created_by TEXT NOT NULL)"},
      .postgres_steps = {"CREATE TABLE hub_users (name TEXT PRIMARY KEY, role TEXT NOT NULL, "
                         "token_sha256 TEXT NOT NULL UNIQUE, time BIGINT NOT NULL, created_by TEXT NOT NULL)"},
  };
  return schema;
}

sql::Connection& with_users(Hub& hub) {
  sql::Connection& db = hub.sql();
  db.ensure_schema(users_schema());
  return db;
}

std::vector<HubUser> user_rows(const sql::Rows& r) {
  std::vector<HubUser> out;
  for (std::size_t i = 0; i < r.size(); ++i)
    out.push_back({r.text(i, 0), parse_user_role(r.text(i, 1)), r.int64(i, 2), r.text(i, 3)});
  return out;
}

constexpr const char* kUserColumns = "SELECT name, role, time, created_by FROM hub_users";

}  // namespace

std::string to_string(UserRole role) { return role == UserRole::kEditor ? "editor" : "viewer"; }

UserRole parse_user_role(std::string_view text) {
  if (text == "viewer") return UserRole::kViewer;
  if (text == "editor") return UserRole::kEditor;
  throw InvalidArgument("role \"" + std::string(text) +
                        "\" is not a role; a viewer reads the dashboard, an editor also cancels tasks and moves "
                        "aliases: viewer or editor");
}

Json to_json(const HubUser& u) {
  return {{"name", u.name}, {"role", to_string(u.role)}, {"created", format_time(u.created)}, {"created_by", u.created_by}};
}

void check_user_name(std::string_view name) {
  const auto bad = [&](const std::string& why) {
    throw InvalidArgument("user name \"" + std::string(name) + "\" " + why +
                          ": a user name is 1 to 64 letters, digits, '_', '.', '-' or '@', starting with a letter "
                          "or digit, e.g. alice");
  };
  if (name.empty() || name.size() > 64) bad("has " + std::to_string(name.size()) + " characters");
  if (!std::isalnum(static_cast<unsigned char>(name[0]))) bad("does not start with a letter or digit");
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-' && c != '@')
      bad(std::string("holds '") + c + "'");
}

std::string token_sha256(std::string_view token) { return sha256_hex(std::string(token)); }

AddedUser add_user(Hub& hub, const std::string& name, UserRole role, const std::string& created_by) {
  check_user_name(name);
  sql::Connection& db = with_users(hub);
  AddedUser added{{name, role, 0, created_by.empty() ? current_user_name() : created_by}, "thu_" + secure_random_hex(32)};
  try {
    const sql::Rows r = db.execute("INSERT INTO hub_users (name, role, token_sha256, time, created_by) VALUES (?, ?, ?, " +
                                       db.now_us() + ", ?) RETURNING time",
                                   {name, to_string(role), token_sha256(added.token), added.user.created_by},
                                   sql::Access::kWrite);
    added.user.created = r.int64(0, 0);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kAlreadyExists) throw;
    throw AlreadyExists("user \"" + name + "\" exists in " + hub.display_uri() +
                        "; to give it a new token, delete it (`tensorhub user delete " + name + "`) and add it again");
  }
  return added;
}

std::vector<HubUser> list_users(Hub& hub) {
  return user_rows(with_users(hub).execute(std::string(kUserColumns) + " ORDER BY name", {}));
}

bool delete_user(Hub& hub, const std::string& name) {
  const sql::Rows r =
      with_users(hub).execute("DELETE FROM hub_users WHERE name = ? RETURNING name", {name}, sql::Access::kWrite);
  return !r.empty();
}

std::int64_t count_users(Hub& hub) { return with_users(hub).execute("SELECT COUNT(*) FROM hub_users", {}).int64(0, 0); }

std::optional<HubUser> find_user_by_token_sha256(Hub& hub, const std::string& token_hash) {
  const auto users = user_rows(with_users(hub).execute(std::string(kUserColumns) + " WHERE token_sha256 = ?", {token_hash}));
  if (users.empty()) return std::nullopt;
  return users[0];
}

}  // namespace tensorhub
