// tensorhub::Error: the one exception hierarchy of tensorhub.
//
// Every error carries a Kind that maps 1:1 to a gRPC/TF Serving status code, so the
// model server can turn any exception into the HTTP code TensorFlow Serving would use.
// Messages say what was wrong, where, and what to do about it.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace tensorhub {

/// The kind of an error; names and meaning follow absl::StatusCode.
enum class ErrorKind {
  kInvalidArgument,     ///< the caller passed something malformed (HTTP 400)
  kNotFound,            ///< a named thing does not exist (HTTP 404)
  kAlreadyExists,       ///< a thing to create exists already (HTTP 409)
  kFailedPrecondition,  ///< the system is not in a state to do this (HTTP 400)
  kUnavailable,         ///< a service (database, runner) cannot be reached (HTTP 503)
  kDataLoss,            ///< stored bytes are corrupt or truncated (HTTP 500)
  kInternal,            ///< a bug or an unexpected failure of a library (HTTP 500)
};

/// "InvalidArgument", "NotFound", ... for messages and logs.
std::string_view to_string(ErrorKind kind) noexcept;

/// HTTP status code TensorFlow Serving's REST API uses for this kind.
int http_status(ErrorKind kind) noexcept;

/// Base of all tensorhub exceptions. what() is "<Kind>: <message>".
class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message);
  ErrorKind kind() const noexcept { return kind_; }
  /// The message without the "<Kind>: " prefix.
  const std::string& message() const noexcept { return message_; }

 private:
  ErrorKind kind_;
  std::string message_;
};

/// Convenience constructors, one per kind: `throw InvalidArgument("...")`.
Error InvalidArgument(const std::string& message);
Error NotFound(const std::string& message);
Error AlreadyExists(const std::string& message);
Error FailedPrecondition(const std::string& message);
Error Unavailable(const std::string& message);
Error DataLoss(const std::string& message);
Error Internal(const std::string& message);

}  // namespace tensorhub
