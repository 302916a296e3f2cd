// The one mapping of error kinds to gRPC's canonical codes and names (grpc's
// status_code_enum.h) and to the HTTP codes of TF Serving's REST API (serve/status_codes.h).
#include <gtest/gtest.h>

#include <set>

#include "tensorhub/serve/status_codes.h"

namespace tensorhub {
namespace {

struct CodeRow {
  ErrorKind kind;
  int grpc;               // grpc::StatusCode
  const char* grpc_name;  // grpc::StatusCode's name
  int http;               // TF Serving's REST API
};

// gRPC's numbers: OK 0, CANCELLED 1, UNKNOWN 2, INVALID_ARGUMENT 3, DEADLINE_EXCEEDED 4,
// NOT_FOUND 5, ALREADY_EXISTS 6, PERMISSION_DENIED 7, RESOURCE_EXHAUSTED 8,
// FAILED_PRECONDITION 9, ABORTED 10, OUT_OF_RANGE 11, UNIMPLEMENTED 12, INTERNAL 13,
// UNAVAILABLE 14, DATA_LOSS 15, UNAUTHENTICATED 16.
const CodeRow kRows[] = {
    {ErrorKind::kInvalidArgument, 3, "INVALID_ARGUMENT", 400},
    {ErrorKind::kDeadlineExceeded, 4, "DEADLINE_EXCEEDED", 504},
    {ErrorKind::kNotFound, 5, "NOT_FOUND", 404},
    {ErrorKind::kAlreadyExists, 6, "ALREADY_EXISTS", 409},
    {ErrorKind::kFailedPrecondition, 9, "FAILED_PRECONDITION", 400},
    {ErrorKind::kInternal, 13, "INTERNAL", 500},
    {ErrorKind::kUnavailable, 14, "UNAVAILABLE", 503},
    {ErrorKind::kDataLoss, 15, "DATA_LOSS", 500},
};

TEST(StatusCodes, EachKindMapsToItsGrpcCodeNameAndHttpStatus) {
  std::set<int> codes;
  for (const auto& row : kRows) {
    EXPECT_EQ(grpc_code(row.kind), row.grpc) << to_string(row.kind);
    EXPECT_EQ(grpc_code_name(row.kind), row.grpc_name) << to_string(row.kind);
    EXPECT_EQ(http_status(row.kind), row.http) << to_string(row.kind);
    codes.insert(grpc_code(row.kind));
  }
  EXPECT_EQ(codes.size(), std::size(kRows)) << "one gRPC code per kind";
}

}  // namespace
}  // namespace tensorhub
