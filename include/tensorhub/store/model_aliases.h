// Model aliases: a team's names for particular versions of a model ("champion",
// "challenger"), as MLflow's registered-model aliases (mlflow.org/docs/latest/model-registry:
// set_registered_model_alias, get_model_version_by_alias), with every move kept in a history
// (who, when, from which model id to which, why).
//
//   hub.set_model_alias("mlp", "champion", 42, {.reason = "beats 17 on the March test set"});
//   auto champion = hub.find_model_alias("mlp", "champion");   // -> model id 42
//   for (const ModelAliasChange& c : hub.model_alias_history("mlp")) ...
//
// An alias belongs to a model name in a project and points at one model document of that
// name (its id, the "version" TF Serving shows). It moves atomically on both backends: one
// write transaction changes the alias and appends its history row, so concurrent moves
// serialise and the history is a chain (each change's from_id is the previous change's
// to_id). It never points at a deleted model: the database refuses to delete a model an alias
// names (a foreign key), and Hub::delete_models refuses first with a message naming the alias
// unless forced (then the alias is deleted with it and the history says so).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "tensorhub/core/json.h"

namespace tensorhub {

/// Where an alias points now.
struct ModelAlias {
  std::string model_name;
  std::string alias;
  std::int64_t model_id = 0;  ///< the model document's id (its serving version)
  std::int64_t time = 0;      ///< when it last moved, UTC microseconds (the database's clock)
  std::string user;           ///< who moved it last
};

/// One move of an alias, in the order they happened (id increases).
struct ModelAliasChange {
  std::int64_t id = 0;  ///< the change's own number, increasing in commit order per hub
  std::string model_name;
  std::string alias;
  std::optional<std::int64_t> from_id;  ///< none when the alias was created
  std::optional<std::int64_t> to_id;    ///< none when it was deleted
  std::int64_t time = 0;                ///< UTC microseconds (the database's clock)
  std::string user;
  std::string reason;  ///< "" when none was given
};

/// Who and why, recorded with each move.
struct AliasChangeOptions {
  /// Free text kept in the history ("" for none).
  std::string reason;
  /// Who moved it; "" means the operating system's user of this process ($USER, else the
  /// name of the effective uid). The dashboard passes its logged-in user.
  std::string user;
};

/// {"model_name", "alias", "model_id", "time" (ISO 8601 UTC, format_time), "user"}: the
/// CLI's --json, the Python API's dicts and the dashboard's API.
Json to_json(const ModelAlias& alias);
/// {"id", "time" (ISO 8601 UTC), "model_name", "alias", "from_id", "to_id" (null where none),
/// "user", "reason"}.
Json to_json(const ModelAliasChange& change);

/// Throws InvalidArgument unless `alias` is a valid alias name: 1 to 64 characters of
/// [A-Za-z0-9_.-], starting with a letter, and not "latest" (a version policy's word) — so it
/// can be a TF Serving version label in a URL path (/v1/models/NAME/labels/ALIAS).
void check_alias_name(std::string_view alias);

/// The operating system's user name of this process ($USER, else getpwuid(geteuid())), or
/// "unknown" when neither is known.
std::string current_user_name();

}  // namespace tensorhub
