// Hub URIs: what open_backend accepts, how a SQLite path is taken from one, and how a URI (or
// any text holding one) is shown without its password.
//
//   sqlite:///abs/path/hub.db            a file; "%20" etc. are decoded, sqlite://rel.db is
//                                        relative to the working directory
//   postgresql://user:pass@host:5432/db  libpq's URI form (libpq decodes its "%XX" escapes)
//
// Every message, log line and printed URI goes through mask_passwords, so no output shows a
// password; only the URI handed to a task's environment keeps it.
#pragma once

#include <string>
#include <string_view>

namespace tensorhub {

/// `text` with every password replaced by "***": the "password" of each "scheme://user:password@"
/// in it (the last '@' before the host ends the password, so an unescaped '@' in it is masked
/// too) and the value of every "password=..." (a URI query parameter or a libpq keyword).
/// Works on a URI alone or on a whole message that holds URIs; text without one is returned
/// unchanged. Never throws.
std::string mask_passwords(std::string_view text);

/// `uri`, a single URI and nothing else, with the password of its "scheme://user:password@"
/// replaced by "***" (the authority ends at the first '/', '?' or '#' after "://"; the last '@'
/// in it ends the password, so a password holding spaces, quotes or an unescaped '@' is masked
/// whole, which mask_passwords, made for messages, cannot know), then mask_passwords for its
/// "password=" values. Never throws.
std::string mask_uri_password(std::string_view uri);

/// Decodes "%XX" escapes (hexadecimal, either case); other characters are kept as they are
/// ('+' is not a space). Throws InvalidArgument naming `what` (e.g. the URI, masked) for a '%'
/// not followed by two hex digits.
std::string percent_decode(std::string_view text, std::string_view what);

/// `path` with the characters a URI cannot hold literally ('%', '?', '#', space and controls)
/// escaped as "%XX", so that sqlite_path_of_uri("sqlite://" + percent_encode_path(p)) == p.
std::string percent_encode_path(std::string_view path);

/// The absolute, normalised file path of a "sqlite://..." URI: the text after "sqlite://" up
/// to a '?', percent-decoded, relative paths taken from the working directory. Throws
/// InvalidArgument for a URI of another scheme, without a path or with a bad escape.
std::string sqlite_path_of_uri(const std::string& uri);

}  // namespace tensorhub
