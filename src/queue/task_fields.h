// Where filter and sort fields live in the tasks table, the same for both backends.
#pragma once

#include <string>

#include "tensorhub/store/query.h"

namespace tensorhub::detail {

/// A tasks-table field: its columns; "hyper_parameters.x", "result.x", "tags.x", "spec.x"
/// inside those JSON columns; any other name inside the tags.
inline sql::Field task_field(const std::string& field) {
  using T = sql::Field::Type;
  for (const char* c : {"id", "time", "priority", "attempt", "failures", "max_attempts", "timeout_s",
                        "lease_expires", "started_at", "finished_at"})
    if (field == c) return {T::kNumberColumn, field, ""};
  for (const char* c : {"project_name", "task_name", "command", "status", "lease_owner", "error", "script_name",
                        "script_sha256", "python"})
    if (field == c) return {T::kStringColumn, field, ""};
  for (const char* json_column : {"hyper_parameters", "result", "tags", "spec"}) {
    const std::string prefix = std::string(json_column) + ".";
    if (field.starts_with(prefix)) return {T::kJson, json_column, field.substr(prefix.size())};
  }
  return {T::kJson, "tags", field};
}

}  // namespace tensorhub::detail
