#include "tensorhub/store/dataset_shards.h"

#include "tensorhub/store/lineage.h"

#include <cstdio>
#include <deque>

#include "tensorhub/core/error.h"

namespace tensorhub {
namespace {

// Keys of the layout; a caller's tags may not set them.
constexpr const char* kReservedTags[] = {"dataset_name", "format", "compression", "features", "records", "shards"};

// Throws DataLoss naming the document and what is wrong with its layout.
[[noreturn]] void bad_layout(const Document& d, const std::string& what) {
  throw DataLoss("dataset document " + std::to_string(d.id) + " is not a valid sharded dataset: " + what);
}

std::int64_t count_of(const Document& d, const Json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || !j.at(key).is_number_integer() || j.at(key).get<std::int64_t>() < 0)
    bad_layout(d, where + "\"" + key + "\" is not a count");
  return j.at(key).get<std::int64_t>();
}

std::string string_of(const Document& d, const Json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || !j.at(key).is_string()) bad_layout(d, where + "\"" + key + "\" is not a string");
  return j.at(key).get<std::string>();
}

DatasetShard shard_of(const Document& d, const Json& j, std::size_t index) {
  const std::string where = "shards[" + std::to_string(index) + "].";
  if (!j.is_object()) bad_layout(d, where + " is not an object");
  DatasetShard s;
  s.part = string_of(d, j, "part", where);
  s.file = string_of(d, j, "file", where);
  s.records = count_of(d, j, "records", where);
  s.bytes = static_cast<std::uint64_t>(count_of(d, j, "bytes", where));
  const auto it = d.parts.find(s.part);
  if (it == d.parts.end()) bad_layout(d, where + "part \"" + s.part + "\" is not among the document's parts");
  s.sha256 = it->second;
  return s;
}

}  // namespace

std::string shard_part_name(std::size_t index) {
  char name[32];
  std::snprintf(name, sizeof name, "shard-%05zu", index);
  return name;
}

void check_sharded_dataset_tags(const Json& tags) {
  if (tags.is_null()) return;
  if (!tags.is_object()) throw InvalidArgument("dataset tags must be a JSON object, got " + tags.dump());
  for (const char* key : kReservedTags)
    if (tags.contains(key))
      throw InvalidArgument(std::string("dataset tag \"") + key + "\" is reserved for the sharded dataset's layout");
}

std::int64_t save_sharded_dataset(Hub& hub, const std::string& dataset_name, const ShardedDatasetSpec& spec,
                                  const Json& tags) {
  if (spec.files.empty()) throw InvalidArgument("save_sharded_dataset: no files for dataset \"" + dataset_name + "\"");
  check_sharded_dataset_tags(tags);
  Json t = tags.is_null() ? Json::object() : tags;
  std::deque<FileBlobSource> sources;  // stable addresses for PartSources
  PartSources parts;
  Json shards = Json::array();
  std::int64_t records = 0;
  for (std::size_t i = 0; i < spec.files.size(); ++i) {
    const auto& f = spec.files[i];
    const auto& source = sources.emplace_back(f.path);
    parts[shard_part_name(i)] = &source;
    shards.push_back({{"part", shard_part_name(i)}, {"file", f.path.filename().string()}, {"records", f.records},
                      {"bytes", source.size()}});
    records += f.records;
  }
  t["dataset_name"] = dataset_name;
  t["format"] = spec.format;
  t["compression"] = spec.compression;
  if (!spec.features.is_null()) t["features"] = spec.features;
  t["records"] = records;
  t["shards"] = std::move(shards);
  return hub.save_document(Collection::kDatasets, t, parts);
}

bool is_sharded_dataset(const Document& document) { return document.tags.contains("shards"); }

ShardedDataset sharded_dataset_of(const Document& d) {
  ShardedDataset out;
  out.document = d;
  out.format = string_of(d, d.tags, "format", "");
  out.compression = string_of(d, d.tags, "compression", "");
  out.features = d.tags.contains("features") ? d.tags.at("features") : Json();
  const Json& shards = d.tags.contains("shards") ? d.tags.at("shards") : Json();
  if (!shards.is_array()) bad_layout(d, "\"shards\" is not an array");
  for (std::size_t i = 0; i < shards.size(); ++i) {
    out.shards.push_back(shard_of(d, shards[i], i));
    out.records += out.shards.back().records;
  }
  return out;
}

std::optional<ShardedDataset> find_sharded_dataset(Hub& hub, const std::string& dataset_name, const Json& filter,
                                                   const SortSpec& sort) {
  const auto docs =
      hub.find_datasets(with_name(filter, "dataset_name", dataset_name), sort.empty() ? SortSpec{{"time", -1}, {"id", -1}} : sort, 1);
  if (docs.empty()) return std::nullopt;
  if (!is_sharded_dataset(docs[0]))
    throw FailedPrecondition("dataset \"" + dataset_name + "\" (id " + std::to_string(docs[0].id) +
                             ") holds tensors, not shards: load it with Hub::find_top_dataset");
  note_dataset_read(docs[0]);  // a model saved later records it (lineage.h)
  return sharded_dataset_of(docs[0]);
}

}  // namespace tensorhub
