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
