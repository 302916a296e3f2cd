// The Error type: each kind's name and constructor (the servers' codes for the kinds:
// serve_status_codes_test.cpp).
#include <gtest/gtest.h>

#include <string>

#include "tensorhub/core/error.h"

namespace tensorhub {
namespace {

struct KindRow {
  ErrorKind kind;
  const char* name;  // to_string
};

const KindRow kRows[] = {
    {ErrorKind::kInvalidArgument, "InvalidArgument"}, {ErrorKind::kDeadlineExceeded, "DeadlineExceeded"},
    {ErrorKind::kNotFound, "NotFound"},               {ErrorKind::kAlreadyExists, "AlreadyExists"},
    {ErrorKind::kFailedPrecondition, "FailedPrecondition"}, {ErrorKind::kInternal, "Internal"},
    {ErrorKind::kUnavailable, "Unavailable"},         {ErrorKind::kDataLoss, "DataLoss"},
};

TEST(ErrorKinds, HaveTheirNames) {
  for (const auto& row : kRows) EXPECT_EQ(to_string(row.kind), row.name);
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
