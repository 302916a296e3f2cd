// Where filter and sort fields live in the documents table, the same for both backends.
#pragma once

#include <string>

#include "tensorhub/store/query.h"

namespace tensorhub {

/// A documents-table field: the columns id and time (numbers) and project_name (a string),
/// else a path inside the tags.
inline sql::Field document_field(const std::string& field) {
  using T = sql::Field::Type;
  if (field == "id" || field == "time") return {T::kNumberColumn, field, ""};
  if (field == "project_name") return {T::kStringColumn, field, ""};
  return {T::kJson, "tags", field};
}

}  // namespace tensorhub
