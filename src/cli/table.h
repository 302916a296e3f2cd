// Output of the list/show commands: an aligned text table or JSON.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tensorhub {

/// Prints `rows` (JSON objects) as a table with `columns` (empty: the union of the rows'
/// keys in order of appearance). Long values are cut to `max_width` characters.
void print_table(const std::vector<nlohmann::json>& rows, std::vector<std::string> columns = {},
                 std::size_t max_width = 40);

/// A cell's text: strings without quotes, numbers with up to 6 significant digits.
std::string cell_text(const nlohmann::json& value);

}  // namespace tensorhub
