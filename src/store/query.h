// Translates TensorHub-style filters and sorts into SQL, with every value bound as a
// parameter and every field name validated: nothing from the caller is pasted into SQL
// except field names that match [A-Za-z_][A-Za-z0-9_]* (dot-separated for nested fields).
//
// Filter grammar (MongoDB's query operators, the subset TensorHub users write):
//   {"model_name": "mlp", "test_accuracy": {"$gte": 0.8}, "name": {"$in": ["a", "b"]}}
//   operators: $eq $ne $gt $gte $lt $lte $in $exists; a bare value means $eq.
//   $ne also matches documents that lack the field, as in MongoDB.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "tensorhub/store/document.h"

namespace tensorhub::sql {

/// A value bound to a "?" placeholder.
using Value = std::variant<std::nullptr_t, std::int64_t, double, std::string>;

/// A SQL fragment with its "?" placeholders' values, in order.
struct Clause {
  std::string sql;
  std::vector<Value> params;
};

/// A field as SQL sees it: an expression, and whether it is a JSON value (PostgreSQL's
/// jsonb, compared with JSON-encoded parameters) or a plain SQL value (a column, or
/// SQLite's json_extract, which yields SQL scalars).
struct Field {
  std::string expr;
  bool json = false;
};

/// Maps a validated field name to its SQL expression.
using FieldResolver = std::function<Field(const std::string& field)>;

/// Throws InvalidArgument unless `field` is a safe (dotted) identifier.
void validate_field_name(const std::string& field);

/// "(... AND ...)" for a filter object; "1=1" when the filter is empty or null.
/// Throws InvalidArgument for an unknown operator, a non-object filter, or a value that
/// cannot be compared (an object or array outside $in).
Clause where_clause(const Json& filter, const FieldResolver& resolve);

/// "ORDER BY a DESC, b ASC, id ASC"-style text (without the leading "ORDER BY"), ending
/// with `tiebreak`. Throws InvalidArgument for a direction other than 1 or -1.
std::string order_by(const SortSpec& sort, const FieldResolver& resolve,
                     const std::string& tiebreak);

/// JSON scalar -> bound value (bool -> 0/1). Throws InvalidArgument for objects/arrays.
Value to_value(const Json& v, const std::string& field);

/// Rewrites "?" placeholders to PostgreSQL's "$1", "$2", ... (field names are validated, so
/// no "?" can come from a caller's text).
std::string numbered_placeholders(const std::string& sql);

}  // namespace tensorhub::sql
