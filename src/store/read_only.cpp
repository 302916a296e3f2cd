#include "read_only.h"

#include "tensorhub/core/error.h"
#include "tensorhub/store/backend.h"

namespace tensorhub {
namespace {

constexpr std::string_view kPrefix = "the hub ";
constexpr std::string_view kMark = " is read-only (";

}  // namespace

bool is_read_only_error(const Error& e) noexcept {
  const std::string& m = e.message();
  return e.kind() == ErrorKind::kFailedPrecondition && m.starts_with(kPrefix) && m.find(kMark) != std::string::npos &&
         m.ends_with(detail::kReadOnlyAdvice);
}

namespace detail {

void throw_read_only(const std::string& display_uri, const std::string& why) {
  throw FailedPrecondition(std::string(kPrefix) + display_uri + std::string(kMark) + why + "): " + kReadOnlyAdvice);
}

std::string older_schema_advice(const std::string& display_uri) {
  // hub init opens the hub for writing, which migrates it, and leaves its data as they are.
  return "a reader cannot bring it forward: run `tensorhub hub init --hub " + display_uri +
         "` once as a user who may write the hub (it brings an existing hub up to date and changes nothing "
         "else), then read it again; or read it with the tensorhub that wrote it";
}

}  // namespace detail
}  // namespace tensorhub
