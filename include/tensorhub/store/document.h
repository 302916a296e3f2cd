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

/// Non-finite numbers. JSON has no NaN or Infinity (nlohmann::json writes them as null), yet a
/// diverged loss is NaN and a metric can be +/-Inf: the fact must survive. Wherever tensorhub
/// writes JSON that leaves the process (the database, Document/Task::to_json and so `--json`
/// output, result files) a non-finite double is written in MongoDB Extended JSON's form, which
/// every JSON parser accepts:
///   NaN -> {"$numberDouble": "NaN"}, +Inf -> {"$numberDouble": "Infinity"},
///   -Inf -> {"$numberDouble": "-Infinity"}
/// and read back as the double. In memory (Document::tags, Task::result, ...) they are plain
/// doubles. An object of exactly that shape given by a caller reads back as the double too
/// (as in MongoDB); other "$numberDouble" objects stay objects. Filters accept either form,
/// e.g. {"loss": {"$numberDouble": "NaN"}} from the command line.

/// `value` with every non-finite double replaced by its {"$numberDouble": ...} object, at any depth.
Json encode_non_finite(const Json& value);
/// The inverse: every {"$numberDouble": "NaN" | "Infinity" | "-Infinity"} object, at any
/// depth, becomes the double. Everything else is returned as it is.
Json decode_non_finite(const Json& value);

/// Sort keys in TensorHub's shape: {{"test_accuracy", -1}, {"time", -1}}; 1 ascending,
/// -1 descending. Values of different types sort in MongoDB's order: missing and null first,
/// then numbers (NaN < -Infinity < finite numbers < +Infinity; integers and floats together),
/// strings (by their UTF-8 bytes), objects, arrays, booleans (false < true). So sorting by a
/// metric descending puts every number before NaN, and NaN before documents lacking it.
/// Arrays sort as a whole, after objects (MongoDB would sort them by their least / greatest
/// element); objects and arrays tie among themselves (then the next key decides).
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

  /// {"id":..,"project_name":..,"time":"<ISO 8601>", ...tags, "parts": {...}} for display and
  /// `--json`; non-finite numbers in their {"$numberDouble": ...} form (encode_non_finite).
  Json to_json() const;
};

}  // namespace tensorhub
