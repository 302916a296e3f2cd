// tensorhub::Error: the one exception hierarchy of tensorhub.
//
// Every error carries a Kind (absl::StatusCode's names); the servers map kinds to the gRPC
// status and HTTP code TensorFlow Serving would use (serve/status_codes.h).
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
  kDeadlineExceeded,    ///< the deadline of a request passed before its answer was ready (HTTP 504)
};

/// "InvalidArgument", "NotFound", ... for messages and logs.
std::string_view to_string(ErrorKind kind) noexcept;

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
Error DeadlineExceeded(const std::string& message);

}  // namespace tensorhub
