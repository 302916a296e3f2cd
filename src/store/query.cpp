#include "tensorhub/store/query.h"

#include <cmath>
#include <regex>

#include "tensorhub/core/error.h"

namespace tensorhub::sql {
namespace {

constexpr const char* kFieldOperators = "$eq $ne $gt $gte $lt $lte $in $nin $exists $not";
constexpr const char* kTopOperators = "$and $or $nor";

// How the non-finite numbers' Extended JSON objects read when SQLite renders them (minified)
// and as PostgreSQL jsonb literals; stored_json.cpp writes them.
constexpr const char* kSqliteNaN = R"('{"$numberDouble":"NaN"}')";
constexpr const char* kSqliteInf = R"('{"$numberDouble":"Infinity"}')";
constexpr const char* kSqliteNegInf = R"('{"$numberDouble":"-Infinity"}')";
constexpr const char* kPgNaN = R"('{"$numberDouble": "NaN"}'::jsonb)";
constexpr const char* kPgInf = R"('{"$numberDouble": "Infinity"}'::jsonb)";
constexpr const char* kPgNegInf = R"('{"$numberDouble": "-Infinity"}'::jsonb)";

// A value as SQL sees it: expressions for its kind ('missing', 'null', 'nan', 'number',
// 'string', 'bool', 'object' or 'array') and, for each kind, its value. The value
// expressions are only meaningful where `kind` says so.
struct Node {
  std::string fixed_kind;  // a plain column's kind ("number" or "string"), known before the query runs
  std::string kind;
  std::string number;   // numbers, +/-Infinity included (SQLite REAL/INTEGER, PostgreSQL numeric)
  std::string text;     // strings, in byte order
  std::string boolean;  // booleans: SQLite 0/1, PostgreSQL boolean
};

// The comparison operators and their SQL.
const char* sql_operator(const std::string& op) {
  if (op == "$eq") return "=";
  if (op == "$gt") return ">";
  if (op == "$gte") return ">=";
  if (op == "$lt") return "<";
  if (op == "$lte") return "<=";
  return nullptr;
}

bool includes_equality(const std::string& op) { return op == "$eq" || op == "$gte" || op == "$lte"; }

bool is_nan(const Json& v) { return v.is_number_float() && std::isnan(v.get<double>()); }

// "a.b" -> "$.a.b" (SQLite) or "{a,b}" (PostgreSQL); the path is validated already.
std::string sqlite_path(const std::string& path) { return "'$." + path + "'"; }
std::string pg_path(const std::string& path) {
  std::string out = "'{";
  for (char c : path) out += c == '.' ? ',' : c;
  return out + "}'";
}

// SQLite: a JSON value given by its json_type() and its json_extract() / json_each value.
Node sqlite_node(const std::string& type, const std::string& value) {
  const std::string object = "CASE " + value + " WHEN " + kSqliteNaN + " THEN 'nan' WHEN " + kSqliteInf +
                             " THEN 'number' WHEN " + kSqliteNegInf + " THEN 'number' ELSE 'object' END";
  Node n;
  n.kind = "(CASE " + type +
           " WHEN 'integer' THEN 'number' WHEN 'real' THEN 'number' WHEN 'text' THEN 'string'"
           " WHEN 'true' THEN 'bool' WHEN 'false' THEN 'bool' WHEN 'null' THEN 'null' WHEN 'array' THEN 'array'"
           " WHEN 'object' THEN " + object + " ELSE 'missing' END)";
  // 9e999 is how SQLite writes infinity.
  n.number = "(CASE WHEN " + type + " IN ('integer', 'real') THEN " + value + " WHEN " + type +
             " = 'object' THEN (CASE " + value + " WHEN " + kSqliteInf + " THEN 9e999 WHEN " + kSqliteNegInf +
             " THEN -9e999 END) END)";
  n.text = value;
  n.boolean = "(" + type + " = 'true')";
  return n;
}

// PostgreSQL: a jsonb value (SQL NULL when missing).
Node pg_node(const std::string& j) {
  Node n;
  n.kind = "(CASE jsonb_typeof(" + j + ") WHEN 'number' THEN 'number' WHEN 'string' THEN 'string'"
           " WHEN 'boolean' THEN 'bool' WHEN 'null' THEN 'null' WHEN 'array' THEN 'array' WHEN 'object' THEN"
           " (CASE WHEN " + j + " = " + kPgNaN + " THEN 'nan' WHEN " + j + " IN (" + kPgInf + ", " + kPgNegInf +
           ") THEN 'number' ELSE 'object' END) ELSE 'missing' END)";
  n.number = "(CASE WHEN jsonb_typeof(" + j + ") = 'number' THEN (" + j + ")::numeric WHEN " + j + " = " + kPgInf +
             " THEN 'Infinity'::numeric WHEN " + j + " = " + kPgNegInf + " THEN '-Infinity'::numeric END)";
  n.text = "(" + j + " #>> '{}') COLLATE \"C\"";
  n.boolean = "(" + j + " = 'true'::jsonb)";
  return n;
}

// A plain column: its kind is fixed and it is never null.
Node column_node(const Field& f, Dialect dialect) {
  Node n;
  const bool number = f.type == Field::Type::kNumberColumn;
  n.fixed_kind = number ? "number" : "string";
  n.kind = "'" + n.fixed_kind + "'";
  n.number = f.column;
  n.text = dialect == Dialect::kPostgres && !number ? f.column + " COLLATE \"C\"" : f.column;
  n.boolean = "0";
  return n;
}

// Builds one WHERE clause; `params` receives the bound values in the order their "?"
// appear (every function appends its SQL and its values together, in order).
class Translator {
 public:
  Translator(Dialect dialect, const FieldResolver& resolve, std::vector<Value>& params)
      : dialect_(dialect), resolve_(resolve), params_(params) {}

  // A filter object: its terms ANDed; "1=1" when empty.
  std::string filter(const Json& f) {
    if (f.is_null() || (f.is_object() && f.empty())) return "1=1";
    if (!f.is_object())
      throw InvalidArgument("filter must be a JSON object such as {\"test_accuracy\": {\"$gte\": 0.8}}, got " +
                            f.dump());
    std::vector<std::string> terms;
    for (auto it = f.begin(); it != f.end(); ++it) {
      if (it.key().starts_with("$")) terms.push_back(logical(it.key(), it.value()));
      else terms.push_back(field_condition(it.key(), it.value()));
    }
    return join(terms, " AND ");
  }

  std::string order_key(const Field& f, const std::string& dir) {
    if (f.type != Field::Type::kJson) return column_node(f, dialect_).text + " " + dir;
    const Node n = field_node(f);
    // MongoDB's type order (SortSpec); NaN below every other number.
    const std::string rank = "(CASE " + n.kind +
                             " WHEN 'missing' THEN 0 WHEN 'null' THEN 0 WHEN 'nan' THEN 1 WHEN 'number' THEN 2"
                             " WHEN 'string' THEN 3 WHEN 'object' THEN 4 WHEN 'array' THEN 5 ELSE 6 END)";
    // Each value key only for its kind: objects and arrays tie (SortSpec).
    return rank + " " + dir + ", " + n.number + " " + dir + ", (CASE WHEN " + n.kind + " = 'string' THEN " + n.text +
           " END) " + dir + ", (CASE WHEN " + n.kind + " = 'bool' THEN " + n.boolean + " END) " + dir;
  }

 private:
  // $and / $or / $nor: a non-empty array of filters.
  std::string logical(const std::string& op, const Json& operand) {
    if (op != "$and" && op != "$or" && op != "$nor")
      throw InvalidArgument("unknown top-level operator \"" + op + "\"; allowed: " + kTopOperators +
                            " (field operators go inside a field: {\"field\": {\"$gt\": 1}})");
    if (!operand.is_array() || operand.empty())
      throw InvalidArgument(op + " needs a non-empty array of filters, e.g. {\"" + op +
                            "\": [{\"a\": 1}, {\"b\": 2}]}, got " + operand.dump());
    std::vector<std::string> parts;
    for (const auto& f : operand) {
      if (!f.is_object()) throw InvalidArgument(op + ": each entry must be a filter object, got " + f.dump());
      parts.push_back(filter(f));
    }
    const std::string any = join(parts, " OR ");
    if (op == "$and") return join(parts, " AND ");
    return op == "$or" ? any : "NOT " + any;
  }

  std::string field_condition(const std::string& name, const Json& cond) {
    validate_field_name(name);
    const Field f = resolve_(name);
    if (!is_operator_object(name, cond)) return operation(f, name, "$eq", cond);
    std::vector<std::string> terms;
    for (auto op = cond.begin(); op != cond.end(); ++op) terms.push_back(operation(f, name, op.key(), op.value()));
    return join(terms, " AND ");
  }

  // True for {"$gt": 1, ...}; throws for an object mixing operators and plain keys.
  static bool is_operator_object(const std::string& name, const Json& cond) {
    if (!cond.is_object() || cond.empty()) return false;
    std::string op, plain;
    for (auto it = cond.begin(); it != cond.end(); ++it) (it.key().starts_with("$") ? op : plain) = it.key();
    if (op.empty()) return false;
    if (!plain.empty())
      throw InvalidArgument("filter on \"" + name + "\": operator \"" + op + "\" and plain key \"" + plain +
                            "\" in one object; write operators only, e.g. {\"" + name + "\": {\"$gt\": 1}}");
    return true;
  }

  std::string operation(const Field& f, const std::string& name, const std::string& op, const Json& operand) {
    if (sql_operator(op)) {
      check_scalar(name, op, operand);
      return matching(f, [&](const Node& n) { return compare(n, op, operand); });
    }
    if (op == "$ne") return "NOT " + operation(f, name, "$eq", operand);
    if (op == "$in" || op == "$nin") {
      if (!operand.is_array())
        throw InvalidArgument("filter on \"" + name + "\": " + op + " needs an array, e.g. {\"" + op + "\": [1, 2]}");
      for (const auto& v : operand) check_scalar(name, op, v);
      const std::string in = operand.empty() ? "(0 = 1)" : matching(f, [&](const Node& n) { return any_of(n, operand); });
      return op == "$in" ? in : "NOT " + in;
    }
    if (op == "$exists") {
      if (!operand.is_boolean())
        throw InvalidArgument("filter on \"" + name + "\": $exists needs true or false, got " + operand.dump());
      return "(" + field_node(f).kind + (operand.get<bool>() ? " <> " : " = ") + "'missing')";
    }
    if (op == "$not") {
      if (!operand.is_object() || operand.empty() || !is_operator_object(name, operand))
        throw InvalidArgument("filter on \"" + name + "\": $not needs an object of operators, e.g. {\"$not\": "
                              "{\"$gt\": 1}}, got " + operand.dump());
      std::vector<std::string> terms;
      for (auto it = operand.begin(); it != operand.end(); ++it) terms.push_back(operation(f, name, it.key(), it.value()));
      return "NOT " + join(terms, " AND ");
    }
    throw InvalidArgument("filter on \"" + name + "\": unknown operator \"" + op + "\"; allowed: " + kFieldOperators);
  }

  static void check_scalar(const std::string& name, const std::string& op, const Json& v) {
    if (v.is_object() || v.is_array())
      throw InvalidArgument("filter on \"" + name + "\": " + op + " cannot compare with " + v.dump() +
                            "; use a number, string, boolean or null (objects and arrays are not supported)");
  }

  // `pred` on the field's value, or on any element when it is an array (MongoDB's rule).
  template <typename Pred>
  std::string matching(const Field& f, Pred&& pred) {
    if (f.type != Field::Type::kJson) return pred(column_node(f, dialect_));
    std::string sql = "(" + pred(field_node(f));
    const std::string alias = "e" + std::to_string(++aliases_);
    if (dialect_ == Dialect::kSqlite) {
      const std::string source = f.column + ", " + sqlite_path(f.path);
      sql += " OR (json_type(" + source + ") = 'array' AND EXISTS (SELECT 1 FROM json_each(" + source + ") AS " +
             alias + " WHERE " + pred(sqlite_node(alias + ".type", alias + ".value")) + "))";
    } else {
      const std::string j = pg_json(f);
      sql += " OR EXISTS (SELECT 1 FROM jsonb_array_elements(CASE WHEN jsonb_typeof(" + j + ") = 'array' THEN " + j +
             " END) AS " + alias + "(v) WHERE " + pred(pg_node(alias + ".v")) + ")";
    }
    return sql + ")";
  }

  // One value against one operand, with type bracketing.
  std::string compare(const Node& n, const std::string& op, const Json& x) {
    // A column of another type is never compared (PostgreSQL would refuse the SQL).
    if (!n.fixed_kind.empty() && n.fixed_kind != (x.is_string() ? "string" : x.is_number() && !is_nan(x) ? "number" : ""))
      return "(0 = 1)";
    if (x.is_null()) return includes_equality(op) ? "(" + n.kind + " IN ('missing', 'null'))" : "(0 = 1)";
    if (is_nan(x)) return includes_equality(op) ? "(" + n.kind + " = 'nan')" : "(0 = 1)";
    const std::string sql_op = sql_operator(op);
    if (x.is_boolean()) {
      const std::string literal = dialect_ == Dialect::kPostgres ? (x.get<bool>() ? "TRUE" : "FALSE")
                                                                 : (x.get<bool>() ? "1" : "0");
      return "(" + n.kind + " = 'bool' AND " + n.boolean + " " + sql_op + " " + literal + ")";
    }
    if (x.is_string()) return "(" + n.kind + " = 'string' AND " + n.text + " " + sql_op + " " + bind_string(x) + ")";
    return "(" + n.kind + " = 'number' AND " + n.number + " " + sql_op + " " + bind_number(x) + ")";
  }

  // $in: equal to any of `values` (null also matching a missing field).
  std::string any_of(const Node& n, const Json& values) {
    std::vector<std::string> terms;
    std::vector<const Json*> numbers, strings;
    for (const auto& v : values) {
      if (v.is_null() || is_nan(v) || v.is_boolean()) terms.push_back(compare(n, "$eq", v));
      else (v.is_string() ? strings : numbers).push_back(&v);
    }
    // Bound in the order their "?" appear: the numbers' list, then the strings'.
    if (!numbers.empty() && (n.fixed_kind.empty() || n.fixed_kind == "number")) {
      std::string list;
      for (const Json* v : numbers) list += (list.empty() ? "" : ", ") + bind_number(*v);
      terms.push_back("(" + n.kind + " = 'number' AND " + n.number + " IN (" + list + "))");
    }
    if (!strings.empty() && (n.fixed_kind.empty() || n.fixed_kind == "string")) {
      std::string list;
      for (const Json* v : strings) list += (list.empty() ? "" : ", ") + bind_string(*v);
      terms.push_back("(" + n.kind + " = 'string' AND " + n.text + " IN (" + list + "))");
    }
    return terms.empty() ? "(0 = 1)" : join(terms, " OR ");
  }

  // A bound number: SQLite compares INTEGER and REAL exactly; PostgreSQL gets the shortest
  // text that reads back as the double, as numeric (exact against the stored JSON numbers).
  std::string bind_number(const Json& x) {
    if (dialect_ == Dialect::kSqlite) {
      if (x.is_number_integer() && !(x.is_number_unsigned() && x.get<std::uint64_t>() > INT64_MAX))
        params_.emplace_back(std::in_place_type<std::int64_t>, x.get<std::int64_t>());
      else
        params_.emplace_back(std::in_place_type<double>, x.get<double>());
      return "?";
    }
    const bool finite = !x.is_number_float() || std::isfinite(x.get<double>());
    params_.emplace_back(std::in_place_type<std::string>,
                         finite ? x.dump() : std::string(x.get<double>() > 0 ? "Infinity" : "-Infinity"));
    return "?::numeric";
  }

  std::string bind_string(const Json& x) {
    params_.emplace_back(std::in_place_type<std::string>, x.get<std::string>());
    return dialect_ == Dialect::kPostgres ? "?::text" : "?";
  }

  std::string pg_json(const Field& f) const { return "(" + f.column + " #> " + pg_path(f.path) + ")"; }

 public:
  Node field_node(const Field& f) const {
    if (f.type != Field::Type::kJson) return column_node(f, dialect_);
    if (dialect_ == Dialect::kPostgres) return pg_node(pg_json(f));
    const std::string source = f.column + ", " + sqlite_path(f.path);
    return sqlite_node("json_type(" + source + ")", "json_extract(" + source + ")");
  }

 private:
  static std::string join(const std::vector<std::string>& terms, const char* sep) {
    std::string out = "(";
    for (std::size_t i = 0; i < terms.size(); ++i) out += (i ? sep : "") + terms[i];
    return out + ")";
  }

  Dialect dialect_;
  const FieldResolver& resolve_;
  std::vector<Value>& params_;
  int aliases_ = 0;
};

}  // namespace

void validate_field_name(const std::string& field) {
  static const std::regex kField(R"([A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*)");
  if (field.size() > 200 || !std::regex_match(field, kField))
    throw InvalidArgument("field name \"" + field +
                          "\" is not allowed: use letters, digits and _ (dots for nested fields)");
}

Clause where_clause(const Json& filter, Dialect dialect, const FieldResolver& resolve) {
  Clause out;
  Translator t(dialect, resolve, out.params);
  // Operands may spell NaN and +/-Infinity as Extended JSON (JSON text has no other way).
  out.sql = t.filter(decode_non_finite(filter));
  return out;
}

std::string order_by(const SortSpec& sort, Dialect dialect, const FieldResolver& resolve,
                     const std::string& tiebreak) {
  std::vector<Value> unused;
  Translator t(dialect, resolve, unused);
  std::string out;
  for (const auto& [field, direction] : sort) {
    validate_field_name(field);
    if (direction != 1 && direction != -1)
      throw InvalidArgument("sort direction for \"" + field + "\" must be 1 or -1, got " +
                            std::to_string(direction));
    out += t.order_key(resolve(field), direction == 1 ? "ASC" : "DESC") + ", ";
  }
  return out + tiebreak;
}

std::string numbered_placeholders(const std::string& sql) {
  std::string out;
  int n = 0;
  for (char c : sql) {
    if (c == '?') {
      out += '$';
      out += std::to_string(++n);
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace tensorhub::sql
