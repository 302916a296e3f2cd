// The state of one servable version, as TF Serving's ServableState
// (tensorflow_serving/core/servable_state.h) and GET /v1/models/{name} report it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "tensorhub/core/error.h"

namespace tensorhub {

/// TF Serving's ServableState::ManagerState names. A version goes START -> LOADING ->
/// AVAILABLE -> UNLOADING -> END; a failed load goes LOADING -> END with an error, and is
/// retried (END -> LOADING) while its source still lists it.
enum class ServableState { kStart, kLoading, kAvailable, kUnloading, kEnd };

/// "START", "LOADING", "AVAILABLE", "UNLOADING", "END".
std::string to_string(ServableState state);

/// One version's state, as GET /v1/models/{name} reports it.
struct VersionStatus {
  std::int64_t version = 0;
  ServableState state = ServableState::kStart;
  /// The last load error ("" when the last load succeeded). Kept while a failed version is
  /// retried, so that a version in LOADING or END says why it is not AVAILABLE yet.
  std::string error;
  /// The kind of that error (nullopt when there is none, or when it was no tensorhub Error:
  /// a library's exception), so that the status names it in error_code as TF Serving does.
  std::optional<ErrorKind> error_kind;
};

}  // namespace tensorhub
