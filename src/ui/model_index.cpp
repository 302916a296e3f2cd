// ModelIndex: the project's models in memory, sorted here in the store's order.
#include "model_index.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <regex>

#include "tensorhub/core/error.h"

namespace tensorhub {
namespace {

// One document's value of one sort key, in SortSpec's order: its type's rank, then the value.
struct Key {
  int rank = 0;  // missing and null 0, NaN 1, numbers 2, strings 3, objects 4, arrays 5, booleans 6
  double number = 0;
  const std::string* text = nullptr;
  bool boolean = false;
};

Key key_of(const Json* v) {
  Key k;
  if (!v || v->is_null()) return k;
  if (v->is_number()) {
    k.number = v->get<double>();
    k.rank = std::isnan(k.number) ? 1 : 2;
  } else if (v->is_string()) {
    k.rank = 3;
    k.text = v->get_ptr<const std::string*>();
  } else if (v->is_object()) {
    k.rank = 4;
  } else if (v->is_array()) {
    k.rank = 5;
  } else if (v->is_boolean()) {
    k.rank = 6;
    k.boolean = v->get<bool>();
  }
  return k;
}

// <0, 0, >0 as a sorts before, with, after b (ascending). Objects and arrays tie, as NaNs do.
int compare(const Key& a, const Key& b) {
  if (a.rank != b.rank) return a.rank < b.rank ? -1 : 1;
  switch (a.rank) {
    case 2: return a.number < b.number ? -1 : (a.number > b.number ? 1 : 0);
    case 3: return a.text->compare(*b.text) < 0 ? -1 : (*a.text == *b.text ? 0 : 1);  // bytewise
    case 6: return static_cast<int>(a.boolean) - static_cast<int>(b.boolean);
    default: return 0;
  }
}

bool is_column(const std::string& field) { return field == "id" || field == "time" || field == "project_name"; }

// The value of a column the store keeps beside the tags (document_field in src/store).
Json column_value(const Document& d, const std::string& field) {
  if (field == "id") return d.id;
  if (field == "time") return d.time;
  return d.project_name;
}

// The value a dotted path names in the tags; missing (nullptr) when a step is not an object.
const Json* tag_value(const Document& d, const std::string& field) {
  const Json* at = &d.tags;
  std::size_t begin = 0;
  for (;;) {
    const std::size_t dot = field.find('.', begin);
    const std::string step = field.substr(begin, dot == std::string::npos ? std::string::npos : dot - begin);
    if (!at->is_object()) return nullptr;
    const auto it = at->find(step);
    if (it == at->end()) return nullptr;
    at = &*it;
    if (dot == std::string::npos) return at;
    begin = dot + 1;
  }
}

// The store's rule for field names (src/store/query.cpp's validate_field_name), so that a sort
// the database would refuse is refused here too, with its message.
void check_field(const std::string& field) {
  static const std::regex kField(R"([A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*)");
  if (field.size() > 200 || !std::regex_match(field, kField))
    throw InvalidArgument("field name \"" + field + "\" is not allowed: use letters, digits and _ (dots for nested fields)");
}

}  // namespace

void ModelIndex::refresh(Hub& hub) {
  const std::int64_t max_id = docs_.empty() ? 0 : docs_.back().id;
  for (auto& d : hub.find_models({{"id", {{"$gt", max_id}}}}, {{"id", 1}})) docs_.push_back(std::move(d));
  // Fewer (a deletion) or more (a model stored between the two queries): read them all again.
  if (hub.count_documents(Collection::kModels) != static_cast<std::int64_t>(docs_.size()))
    docs_ = hub.find_models({}, {{"id", 1}});
}

std::size_t ModelIndex::size() const {
  MutexLock lock(mutex_);
  return docs_.size();
}

std::pair<std::vector<Document>, std::int64_t> ModelIndex::first(Hub& hub, const SortSpec& given, std::int64_t count,
                                                             bool absent_last) {
  // The store's order (hub.cpp's or_newest): the given keys, then newest first (time, then id,
  // descending) for documents that tie on all of them, unless time or id is among them.
  SortSpec sort = given;
  for (const char* column : {"time", "id"})
    if (std::none_of(given.begin(), given.end(), [&](const auto& k) { return k.first == column; }))
      sort.emplace_back(column, -1);
  for (const auto& [field, direction] : sort) {
    check_field(field);
    if (direction != 1 && direction != -1)
      throw InvalidArgument("sort direction for \"" + field + "\" must be 1 or -1, got " + std::to_string(direction));
  }
  MutexLock lock(mutex_);
  refresh(hub);
  // Each document's keys once (n x keys lookups), then a partial sort of indices.
  const std::size_t n = docs_.size(), width = sort.size();
  std::vector<Json> columns;  // id, time and project_name values, kept alive for their keys
  columns.reserve(n * width);
  std::vector<Key> keys(n * width);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < width; ++j) {
      const std::string& field = sort[j].first;
      if (is_column(field)) columns.push_back(column_value(docs_[i], field));  // reserved: no reallocation
      keys[i * width + j] = key_of(is_column(field) ? &columns.back() : tag_value(docs_[i], field));
    }
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  // The comparison runs under this lock, but the analysis checks a lambda as a function of its
  // own, holding none: it reads the documents through a pointer taken here.
  const Document* const docs = docs_.data();
  const auto less = [&](std::size_t a, std::size_t b) {
    for (std::size_t j = 0; j < width; ++j) {
      const Key& ka = keys[a * width + j];
      const Key& kb = keys[b * width + j];
      if (absent_last && (ka.rank <= 1 || kb.rank <= 1)) {  // NaN (1), null or missing (0)
        if (ka.rank <= 1 && kb.rank <= 1) {
          if (ka.rank != kb.rank) return ka.rank > kb.rank;  // NaN before missing
          continue;
        }
        return kb.rank <= 1;  // a value before an absent one, whatever the direction
      }
      const int c = compare(ka, kb) * sort[j].second;
      if (c != 0) return c < 0;
    }
    return docs[a].id < docs[b].id;  // unreached: sort holds id
  };
  const std::size_t k = std::min<std::size_t>(n, static_cast<std::size_t>(std::max<std::int64_t>(count, 0)));
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(), less);
  std::vector<Document> out;
  out.reserve(k);
  for (std::size_t i = 0; i < k; ++i) out.push_back(docs_[order[i]]);
  return {std::move(out), static_cast<std::int64_t>(n)};
}

}  // namespace tensorhub
