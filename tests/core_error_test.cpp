// The one mapping of error kinds to gRPC's canonical codes and names (grpc's
// status_code_enum.h) and to the HTTP codes of TF Serving's REST API, and the Error type.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "tensorhub/core/error.h"

namespace tensorhub {
namespace {

struct KindRow {
  ErrorKind kind;
  const char* name;       // to_string
  int grpc;               // grpc::StatusCode
  const char* grpc_name;  // grpc::StatusCode's name
  int http;               // TF Serving's REST API
};

// gRPC's numbers: OK 0, CANCELLED 1, UNKNOWN 2, INVALID_ARGUMENT 3, DEADLINE_EXCEEDED 4,
// NOT_FOUND 5, ALREADY_EXISTS 6, PERMISSION_DENIED 7, RESOURCE_EXHAUSTED 8,
// FAILED_PRECONDITION 9, ABORTED 10, OUT_OF_RANGE 11, UNIMPLEMENTED 12, INTERNAL 13,
// UNAVAILABLE 14, DATA_LOSS 15, UNAUTHENTICATED 16.
const KindRow kRows[] = {
    {ErrorKind::kInvalidArgument, "InvalidArgument", 3, "INVALID_ARGUMENT", 400},
    {ErrorKind::kDeadlineExceeded, "DeadlineExceeded", 4, "DEADLINE_EXCEEDED", 504},
    {ErrorKind::kNotFound, "NotFound", 5, "NOT_FOUND", 404},
    {ErrorKind::kAlreadyExists, "AlreadyExists", 6, "ALREADY_EXISTS", 409},
    {ErrorKind::kFailedPrecondition, "FailedPrecondition", 9, "FAILED_PRECONDITION", 400},
    {ErrorKind::kInternal, "Internal", 13, "INTERNAL", 500},
    {ErrorKind::kUnavailable, "Unavailable", 14, "UNAVAILABLE", 503},
    {ErrorKind::kDataLoss, "DataLoss", 15, "DATA_LOSS", 500},
};

TEST(ErrorKinds, MapToGrpcCodesNamesAndHttpStatuses) {
  std::set<int> codes;
  for (const auto& row : kRows) {
    EXPECT_EQ(to_string(row.kind), row.name);
    EXPECT_EQ(grpc_code(row.kind), row.grpc) << row.name;
    EXPECT_EQ(grpc_code_name(row.kind), row.grpc_name) << row.name;
    EXPECT_EQ(http_status(row.kind), row.http) << row.name;
    codes.insert(grpc_code(row.kind));
  }
  EXPECT_EQ(codes.size(), std::size(kRows)) << "one gRPC code per kind";
}

TEST(ErrorKinds, EachConstructorMakesItsKind) {
  const Error errors[] = {InvalidArgument("m"), DeadlineExceeded("m"), NotFound("m"),       AlreadyExists("m"),
                          FailedPrecondition("m"), Internal("m"),      Unavailable("m"),   DataLoss("m")};
  for (std::size_t i = 0; i < std::size(kRows); ++i) {
    EXPECT_EQ(errors[i].kind(), kRows[i].kind) << kRows[i].name;
    EXPECT_EQ(errors[i].message(), "m");
    EXPECT_EQ(std::string(errors[i].what()), std::string(kRows[i].name) + ": m");
  }
}

}  // namespace
}  // namespace tensorhub
