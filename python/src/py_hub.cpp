#include "py_hub.h"

#include "tensorhub/store/lineage.h"

#include <pybind11/stl.h>

#include <filesystem>
#include <optional>

#include "tensorhub/core/error.h"
#include "tensorhub/tune/tuner.h"
#include "tensors.h"

namespace tensorhub::python {
namespace {

constexpr const char* kTensorsPart = "tensors.safetensors";  // store/hub.cpp's dataset part

// The collection named `name` (the Python layer's names are the stored ones).
Collection collection_named(const std::string& name) {
  for (Collection c : {Collection::kDatasets, Collection::kModels, Collection::kTrainingLogs,
                       Collection::kValidationLogs, Collection::kTestingLogs})
    if (c.name() == name) return c;
  throw InvalidArgument("unknown collection \"" + name + "\"");
}

// The document a document_json made, back (id, project, time, tags, parts).
Document document_from_json(const Json& j) {
  Document d;
  d.id = j.at("id").get<std::int64_t>();
  d.project_name = j.at("project_name").get<std::string>();
  d.time = j.at("time").get<std::int64_t>();
  d.tags = decode_non_finite(j.at("tags"));
  d.parts = j.at("parts").get<std::map<std::string, std::string>>();
  return d;
}

// A spec JSON object (the Python layer's create_task) as a TaskSpec.
TaskSpec task_spec_from_json(const Json& j) {
  TaskSpec s;
  s.task_name = j.value("task_name", "");
  s.command = j.value("command", "");
  s.hyper_parameters = decode_non_finite(j.value("hyper_parameters", Json::object()));
  s.saved_result_keys = j.value("saved_result_keys", std::vector<std::string>{});
  s.max_attempts = j.value("max_attempts", 3);
  s.timeout_s = j.value("timeout_s", 0.0);
  s.priority = j.value("priority", 0);
  s.tags = decode_non_finite(j.value("tags", Json::object()));
  s.script = j.value("script", "");
  s.script_name = j.value("script_name", "");
  s.python = j.value("python", "");
  // {"cpus": 2, "gpus": 1, "memory": "8GiB" or bytes}; InvalidArgument naming a bad key.
  if (j.contains("resources")) s.resources = TaskResources::from_json(j.at("resources"));
  return s;
}

SortSpec to_sort(const PySort& sort) { return SortSpec(sort.begin(), sort.end()); }

std::string documents_text(const std::vector<Document>& docs) {
  Json out = Json::array();
  for (const Document& d : docs) out.push_back(document_json(d));
  return out.dump();
}

}  // namespace

Json parse_json(const std::string& text, const std::string& what) {
  Json j = Json::parse(text, nullptr, false);
  if (j.is_discarded()) throw InvalidArgument(what + " is not valid JSON: " + text.substr(0, 200));
  return decode_non_finite(j);
}

Json document_json(const Document& doc) {
  return encode_non_finite(Json{{"id", doc.id},
                                {"project_name", doc.project_name},
                                {"time", doc.time},
                                {"tags", doc.tags},
                                {"parts", doc.parts}});
}

PyHub::PyHub(const std::string& uri, const std::string& project_name)
    : project_name_(project_name),
      hub_(uri, project_name),
      queue_(hub_),
      uri_(hub_.uri()),
      display_uri_(hub_.display_uri()) {}

std::int64_t PyHub::save_dataset(const py::dict& tensors, const std::string& name, const std::string& tags) {
  const auto views = view_arrays(tensors, "dataset tensor");
  const Json t = parse_json(tags, "dataset tags");
  // Stored straight from the arrays' buffers with the GIL released (`views` holds the arrays):
  // no copy of the dataset. A thread that writes to one meanwhile makes the save fail with
  // DataLoss, nothing stored, rather than store a torn copy (the store hashes the blob, then
  // hashes it again as it writes it).
  const NamedTensorViews in_place = tensor_views(views);
  py::gil_scoped_release release;
  std::lock_guard lock(mu_);
  return hub_.save_dataset_views(in_place, name, t);
}

std::optional<Document> PyHub::top_dataset(const std::string& name, const Json& filter, const PySort& sort) {
  const SortSpec order = sort.empty() ? SortSpec{{"time", -1}, {"id", -1}} : to_sort(sort);  // newest first
  auto docs = hub_.find_datasets(with_name(filter, "dataset_name", name), order, 1);
  if (docs.empty()) return std::nullopt;
  return std::move(docs[0]);
}

NamedTensors PyHub::dataset_tensors(const Document& d) {
  const std::string name = d.tags.value("dataset_name", "");
  auto part = d.parts.find(kTensorsPart);
  if (part == d.parts.end() && is_sharded_dataset(d))
    throw FailedPrecondition("dataset \"" + name + "\" (id " + std::to_string(d.id) +
                             ") is sharded (TFRecord files), not tensors: read it batch by batch with "
                             "tensorhub.data.from_hub(db, \"" + name +
                             "\", batch_size=...), or filter it out to load the others");
  if (part == d.parts.end())
    throw DataLoss("dataset \"" + name + "\" (id " + std::to_string(d.id) + ") has neither a part " + kTensorsPart +
                   " nor shards");
  NamedTensors tensors = hub_.read_tensors(part->second);  // chunk by chunk into the tensors
  note_dataset_read(d);  // a model this process saves later records it (store/lineage.h)
  return tensors;
}

py::object PyHub::find_top_dataset(const std::string& name, const std::string& filter, const PySort& sort) {
  std::optional<DatasetRecord> record;
  {
    const Json f = parse_json(filter, "filter");
    py::gil_scoped_release release;
    std::lock_guard lock(mu_);
    if (std::optional<Document> d = top_dataset(name, f, sort)) {
      NamedTensors tensors = dataset_tensors(*d);
      record = DatasetRecord{std::move(*d), std::move(tensors)};
    }
  }
  if (!record) return py::none();
  return py::make_tuple(document_json(record->document).dump(), to_numpy_dict(std::move(record->tensors)));
}

std::optional<ShardedDataset> PyHub::find_sharded_dataset(const std::string& name, const Json& filter,
                                                          const PySort& sort) {
  std::lock_guard lock(mu_);
  std::optional<Document> d = top_dataset(name, filter, sort);
  if (!d) return std::nullopt;
  if (!is_sharded_dataset(*d))
    throw FailedPrecondition("dataset \"" + name + "\" (id " + std::to_string(d->id) +
                             ") holds tensors, not TFRecord shards: load it with TensorHub.find_top_dataset");
  note_dataset_read(*d);  // lineage, as for tensors
  return sharded_dataset_of(*d);
}

py::list PyHub::find_datasets(const std::string& filter, const PySort& sort, std::int64_t limit) {
  std::vector<DatasetRecord> records;
  {
    const Json f = parse_json(filter, "filter");
    py::gil_scoped_release release;
    std::lock_guard lock(mu_);
    for (Document& d : hub_.find_datasets(f, to_sort(sort), limit)) {
      NamedTensors tensors = dataset_tensors(d);
      records.push_back(DatasetRecord{std::move(d), std::move(tensors)});
    }
  }
  py::list out;
  for (DatasetRecord& r : records)
    out.append(py::make_tuple(document_json(r.document).dump(), to_numpy_dict(std::move(r.tensors))));
  return out;
}

std::int64_t PyHub::save_model(const std::string& architecture, const py::dict& weights, const std::string& name,
                               const std::string& tags, const std::map<std::string, std::string>& parts) {
  const auto views = view_arrays(weights, "model weight");
  const Json arch = parse_json(architecture, "model architecture");
  const Json t = parse_json(tags, "model tags");
  py::gil_scoped_release release;
  const NamedTensors copy = copy_views(views);
  Parts extra;
  for (const auto& [part, bytes] : parts) {
    const auto* begin = reinterpret_cast<const std::byte*>(bytes.data());
    extra[part].assign(begin, begin + bytes.size());
  }
  std::lock_guard lock(mu_);
  return hub_.save_model(arch, copy, name, t, extra);
}

std::int64_t PyHub::save_model_dir(const std::string& dir, const std::string& name, const std::string& tags) {
  namespace fs = std::filesystem;
  const Json t = parse_json(tags, "model tags");
  py::gil_scoped_release release;
  const fs::path d(dir);
  if (!fs::is_regular_file(d / "model.json"))
    throw NotFound("save_model: " + dir + " holds no model.json (a saved model directory holds model.json and "
                   "weights.safetensors)");
  const auto arch_bytes = read_file_bytes(d / "model.json");
  const Json arch = Json::parse(reinterpret_cast<const char*>(arch_bytes.data()),
                                reinterpret_cast<const char*>(arch_bytes.data()) + arch_bytes.size(), nullptr, false);
  if (arch.is_discarded()) throw InvalidArgument("save_model: " + (d / "model.json").string() + " is not valid JSON");
  const NamedTensors weights =
      fs::exists(d / "weights.safetensors") ? read_safetensors(d / "weights.safetensors") : NamedTensors{};
  Parts extra;
  for (const char* part : {"optimizer.safetensors", "state.json"})
    if (fs::exists(d / part)) extra[part] = read_file_bytes(d / part);
  std::lock_guard lock(mu_);
  return hub_.save_model(arch, weights, name, t, extra);
}

py::object PyHub::find_top_model(const std::string& name, const std::string& filter, const PySort& sort) {
  std::optional<ModelRecord> record;
  {
    const Json f = parse_json(filter, "filter");
    py::gil_scoped_release release;
    std::lock_guard lock(mu_);
    record = hub_.find_top_model(name, f, to_sort(sort));
  }
  if (!record) return py::none();
  return py::make_tuple(document_json(record->document).dump(), encode_non_finite(record->architecture).dump(),
                        to_numpy_dict(std::move(record->weights)));
}

py::tuple PyHub::load_model(const std::string& document) {
  std::optional<ModelRecord> record;
  {
    const Document doc = document_from_json(parse_json(document, "model document"));
    py::gil_scoped_release release;
    std::lock_guard lock(mu_);
    record = hub_.load_model(doc);
  }
  return py::make_tuple(encode_non_finite(record->architecture).dump(), to_numpy_dict(std::move(record->weights)));
}

py::object PyHub::load_model_part(const std::string& document, const std::string& part) {
  std::optional<std::vector<std::byte>> bytes;
  {
    const Document doc = document_from_json(parse_json(document, "model document"));
    py::gil_scoped_release release;
    std::lock_guard lock(mu_);
    bytes = hub_.load_model_part(doc, part);
  }
  if (!bytes) return py::none();
  return py::bytes(reinterpret_cast<const char*>(bytes->data()), bytes->size());
}

std::string PyHub::find_documents(const std::string& collection, const std::string& filter, const PySort& sort,
                                  std::int64_t limit) {
  const Json f = parse_json(filter, "filter");
  const Collection c = collection_named(collection);
  py::gil_scoped_release release;
  std::lock_guard lock(mu_);
  return documents_text(hub_.find_documents(c, f, to_sort(sort), limit));
}

std::int64_t PyHub::delete_documents(const std::string& collection, const std::string& filter) {
  const Json f = parse_json(filter, "filter");
  const Collection c = collection_named(collection);
  py::gil_scoped_release release;
  std::lock_guard lock(mu_);
  return hub_.delete_documents(c, f);
}

std::int64_t PyHub::save_document(const std::string& collection, const std::string& tags) {
  const Json t = parse_json(tags, "log fields");
  const Collection c = collection_named(collection);
  py::gil_scoped_release release;
  std::lock_guard lock(mu_);
  return hub_.save_document(c, t);
}

std::string PyHub::check_task_resources(const std::string& spec) {
  const TaskSpec s = task_spec_from_json(parse_json(spec, "task"));
  py::gil_scoped_release release;
  std::lock_guard lock(mu_);
  return queue_.check_resources_fit(s);
}

std::int64_t PyHub::create_task(const std::string& spec) {
  const TaskSpec s = task_spec_from_json(parse_json(spec, "task"));
  py::gil_scoped_release release;
  std::lock_guard lock(mu_);
  return queue_.create_task(s);
}

bool PyHub::check_unfinished_task(const std::string& filter) {
  const Json f = parse_json(filter, "filter");
  py::gil_scoped_release release;
  std::lock_guard lock(mu_);
  return queue_.check_unfinished_task(f);
}

std::string PyHub::search_results(const std::string& name) {
  py::gil_scoped_release release;
  return load_search_summary(uri_, project_name_, name).to_json().dump();
}

namespace {
py::object optional_id(std::optional<std::int64_t> id) {
  if (!id) return py::none();
  return py::int_(*id);
}
}  // namespace

py::object PyHub::set_model_alias(const std::string& name, const std::string& alias, std::int64_t model_id,
                                  const std::string& reason, const std::string& user) {
  std::optional<std::int64_t> before;
  {
    py::gil_scoped_release release;
    std::lock_guard lock(mu_);
    before = hub_.set_model_alias(name, alias, model_id, {.reason = reason, .user = user});
  }
  return optional_id(before);
}

py::object PyHub::delete_model_alias(const std::string& name, const std::string& alias, const std::string& reason,
                                     const std::string& user) {
  std::optional<std::int64_t> before;
  {
    py::gil_scoped_release release;
    std::lock_guard lock(mu_);
    before = hub_.delete_model_alias(name, alias, {.reason = reason, .user = user});
  }
  return optional_id(before);
}

std::string PyHub::find_model_aliases(const std::string& name) {
  py::gil_scoped_release release;
  std::lock_guard lock(mu_);
  Json out = Json::array();
  for (const ModelAlias& a : hub_.find_model_aliases(name)) out.push_back(to_json(a));
  return out.dump();
}

std::string PyHub::model_alias_history(const std::string& name, const std::string& alias) {
  py::gil_scoped_release release;
  std::lock_guard lock(mu_);
  Json out = Json::array();
  for (const ModelAliasChange& c : hub_.model_alias_history(name, alias)) out.push_back(to_json(c));
  return out.dump();
}

std::int64_t PyHub::delete_models(const std::string& filter, bool force) {
  const Json f = parse_json(filter, "filter");
  py::gil_scoped_release release;
  std::lock_guard lock(mu_);
  return hub_.delete_models(f, force);
}

std::string PyHub::find_tasks(const std::string& filter, const PySort& sort, std::int64_t limit) {
  const Json f = parse_json(filter, "filter");
  py::gil_scoped_release release;
  std::lock_guard lock(mu_);
  Json out = Json::array();
  const std::vector<Task> tasks = queue_.find_tasks(f, to_sort(sort), limit);
  // Each task's attempts, their usage without GPU samples (find_task_attempts has those): one query.
  std::vector<std::int64_t> ids;
  for (const Task& t : tasks) ids.push_back(t.id);
  const auto attempts = queue_.find_attempts(ids);
  for (const Task& t : tasks) {
    out.push_back(t.to_json());
    out.back()["attempts"] = Json::array();
    if (attempts.count(t.id))
      for (const auto& a : attempts.at(t.id)) out.back()["attempts"].push_back(a.to_json(false));
  }
  return out.dump();
}

std::string PyHub::find_task_attempts(std::int64_t task_id) {
  py::gil_scoped_release release;
  std::lock_guard lock(mu_);
  Json out = Json::array();
  for (const auto& a : queue_.find_attempts(task_id)) out.push_back(a.to_json());
  return out.dump();
}

std::int64_t PyHub::delete_tasks(const std::string& filter) {
  const Json f = parse_json(filter, "filter");
  py::gil_scoped_release release;
  std::lock_guard lock(mu_);
  return queue_.delete_tasks(f);
}

std::int64_t PyHub::cancel_tasks(const std::string& filter) {
  const Json f = parse_json(filter, "filter");
  py::gil_scoped_release release;
  std::lock_guard lock(mu_);
  return queue_.cancel_tasks(f);
}

py::dict PyHub::count_tasks(const std::string& filter) {
  TaskCounts c;
  {
    const Json f = parse_json(filter, "filter");
    py::gil_scoped_release release;
    std::lock_guard lock(mu_);
    c = queue_.count_tasks(f);
  }
  py::dict out;
  out["pending"] = c.pending;
  out["running"] = c.running;
  out["finished"] = c.finished;
  out["failed"] = c.failed;
  out["cancelled"] = c.cancelled;
  return out;
}

}  // namespace tensorhub::python
