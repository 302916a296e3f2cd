#include "tensorhub/store/hub.h"

#include <algorithm>
#include <filesystem>

#include "postgres_backend.h"
#include "sqlite_backend.h"
#include "tensorhub/core/error.h"
#include "tensorhub/core/log.h"
#include "tensorhub/store/blob_cache.h"
#include "tensorhub/store/lineage.h"
#include "tensorhub/store/uri.h"

namespace tensorhub {
namespace {

constexpr const char* kTensorsPart = "tensors.safetensors";
constexpr const char* kModelJsonPart = "model.json";
constexpr const char* kWeightsPart = "weights.safetensors";

// The caller's sort, then newest first: documents that tie on every given key (or all lack
// it, as after a misspelled key) come newest first, not in insertion order, so that
// find_top_model("mlp", {}, {{"test_acuracy", -1}}) returns the latest model, not the oldest.
SortSpec or_newest(const SortSpec& sort) {
  SortSpec out = sort;
  const auto given = [&](const char* key) {
    return std::any_of(sort.begin(), sort.end(), [&](const auto& k) { return k.first == key; });
  };
  if (!given("time")) out.emplace_back("time", -1);
  if (!given("id")) out.emplace_back("id", -1);
  return out;
}

// Warns when the document find_top_* picked lacks a key it was sorted by: then no document of
// that name has it (a missing key sorts below every value, so a descending sort finds the
// others first) or it is the lowest in an ascending sort; usually the key is misspelled.
// Whether `tags` holds the dotted path `key` ("cfg.lr": tags.cfg.lr), as the sort reads it; a
// path through an array counts as held (MongoDB's paths into arrays are not followed here).
bool has_path(const Json& tags, const std::string& key) {
  const Json* at = &tags;
  for (std::size_t begin = 0;;) {
    if (at->is_array()) return true;
    const std::size_t dot = key.find('.', begin);
    const std::string part = key.substr(begin, dot == std::string::npos ? std::string::npos : dot - begin);
    if (!at->is_object() || !at->contains(part)) return false;
    at = &(*at)[part];
    if (dot == std::string::npos) return true;
    begin = dot + 1;
  }
}

void warn_missing_sort_keys(const char* call, const std::string& name, const Document& top,
                            const SortSpec& sort) {
  for (const auto& [key, direction] : sort) {
    if (key == "time" || key == "id" || key == "project_name" || has_path(top.tags, key)) continue;
    std::string known;
    for (const auto& [tag, value] : top.tags.items()) known += (known.empty() ? "" : ", ") + tag;
    log_warning(std::string(call) + "(\"" + name + "\"): the document it returns (id " + std::to_string(top.id) +
                ") has no tag \"" + key + "\" to sort by" +
                (direction < 0 ? ", so none has: is the key spelled right? Its tags: " : "; its tags: ") + known);
  }
}

Json require_object(const Json& tags, const char* what) {
  if (tags.is_null()) return Json::object();
  if (!tags.is_object()) throw InvalidArgument(std::string(what) + " must be a JSON object, got " + tags.dump());
  return tags;
}

std::vector<std::byte> json_bytes(const Json& j) {
  const std::string text = j.dump(2);
  const auto* p = reinterpret_cast<const std::byte*>(text.data());
  return {p, p + text.size()};
}

// Named tensors as a safetensors blob, serialised piece by piece as the backend reads it:
// a dataset is never copied whole (write_safetensors_to).
class SafetensorsSource final : public BlobSource {
 public:
  // Checks the tensors (InvalidArgument) before anything is stored.
  explicit SafetensorsSource(NamedTensorViews tensors)
      : tensors_(std::move(tensors)), size_(write_safetensors_to(tensors_, [](std::span<const std::byte>) {})) {}
  std::uint64_t size() const override { return size_; }
  void write(const std::function<void(std::span<const std::byte>)>& sink) const override {
    write_safetensors_to(tensors_, sink);
  }

 private:
  NamedTensorViews tensors_;
  std::uint64_t size_;
};

const std::string& part_of(const Document& d, const std::string& part) {
  auto it = d.parts.find(part);
  if (it == d.parts.end())
    throw DataLoss("document " + std::to_string(d.id) + " has no part \"" + part + "\"");
  return it->second;
}

}  // namespace

std::unique_ptr<Backend> open_backend(const std::string& uri, OpenMode mode) {
  if (uri.starts_with("sqlite://")) return open_sqlite_backend(sqlite_path_of_uri(uri), mode);
  if (uri.starts_with("postgresql://") || uri.starts_with("postgres://")) return open_postgres_backend(uri, mode);
  throw InvalidArgument("hub URI \"" + mask_passwords(uri) + "\" is not understood; use sqlite:///abs/path/hub.db or "
                        "postgresql://user:password@host:5432/db");
}

std::string default_hub_uri() {
  return "sqlite://" + (std::filesystem::current_path() / "tensorhub.db").string();
}

Json with_name(const Json& filter, const std::string& name_key, const std::string& name) {
  Json f = require_object(filter, "filter");
  f[name_key] = name;
  return f;
}

Hub::Hub(const HubOptions& options) : Hub(open_backend(options.uri, options.mode), options.project_name) {
  blob_cache_ = options.blob_cache;
}

Hub::Hub(const std::string& uri, std::string project_name, OpenMode mode)
    : Hub(open_backend(uri, mode), std::move(project_name)) {}

Hub::Hub(std::unique_ptr<Backend> backend, std::string project_name)
    : Hub(std::shared_ptr<Backend>(std::move(backend)), std::move(project_name)) {}

Hub::Hub(std::shared_ptr<Backend> backend, std::string project_name)
    : backend_(std::move(backend)), project_name_(std::move(project_name)) {
  if (project_name_.empty()) throw InvalidArgument("project_name must not be empty");
}

Hub Hub::with_project(std::string project_name) const {
  Hub other(backend_, std::move(project_name));
  other.blob_cache_ = blob_cache_;
  return other;
}

Hub::~Hub() = default;
Hub::Hub(Hub&&) noexcept = default;
Hub& Hub::operator=(Hub&&) noexcept = default;

std::int64_t Hub::save_dataset(const NamedTensors& tensors, const std::string& dataset_name,
                               const Json& tags) {
  return save_dataset_views(views_of(tensors), dataset_name, tags);
}

std::int64_t Hub::save_dataset_views(const NamedTensorViews& tensors, const std::string& dataset_name,
                                     const Json& tags) {
  Json t = require_object(tags, "dataset tags");
  t["dataset_name"] = dataset_name;
  const SafetensorsSource source(tensors);
  return backend_->insert_document(Collection::kDatasets, project_name_, t, PartSources{{kTensorsPart, &source}});
}

std::optional<DatasetRecord> Hub::find_top_dataset(const std::string& dataset_name, const Json& filter,
                                                   const SortSpec& sort) {
  auto docs = backend_->find_documents(Collection::kDatasets, project_name_,
                                       with_name(filter, "dataset_name", dataset_name), or_newest(sort), 1);
  if (docs.empty()) return std::nullopt;
  warn_missing_sort_keys("find_top_dataset", dataset_name, docs[0], sort);
  if (docs[0].tags.contains("shards") && !docs[0].parts.contains(kTensorsPart))
    throw FailedPrecondition("dataset \"" + dataset_name + "\" (id " + std::to_string(docs[0].id) +
                             ") is sharded (TFRecord files), not tensors: read it shard by shard "
                             "(find_sharded_dataset) or export its files (dataset_shards.h)");
  DatasetRecord record{docs[0], read_tensors(part_of(docs[0], kTensorsPart))};
  note_dataset_read(record.document);  // a model saved later records it (lineage.h)
  return record;
}

std::vector<std::byte> Hub::read_blob(const std::string& sha256) {
  if (blob_cache_) return blob_cache_->open(*this, sha256).read_all();
  return backend_->read_blob(sha256);
}

NamedTensors Hub::read_tensors(const std::string& sha256) {
  const std::string where = "blob " + sha256;
  const auto size = blob_cache_ ? std::nullopt : backend_->blob_size(sha256);
  if (!size) return from_safetensors(read_blob(sha256), where);  // the cache's file, or NotFound
  // The verifier passes on the last chunk only once the whole blob hashes right, and the
  // decoder throws only from finish(): a damaged blob is reported as such.
  SafetensorsDecoder decoder(*size, where);
  backend_->read_blob_chunks(sha256, [&](std::span<const std::byte> chunk) { decoder.feed(chunk); });
  return decoder.finish();
}

std::vector<Document> Hub::find_datasets(const Json& filter, const SortSpec& sort, std::int64_t limit) {
  return backend_->find_documents(Collection::kDatasets, project_name_, require_object(filter, "filter"),
                                  or_newest(sort), limit);
}

std::int64_t Hub::delete_datasets(const Json& filter) {
  return backend_->delete_documents(Collection::kDatasets, project_name_, require_object(filter, "filter"));
}

std::int64_t Hub::save_model(const Json& architecture, const NamedTensors& weights,
                             const std::string& model_name, const Json& tags, const Parts& extra_parts) {
  Json t = require_object(tags, "model tags");
  t["model_name"] = model_name;
  if (!t.contains("lineage")) t["lineage"] = current_lineage();  // the caller's own wins
  for (const char* reserved : {kModelJsonPart, kWeightsPart})
    if (extra_parts.contains(reserved))
      throw InvalidArgument(std::string("save_model: extra part \"") + reserved +
                            "\" is reserved; pass the architecture and weights as arguments");
  const std::vector<std::byte> model_json = json_bytes(architecture);
  const BytesBlobSource model_json_source(model_json);
  const SafetensorsSource weights_source(views_of(weights));
  std::vector<BytesBlobSource> extra_sources;
  extra_sources.reserve(extra_parts.size());
  PartSources parts = {{kModelJsonPart, &model_json_source}, {kWeightsPart, &weights_source}};
  for (const auto& [name, bytes] : extra_parts) parts[name] = &extra_sources.emplace_back(bytes);
  return backend_->insert_document(Collection::kModels, project_name_, t, parts);
}

std::optional<std::vector<std::byte>> Hub::load_model_part(const Document& document, const std::string& part) {
  auto it = document.parts.find(part);
  if (it == document.parts.end()) return std::nullopt;
  return read_blob(it->second);
}

std::optional<ModelRecord> Hub::find_top_model(const std::string& model_name, const Json& filter,
                                               const SortSpec& sort) {
  auto docs = backend_->find_documents(Collection::kModels, project_name_,
                                       with_name(filter, "model_name", model_name), or_newest(sort), 1);
  if (docs.empty()) return std::nullopt;
  warn_missing_sort_keys("find_top_model", model_name, docs[0], sort);
  return load_model(docs[0]);
}

ModelRecord Hub::load_model(const Document& document) {
  const std::string& arch_sha = part_of(document, kModelJsonPart);
  const std::string& weights_sha = part_of(document, kWeightsPart);
  const auto arch_bytes = read_blob(arch_sha);
  Json arch = Json::parse(reinterpret_cast<const char*>(arch_bytes.data()),
                          reinterpret_cast<const char*>(arch_bytes.data()) + arch_bytes.size(), nullptr, false);
  if (arch.is_discarded()) throw DataLoss("model.json blob " + arch_sha + " is not valid JSON");
  return ModelRecord{document, std::move(arch), read_tensors(weights_sha)};
}

std::vector<Document> Hub::find_models(const Json& filter, const SortSpec& sort, std::int64_t limit) {
  return backend_->find_documents(Collection::kModels, project_name_, require_object(filter, "filter"),
                                  or_newest(sort), limit);
}

// Hub::delete_models is in model_aliases.cpp: it keeps the aliases that name models.

std::int64_t Hub::save_training_log(const Json& fields) {
  return backend_->insert_document(Collection::kTrainingLogs, project_name_, require_object(fields, "log"), PartSources{});
}
std::int64_t Hub::save_validation_log(const Json& fields) {
  return backend_->insert_document(Collection::kValidationLogs, project_name_, require_object(fields, "log"), PartSources{});
}
std::int64_t Hub::save_testing_log(const Json& fields) {
  return backend_->insert_document(Collection::kTestingLogs, project_name_, require_object(fields, "log"), PartSources{});
}
std::vector<Document> Hub::find_training_logs(const Json& filter, const SortSpec& sort) {
  return backend_->find_documents(Collection::kTrainingLogs, project_name_, require_object(filter, "filter"), sort, 0);
}
std::vector<Document> Hub::find_validation_logs(const Json& filter, const SortSpec& sort) {
  return backend_->find_documents(Collection::kValidationLogs, project_name_, require_object(filter, "filter"), sort, 0);
}
std::vector<Document> Hub::find_testing_logs(const Json& filter, const SortSpec& sort) {
  return backend_->find_documents(Collection::kTestingLogs, project_name_, require_object(filter, "filter"), sort, 0);
}
std::int64_t Hub::delete_training_logs(const Json& filter) {
  return backend_->delete_documents(Collection::kTrainingLogs, project_name_, require_object(filter, "filter"));
}
std::int64_t Hub::delete_validation_logs(const Json& filter) {
  return backend_->delete_documents(Collection::kValidationLogs, project_name_, require_object(filter, "filter"));
}
std::int64_t Hub::delete_testing_logs(const Json& filter) {
  return backend_->delete_documents(Collection::kTestingLogs, project_name_, require_object(filter, "filter"));
}

bool Hub::project_empty() {
  // One document of any collection is enough (list_projects would read every project's).
  return backend_->sql().execute("SELECT 1 FROM documents WHERE project_name = ? LIMIT 1", {project_name_}).empty();
}

std::vector<Document> Hub::find_documents(Collection c, const Json& filter, const SortSpec& sort, std::int64_t limit) {
  return backend_->find_documents(c, project_name_, require_object(filter, "filter"), sort, limit);
}

std::int64_t Hub::count_documents(Collection c, const Json& filter) {
  return backend_->count_documents(c, project_name_, require_object(filter, "filter"));
}

std::int64_t Hub::delete_documents(Collection c, const Json& filter) {
  if (c == Collection::kModels) return delete_models(filter);  // refuses to delete an aliased model
  return backend_->delete_documents(c, project_name_, require_object(filter, "filter"));
}

std::int64_t Hub::save_document(Collection c, const Json& tags, const PartSources& parts) {
  return backend_->insert_document(c, project_name_, require_object(tags, "document tags"), parts);
}

std::int64_t Hub::save_document(Collection c, const Json& tags, const Parts& parts) {
  return backend_->insert_document(c, project_name_, require_object(tags, "document tags"), parts);
}

}  // namespace tensorhub
