// libFuzzer target for the filter language (store/query.h): any bytes as a JSON filter,
// translated to SQL in both dialects (SQLite, PostgreSQL), with fields resolved to JSON paths
// and to plain number and string columns. No database: the translation is what is fuzzed. It
// either throws tensorhub::Error, or gives SQL in which only validated field names reached the
// resolver and every "?" has exactly one bound value. Object keys with integer values are also
// tried as a sort (order_by).
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "tensorhub/store/query.h"

using namespace tensorhub;

namespace {

// A resolver that insists on being handed validated names only, as query.h promises; "id"
// and "time" are number columns and "name" a string column, as in the backends.
sql::Field resolve(const std::string& field) {
  try {
    sql::validate_field_name(field);
  } catch (const Error&) {
    fuzz::fail("an unvalidated field name reached the resolver: " + field);
  }
  using T = sql::Field::Type;
  if (field == "id" || field == "time") return {T::kNumberColumn, field, ""};
  if (field == "name") return {T::kStringColumn, field, ""};
  return {T::kJson, "tags", field};
}

std::size_t count(const std::string& s, char c) {
  std::size_t n = 0;
  for (char x : s) n += x == c;
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const Json filter = Json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (filter.is_discarded()) return 0;
  for (sql::Dialect dialect : {sql::Dialect::kSqlite, sql::Dialect::kPostgres}) {
    fuzz::expect_clean([&] {
      const sql::Clause c = sql::where_clause(filter, dialect, resolve);
      if (count(c.sql, '?') != c.params.size())
        fuzz::fail(std::to_string(count(c.sql, '?')) + " placeholders for " + std::to_string(c.params.size()) +
                   " values in " + c.sql);
      const std::string numbered = sql::numbered_placeholders(c.sql);
      if (count(numbered, '?') != 0 || count(numbered, '$') < c.params.size())
        fuzz::fail("numbered_placeholders left a '?' or lost one: " + numbered);
    });
    if (!filter.is_object()) continue;
    SortSpec sort;
    for (const auto& [key, value] : filter.items())
      if (value.is_number_integer()) sort.emplace_back(key, value.get<int>());
    fuzz::expect_clean([&] {
      (void)sql::order_by(sort, dialect, resolve, "id ASC");
    });
  }
  return 0;
}
