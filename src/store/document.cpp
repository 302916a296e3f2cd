#include "tensorhub/store/document.h"

#include "tensorhub/core/clock.h"
#include "tensorhub/core/error.h"
#include "tensorhub/store/backend.h"

namespace tensorhub {

SortSpec parse_sort(const std::string& text) {
  SortSpec out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? text.size() + 1 : comma + 1;
    if (item.empty()) continue;
    int direction = 1;
    if (const auto colon = item.rfind(':'); colon != std::string::npos) {
      const std::string dir = item.substr(colon + 1);
      if (dir == "1" || dir == "+1" || dir == "asc") direction = 1;
      else if (dir == "-1" || dir == "desc") direction = -1;
      else throw InvalidArgument("sort \"" + item + "\": direction must be 1 or -1 (asc or desc)");
      item = item.substr(0, colon);
    }
    out.emplace_back(item, direction);
  }
  return out;
}

Json Document::to_json() const {
  Json out = {{"id", id}, {"project_name", project_name}, {"time", format_time(time)}};
  for (auto it = tags.begin(); it != tags.end(); ++it) out[it.key()] = it.value();
  if (!parts.empty()) out["parts"] = parts;
  return encode_non_finite(out);
}

}  // namespace tensorhub
