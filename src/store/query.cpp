#include "query.h"

#include <regex>

#include "tensorhub/core/error.h"

namespace tensorhub::sql {

void validate_field_name(const std::string& field) {
  static const std::regex kField(R"([A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*)");
  if (field.size() > 200 || !std::regex_match(field, kField))
    throw InvalidArgument("field name \"" + field +
                          "\" is not allowed: use letters, digits and _ (dots for nested fields)");
}

Value to_value(const Json& v, const std::string& field) {
  if (v.is_null()) return nullptr;
  if (v.is_boolean()) return static_cast<std::int64_t>(v.get<bool>() ? 1 : 0);
  if (v.is_number_integer()) return v.get<std::int64_t>();
  if (v.is_number_float()) return v.get<double>();
  if (v.is_string()) return v.get<std::string>();
  throw InvalidArgument("filter on \"" + field + "\": cannot compare with " + v.dump() +
                        "; use a number, string, boolean or null");
}

namespace {

// The parameter for `operand` compared with `f`: JSON text for jsonb fields.
Value param_for(const Field& f, const Json& operand, const std::string& field) {
  if (f.json) {
    to_value(operand, field);  // same checks: scalars only
    return operand.dump();
  }
  return to_value(operand, field);
}

void add_comparison(const Field& f, const std::string& field, const std::string& op,
                    const Json& operand, Clause& out, std::vector<std::string>& terms) {
  const std::string& expr = f.expr;
  // A JSON null stored in a jsonb field is a value, not SQL NULL; treat both as null.
  const std::string is_null = f.json ? "(" + expr + " IS NULL OR " + expr + " = 'null'::jsonb)" : expr + " IS NULL";
  static const std::vector<std::pair<std::string, std::string>> kBinary = {
      {"$gt", ">"}, {"$gte", ">="}, {"$lt", "<"}, {"$lte", "<="}};
  if (op == "$eq") {
    if (operand.is_null()) {
      terms.push_back(is_null);
    } else {
      terms.push_back(expr + " = ?");
      out.params.push_back(param_for(f, operand, field));
    }
    return;
  }
  if (op == "$ne") {
    if (operand.is_null()) {
      terms.push_back("NOT " + is_null);
    } else {
      terms.push_back("(" + expr + " IS NULL OR " + expr + " <> ?)");
      out.params.push_back(param_for(f, operand, field));
    }
    return;
  }
  for (const auto& [name, sql_op] : kBinary) {
    if (op == name) {
      if (operand.is_null()) throw InvalidArgument("filter on \"" + field + "\": " + op + " needs a value, not null");
      terms.push_back(expr + " " + sql_op + " ?");
      out.params.push_back(param_for(f, operand, field));
      return;
    }
  }
  if (op == "$in") {
    if (!operand.is_array()) throw InvalidArgument("filter on \"" + field + "\": $in needs an array");
    if (operand.empty()) {
      terms.push_back("0 = 1");
      return;
    }
    std::string list;
    for (const auto& v : operand) {
      list += list.empty() ? "?" : ", ?";
      out.params.push_back(param_for(f, v, field));
    }
    terms.push_back(expr + " IN (" + list + ")");
    return;
  }
  if (op == "$exists") {
    if (!operand.is_boolean()) throw InvalidArgument("filter on \"" + field + "\": $exists needs true or false");
    terms.push_back(expr + (operand.get<bool>() ? " IS NOT NULL" : " IS NULL"));
    return;
  }
  throw InvalidArgument("filter on \"" + field + "\": unknown operator \"" + op +
                        "\"; allowed: $eq $ne $gt $gte $lt $lte $in $exists");
}

}  // namespace

Clause where_clause(const Json& filter, const FieldResolver& resolve) {
  Clause out;
  if (filter.is_null() || (filter.is_object() && filter.empty())) {
    out.sql = "1=1";
    return out;
  }
  if (!filter.is_object())
    throw InvalidArgument("filter must be a JSON object such as {\"test_accuracy\": {\"$gte\": 0.8}}, got " +
                          filter.dump());
  std::vector<std::string> terms;
  for (auto it = filter.begin(); it != filter.end(); ++it) {
    const std::string& field = it.key();
    validate_field_name(field);
    const Field f = resolve(field);
    const Json& cond = it.value();
    const bool is_operator_object =
        cond.is_object() && !cond.empty() && cond.begin().key().starts_with("$");
    if (is_operator_object) {
      for (auto op = cond.begin(); op != cond.end(); ++op)
        add_comparison(f, field, op.key(), op.value(), out, terms);
    } else {
      add_comparison(f, field, "$eq", cond, out, terms);
    }
  }
  out.sql = "(";
  for (std::size_t i = 0; i < terms.size(); ++i) out.sql += (i ? " AND " : "") + terms[i];
  out.sql += ")";
  return out;
}

std::string order_by(const SortSpec& sort, const FieldResolver& resolve,
                     const std::string& tiebreak) {
  std::string out;
  for (const auto& [field, direction] : sort) {
    validate_field_name(field);
    if (direction != 1 && direction != -1)
      throw InvalidArgument("sort direction for \"" + field + "\" must be 1 or -1, got " +
                            std::to_string(direction));
    // NULLs (missing fields) sort as smallest in both SQLite and, with this clause, PostgreSQL.
    out += resolve(field).expr + (direction == 1 ? " ASC NULLS FIRST, " : " DESC NULLS LAST, ");
  }
  return out + tiebreak;
}

std::string numbered_placeholders(const std::string& sql) {
  std::string out;
  int n = 0;
  for (char c : sql) {
    if (c == '?') out += "$" + std::to_string(++n);
    else out += c;
  }
  return out;
}

}  // namespace tensorhub::sql
