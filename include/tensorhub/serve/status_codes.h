// What the servers answer for an error (core/error.h's kinds): TensorFlow Serving's HTTP
// status codes for its REST API and gRPC's canonical status codes and names, one kind to one
// code. Header-only, so that tensorhub-serve-lite and the dashboard's server, which link no
// serve/ library, answer the same.
#pragma once

#include <string_view>

#include "tensorhub/core/error.h"

namespace tensorhub {

/// The HTTP status code TensorFlow Serving's REST API answers for an error of this kind.
inline int http_status(ErrorKind kind) noexcept {
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

/// gRPC's canonical status code of this kind (grpc/include/grpcpp/support/status_code_enum.h,
/// absl::StatusCode): InvalidArgument 3, DeadlineExceeded 4, NotFound 5, AlreadyExists 6,
/// FailedPrecondition 9, Internal 13, Unavailable 14, DataLoss 15.
inline int grpc_code(ErrorKind kind) noexcept {
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

/// gRPC's name of that code: "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", ... as TF Serving's
/// metrics label requests by it.
inline std::string_view grpc_code_name(ErrorKind kind) noexcept {
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

}  // namespace tensorhub
