// The errors of a hub that may only be read: one wording for SQLite and PostgreSQL, so that a
// command that must write says at once what is wrong and what to do.
#pragma once

#include <string>

namespace tensorhub::detail {

/// What a user can do about a read-only hub, appended to every read-only error.
inline constexpr const char* kReadOnlyAdvice =
    "commands that only read (list, show, fetch, wait, serve --hub_model, ui) work on it; one that writes must "
    "run as a user who may write the hub (SQLite: the file and its directory; PostgreSQL: a role with INSERT, "
    "UPDATE and DELETE on tensorhub's tables)";

/// Throws FailedPrecondition "the hub <display_uri> is read-only (<why>): <kReadOnlyAdvice>".
[[noreturn]] void throw_read_only(const std::string& display_uri, const std::string& why);

/// The advice for a hub whose schema is older than this tensorhub's, opened read-only: it cannot
/// be brought forward by a reader.
std::string older_schema_advice(const std::string& display_uri);

}  // namespace tensorhub::detail
