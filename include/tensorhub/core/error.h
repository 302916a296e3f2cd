// tensorhub::Error: the one exception hierarchy of tensorhub.
//
// Every error carries a Kind that maps 1:1 to a gRPC canonical status code (grpc_code), so
// the model server can turn any exception into the status and HTTP code (http_status)
// TensorFlow Serving would use.
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

/// HTTP status code TensorFlow Serving's REST API uses for this kind.
int http_status(ErrorKind kind) noexcept;

/// gRPC's canonical status code of this kind (grpc/include/grpcpp/support/status_code_enum.h,
/// absl::StatusCode): InvalidArgument 3, DeadlineExceeded 4, NotFound 5, AlreadyExists 6,
/// FailedPrecondition 9, Internal 13, Unavailable 14, DataLoss 15.
int grpc_code(ErrorKind kind) noexcept;

/// gRPC's name of that code: "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", ... as TF Serving's
/// metrics label requests by it.
std::string_view grpc_code_name(ErrorKind kind) noexcept;

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
