#include "tensorhub/core/error.h"

namespace tensorhub {

std::string_view to_string(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::kInvalidArgument: return "InvalidArgument";
    case ErrorKind::kNotFound: return "NotFound";
    case ErrorKind::kAlreadyExists: return "AlreadyExists";
    case ErrorKind::kFailedPrecondition: return "FailedPrecondition";
    case ErrorKind::kUnavailable: return "Unavailable";
    case ErrorKind::kDataLoss: return "DataLoss";
    case ErrorKind::kInternal: return "Internal";
    case ErrorKind::kDeadlineExceeded: return "DeadlineExceeded";
  }
  return "Unknown";
}

int http_status(ErrorKind kind) noexcept {
  // tensorflow_serving/util/net_http/... maps absl codes to HTTP the same way.
  switch (kind) {
    case ErrorKind::kInvalidArgument: return 400;
    case ErrorKind::kFailedPrecondition: return 400;
    case ErrorKind::kNotFound: return 404;
    case ErrorKind::kAlreadyExists: return 409;
    case ErrorKind::kUnavailable: return 503;
    case ErrorKind::kDataLoss: return 500;
    case ErrorKind::kInternal: return 500;
    case ErrorKind::kDeadlineExceeded: return 504;
  }
  return 500;
}

int grpc_code(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::kInvalidArgument: return 3;
    case ErrorKind::kDeadlineExceeded: return 4;
    case ErrorKind::kNotFound: return 5;
    case ErrorKind::kAlreadyExists: return 6;
    case ErrorKind::kFailedPrecondition: return 9;
    case ErrorKind::kInternal: return 13;
    case ErrorKind::kUnavailable: return 14;
    case ErrorKind::kDataLoss: return 15;
  }
  return 2;  // UNKNOWN
}

std::string_view grpc_code_name(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::kInvalidArgument: return "INVALID_ARGUMENT";
    case ErrorKind::kDeadlineExceeded: return "DEADLINE_EXCEEDED";
    case ErrorKind::kNotFound: return "NOT_FOUND";
    case ErrorKind::kAlreadyExists: return "ALREADY_EXISTS";
    case ErrorKind::kFailedPrecondition: return "FAILED_PRECONDITION";
    case ErrorKind::kInternal: return "INTERNAL";
    case ErrorKind::kUnavailable: return "UNAVAILABLE";
    case ErrorKind::kDataLoss: return "DATA_LOSS";
  }
  return "UNKNOWN";
}

Error::Error(ErrorKind kind, const std::string& message)
    : std::runtime_error(std::string(to_string(kind)) + ": " + message),
      kind_(kind),
      message_(message) {}

Error InvalidArgument(const std::string& m) { return Error(ErrorKind::kInvalidArgument, m); }
Error NotFound(const std::string& m) { return Error(ErrorKind::kNotFound, m); }
Error AlreadyExists(const std::string& m) { return Error(ErrorKind::kAlreadyExists, m); }
Error FailedPrecondition(const std::string& m) { return Error(ErrorKind::kFailedPrecondition, m); }
Error Unavailable(const std::string& m) { return Error(ErrorKind::kUnavailable, m); }
Error DataLoss(const std::string& m) { return Error(ErrorKind::kDataLoss, m); }
Error Internal(const std::string& m) { return Error(ErrorKind::kInternal, m); }
Error DeadlineExceeded(const std::string& m) { return Error(ErrorKind::kDeadlineExceeded, m); }

}  // namespace tensorhub
