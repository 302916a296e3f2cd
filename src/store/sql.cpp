#include "tensorhub/store/sql.h"

#include <charconv>
#include <cstdio>

#include "tensorhub/core/error.h"

namespace tensorhub::sql {

const Value& Rows::cell(std::size_t row, std::size_t col) const {
  if (row >= rows_.size() || col >= rows_[row].size())
    throw Internal("SQL result: no cell (" + std::to_string(row) + ", " + std::to_string(col) + ") in " +
                   std::to_string(rows_.size()) + " rows");
  return rows_[row][col];
}

bool Rows::is_null(std::size_t row, std::size_t col) const {
  return std::holds_alternative<std::nullptr_t>(cell(row, col));
}

std::int64_t Rows::int64(std::size_t row, std::size_t col) const {
  const Value& v = cell(row, col);
  if (const auto* n = std::get_if<std::int64_t>(&v)) return *n;
  if (const auto* d = std::get_if<double>(&v)) return static_cast<std::int64_t>(*d);
  if (const auto* s = std::get_if<std::string>(&v)) {
    std::int64_t n = 0;
    const auto [end, ec] = std::from_chars(s->data(), s->data() + s->size(), n);
    if (ec == std::errc() && end == s->data() + s->size()) return n;
    throw Internal("SQL result: \"" + s->substr(0, 40) + "\" is not an integer");
  }
  return 0;  // NULL
}

double Rows::real(std::size_t row, std::size_t col) const {
  const Value& v = cell(row, col);
  if (const auto* d = std::get_if<double>(&v)) return *d;
  if (const auto* n = std::get_if<std::int64_t>(&v)) return static_cast<double>(*n);
  if (const auto* s = std::get_if<std::string>(&v)) {
    // strtod, not from_chars: PostgreSQL prints "Infinity" and "NaN", which strtod reads.
    char* end = nullptr;
    const double d = std::strtod(s->c_str(), &end);
    if (!s->empty() && end == s->c_str() + s->size()) return d;
    throw Internal("SQL result: \"" + s->substr(0, 40) + "\" is not a number");
  }
  return 0;
}

std::string Rows::text(std::size_t row, std::size_t col) const { return to_text(cell(row, col)); }

std::string to_text(const Value& v) {
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  if (const auto* n = std::get_if<std::int64_t>(&v)) return std::to_string(*n);
  if (const auto* d = std::get_if<double>(&v)) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", *d);  // repr-exact: reads back as the same double
    return buf;
  }
  return "";
}

}  // namespace tensorhub::sql
