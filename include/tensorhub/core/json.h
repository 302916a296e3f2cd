// tensorhub::Json: the one name for nlohmann::json across tensorhub (documents, configs,
// search spaces, tensors in requests), so no header spells the library's type its own way.
#pragma once

#include <nlohmann/json.hpp>

namespace tensorhub {

/// A JSON value (nlohmann::json: ordered by key, numbers as int64 / uint64 / double).
using Json = nlohmann::json;

}  // namespace tensorhub
