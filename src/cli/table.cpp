#include "table.h"

#include <algorithm>
#include <cstdio>
#include <iostream>

namespace tensorhub {

std::string cell_text(const nlohmann::json& v) {
  if (v.is_null()) return "";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", v.get<double>());
    return buf;
  }
  return v.dump();
}

void print_table(const std::vector<nlohmann::json>& rows, std::vector<std::string> columns,
                 std::size_t max_width) {
  if (rows.empty()) {
    std::cout << "(none)\n";
    return;
  }
  if (columns.empty()) {
    for (const auto& row : rows)
      for (auto it = row.begin(); it != row.end(); ++it)
        if (std::find(columns.begin(), columns.end(), it.key()) == columns.end()) columns.push_back(it.key());
  }
  std::vector<std::vector<std::string>> cells;
  std::vector<std::size_t> width(columns.size());
  for (std::size_t c = 0; c < columns.size(); ++c) width[c] = columns[c].size();
  for (const auto& row : rows) {
    std::vector<std::string> line;
    for (std::size_t c = 0; c < columns.size(); ++c) {
      std::string text = row.contains(columns[c]) ? cell_text(row[columns[c]]) : "";
      std::replace(text.begin(), text.end(), '\n', ' ');
      if (text.size() > max_width) text = text.substr(0, max_width - 3) + "...";
      width[c] = std::max(width[c], text.size());
      line.push_back(std::move(text));
    }
    cells.push_back(std::move(line));
  }
  auto print_line = [&](const std::vector<std::string>& line) {
    std::string out;
    for (std::size_t c = 0; c < line.size(); ++c) {
      out += line[c];
      if (c + 1 < line.size()) out += std::string(width[c] - line[c].size() + 2, ' ');
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    std::cout << out << '\n';
  };
  print_line(columns);
  for (const auto& line : cells) print_line(line);
}

}  // namespace tensorhub
