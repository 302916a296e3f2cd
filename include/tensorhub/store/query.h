// Translates TensorHub-style filters and sorts into SQL, with every value bound as a
// parameter and every field name validated: nothing from the caller is pasted into SQL
// except field names that match [A-Za-z_][A-Za-z0-9_]* (dot-separated for nested fields).
// Both backends and queue/'s TaskQueue get their filter SQL from here, so a filter selects the same documents on SQLite
// as on PostgreSQL: the documents MongoDB would select (tests/store_hub_test.cpp holds the
// conformance table, worked out from MongoDB's manual).
//
// Filter grammar (MongoDB's query language, the part TensorHub users write):
//   {"model_name": "mlp", "test_accuracy": {"$gte": 0.8}, "name": {"$in": ["a", "b"]}}
//   field operators: $eq $ne $gt $gte $lt $lte $in $nin $exists $not; a bare value means $eq.
//   top-level operators: $and $or $nor, each with a non-empty array of filters.
// Meaning, as in MongoDB:
//   - Type bracketing: $eq/$gt/$gte/$lt/$lte match only values of the operand's type class:
//     numbers with numbers (integers and floats together, exactly), strings with strings
//     (compared by their UTF-8 bytes), booleans with booleans (false < true). {"name":
//     {"$gte": 5}} matches no string.
//   - NaN and +/-Infinity are numbers (stored as {"$numberDouble": ...}, see document.h):
//     -Inf < finite < +Inf; NaN equals NaN ($eq, $gte, $lte) and is neither greater nor
//     less than anything.
//   - null: {"f": null} ($eq, $gte, $lte, or null in $in) matches documents where f is null
//     or missing; $gt/$lt null match nothing.
//   - $ne / $nin are the negations of $eq / $in: they match missing fields and other types.
//   - $exists true matches a present field, null included.
//   - Arrays: a comparison on an array field matches if the array's value or any of its
//     elements matches ({"tags": "a"} matches {"tags": ["a", "b"]}); each operator may be
//     satisfied by a different element ({"$gt": 2, "$lt": 2} matches [1, 3]), as in MongoDB.
// Left out (InvalidArgument where they would be written):
//   - operands that are objects or arrays ({"f": {"a": 1}}, {"f": [1, 2]}, whole-array or
//     whole-object equality); $in/$nin lists of scalars only;
//   - dotted paths through arrays ("a.b" where a is an array of objects, "a.0");
//   - $regex, $type, $size, $all, $elemMatch, $mod, $where, $expr and every other operator;
//   - sorting arrays by their least / greatest element (they sort after objects, see SortSpec).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tensorhub/store/document.h"
#include "tensorhub/store/sql.h"

namespace tensorhub::sql {

/// A SQL fragment with its "?" placeholders' values, in order.
struct Clause {
  std::string sql;
  std::vector<Value> params;
};

/// Where a field lives: inside a JSON column (at a dotted path), or in a plain column of
/// numbers or strings (never null).
struct Field {
  enum class Type { kJson, kNumberColumn, kStringColumn };
  Type type = Type::kJson;
  std::string column;  ///< the column's name (a JSON column for kJson)
  std::string path;    ///< kJson: the validated dotted path inside it, e.g. "cfg.lr"
};

/// Maps a validated field name to where it lives.
using FieldResolver = std::function<Field(const std::string& field)>;

/// Throws InvalidArgument unless `field` is a safe (dotted) identifier.
void validate_field_name(const std::string& field);

/// "(... AND ...)" for a filter object; "1=1" when the filter is empty or null. The SQL
/// is two-valued (never SQL NULL), so it can be negated. Throws InvalidArgument, naming the
/// operator or field, for an unknown operator, a non-object filter, an operator object mixed
/// with plain keys, or an operand the operator does not take.
Clause where_clause(const Json& filter, Dialect dialect, const FieldResolver& resolve);

/// "ORDER BY"-list text (without the words ORDER BY) for `sort` in SortSpec's type order,
/// ending with `tiebreak`. Throws InvalidArgument for a direction other than 1 or -1.
std::string order_by(const SortSpec& sort, Dialect dialect, const FieldResolver& resolve,
                     const std::string& tiebreak);

/// Rewrites "?" placeholders to PostgreSQL's "$1", "$2", ... (field names are validated, so
/// no "?" can come from a caller's text, and the SQL written here contains no other "?").
std::string numbered_placeholders(const std::string& sql);

}  // namespace tensorhub::sql
