// Documents: the rows of the hub's collections (datasets, models, logs), in TensorHub's
// shape: an id, the project, the time, and free-form JSON tags given by the caller.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tensorhub/core/json.h"

namespace tensorhub {

/// Sort keys in TensorHub's shape: {{"test_accuracy", -1}, {"time", -1}}; 1 ascending,
/// -1 descending. Documents lacking a field sort as if it were smaller than any value.
using SortSpec = std::vector<std::pair<std::string, int>>;

/// Parses "test_accuracy:-1,time:1" into a SortSpec; a key without ":dir" is ascending.
/// Throws InvalidArgument for a direction other than 1 or -1.
SortSpec parse_sort(const std::string& text);

/// One stored document.
struct Document {
  std::int64_t id = 0;
  std::string project_name;
  std::int64_t time = 0;                      ///< UTC microseconds since the epoch
  Json tags = Json::object();                 ///< caller's fields, e.g. model_name, test_accuracy
  std::map<std::string, std::string> parts;   ///< part name (e.g. "weights.safetensors") -> blob SHA-256

  /// {"id":..,"project_name":..,"time":"<ISO 8601>", ...tags, "parts": {...}} for display.
  Json to_json() const;
};

}  // namespace tensorhub
