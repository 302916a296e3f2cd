// Dashboard users: who may open `tensorhub ui` when it is shared with a team, and what they may
// do there. A user has a name, a role and a token; the hub keeps the token's SHA-256, never the
// token, which is shown once when the user is added (as GitHub's personal access tokens are).
//
//   tensorhub user add alice --role editor    # prints alice's token once
//   tensorhub user list                       # names, roles, who added them and when
//   tensorhub user delete alice               # her token and her open sessions stop at once
//
// Roles: a viewer reads everything the dashboard shows (and tries models on its page); an
// editor also cancels tasks and moves model aliases. Users belong to the hub, not to one
// project: a person is on the team of the whole database.
//
// A token is "thu_" and 64 hex characters: 256 bits from OpenSSL's CSPRNG, so a plain SHA-256
// suffices to store it (no password stretching: nobody can guess 256 random bits, and a
// lookup by hash leaks nothing a timing attack could use).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tensorhub/core/json.h"

namespace tensorhub {

class Hub;

enum class UserRole { kViewer, kEditor };

/// "viewer" or "editor".
std::string to_string(UserRole role);
/// The role `text` names ("viewer", "editor"). Throws InvalidArgument naming the choices.
UserRole parse_user_role(std::string_view text);

/// A user as the hub keeps it (without the token).
struct HubUser {
  std::string name;
  UserRole role = UserRole::kViewer;
  std::int64_t created = 0;  ///< when added, UTC microseconds (the database's clock)
  std::string created_by;    ///< the operating system user who added it
};

/// {"name", "role", "created" (ISO 8601 UTC), "created_by"}: `user list --json`.
Json to_json(const HubUser& user);

/// A user just added and its token, the only time the token exists outside its holder.
struct AddedUser {
  HubUser user;
  std::string token;
};

/// Throws InvalidArgument unless `name` is 1 to 64 letters, digits, '_', '.', '-' or '@',
/// starting with a letter or digit.
void check_user_name(std::string_view name);

/// Adds user `name` with `role` and a new token. `created_by` "" means the operating system's
/// user (current_user_name). Throws InvalidArgument for a bad name, AlreadyExists when the user
/// exists (delete it first to give it a new token), and on a read-only hub what a write there
/// throws (is_read_only_error, backend.h).
AddedUser add_user(Hub& hub, const std::string& name, UserRole role, const std::string& created_by = "");

/// Every user, by name.
std::vector<HubUser> list_users(Hub& hub);

/// Deletes user `name`; false when there was none. Its token is refused from the next request.
bool delete_user(Hub& hub, const std::string& name);

/// The number of users (0: the hub has none, and `tensorhub ui` on loopback needs no login).
std::int64_t count_users(Hub& hub);

/// The SHA-256 (hex) the hub keeps of `token`.
std::string token_sha256(std::string_view token);

/// The user whose token's SHA-256 is `token_hash`, or nullopt (unknown or deleted token).
std::optional<HubUser> find_user_by_token_sha256(Hub& hub, const std::string& token_hash);

}  // namespace tensorhub
