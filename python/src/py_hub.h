// PyHub: the hub and task queue of one TensorHub object, behind one mutex (a Hub is one
// database connection, usable from one thread at a time), for the Python module.
//
// Every method that touches the database or the disk releases the GIL, then takes the mutex;
// no method takes the GIL while it holds the mutex, so Python threads sharing one TensorHub
// never deadlock. JSON crosses as text: tags, filters and documents are JSON objects whose
// non-finite numbers are {"$numberDouble": ...} (store/document.h), decoded on each side.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tensorhub/queue/task_queue.h"
#include "tensorhub/store/dataset_shards.h"
#include "tensorhub/store/hub.h"

namespace tensorhub::python {

namespace py = pybind11;

/// TensorHub's sort: [(field, 1 | -1), ...].
using PySort = std::vector<std::pair<std::string, int>>;

class PyHub {
 public:
  /// Opens (creating where missing) the hub at `uri` for `project_name`; GIL released.
  PyHub(const std::string& uri, const std::string& project_name);

  /// The URI (with its password) and the URI with its password masked; read at opening, so
  /// no lock is needed.
  const std::string& uri() const { return uri_; }
  const std::string& display_uri() const { return display_uri_; }
  const std::string& project_name() const { return project_name_; }

  /// Datasets: save, find the first (None when none), find all, delete. Finding a sharded
  /// (TFRecord) dataset among tensor datasets throws FailedPrecondition naming
  /// tensorhub.data.from_hub, which reads it batch by batch.
  std::int64_t save_dataset(const py::dict& tensors, const std::string& name, const std::string& tags);
  py::object find_top_dataset(const std::string& name, const std::string& filter, const PySort& sort);
  py::list find_datasets(const std::string& filter, const PySort& sort, std::int64_t limit);
  /// The first sharded dataset named `name` matching `filter` in `sort` order (newest first
  /// when empty), or nothing when no dataset of that name matches. Throws FailedPrecondition
  /// when the match holds tensors (naming TensorHub.find_top_dataset), DataLoss when its
  /// document does not hold the sharded layout. Call it with the GIL released.
  std::optional<ShardedDataset> find_sharded_dataset(const std::string& name, const Json& filter,
                                                     const PySort& sort);
  /// Models: save (architecture JSON, weights, and further parts stored as they are, e.g.
  /// "model.pt": TorchScript bytes), find the first as (doc, architecture, weights). Throws
  /// InvalidArgument for a part named model.json or weights.safetensors.
  std::int64_t save_model(const std::string& architecture, const py::dict& weights, const std::string& name,
                          const std::string& tags, const std::map<std::string, std::string>& parts = {});
  /// Stores a saved model directory (model.json, weights.safetensors, and optimizer.safetensors
  /// and state.json where present) as model `name`. Throws NotFound without model.json,
  /// InvalidArgument when it is not JSON, DataLoss for a malformed safetensors file.
  std::int64_t save_model_dir(const std::string& dir, const std::string& name, const std::string& tags);
  py::object find_top_model(const std::string& name, const std::string& filter, const PySort& sort);
  /// Architecture JSON and weights of the model document `document` (its JSON text).
  py::tuple load_model(const std::string& document);
  /// The bytes of part `part` (e.g. "model.pt") of the model document `document` (its JSON
  /// text), verified like every blob, or None when the model has no such part.
  py::object load_model_part(const std::string& document, const std::string& part);
  /// Any collection: its documents as a JSON array text, their count, delete.
  std::string find_documents(const std::string& collection, const std::string& filter, const PySort& sort,
                             std::int64_t limit);
  std::int64_t delete_documents(const std::string& collection, const std::string& filter);
  std::int64_t save_document(const std::string& collection, const std::string& tags);
  /// Tasks: create from a spec JSON, check, list (JSON array text), delete, cancel, count.
  std::int64_t create_task(const std::string& spec);
  /// TaskQueue::check_resources_fit of a spec JSON: the warning text ("" for none); raises
  /// InvalidArgument when no live runner could ever meet its resources.
  std::string check_task_resources(const std::string& spec);
  bool check_unfinished_task(const std::string& filter);
  std::string find_tasks(const std::string& filter, const PySort& sort, std::int64_t limit);
  /// SearchSummary::to_json of search `name` (load_search_summary); NotFound if none.
  std::string search_results(const std::string& name);
  /// Model aliases (store/model_aliases.h). set/delete return the id the alias named before
  /// (None when it was new / absent); `user` "" means this process's user. The listings are
  /// JSON array text (to_json of each alias or change).
  py::object set_model_alias(const std::string& name, const std::string& alias, std::int64_t model_id,
                             const std::string& reason, const std::string& user);
  py::object delete_model_alias(const std::string& name, const std::string& alias, const std::string& reason,
                                const std::string& user);
  std::string find_model_aliases(const std::string& name);
  std::string model_alias_history(const std::string& name, const std::string& alias);
  /// Hub::delete_models: refuses (FailedPrecondition) to delete an aliased model unless `force`.
  std::int64_t delete_models(const std::string& filter, bool force);
  /// The attempts of task `task_id` (TaskAttempt::to_json, GPU samples included) as a JSON array.
  std::string find_task_attempts(std::int64_t task_id);
  std::int64_t delete_tasks(const std::string& filter);
  std::int64_t cancel_tasks(const std::string& filter);
  py::dict count_tasks(const std::string& filter);

 private:
  // The first dataset document named `name` (see find_sharded_dataset). REQUIRES mu_.
  std::optional<Document> top_dataset(const std::string& name, const Json& filter, const PySort& sort);
  // The tensors of dataset document `d`. Throws FailedPrecondition for a sharded dataset,
  // DataLoss for a document with neither tensors nor shards. REQUIRES mu_.
  NamedTensors dataset_tensors(const Document& d);

  std::string project_name_;
  mutable std::mutex mu_;  // held (with the GIL released) around every use of hub_ and queue_
  Hub hub_;
  TaskQueue queue_;
  std::string uri_, display_uri_;
};

/// Parses JSON text given by the Python layer. Throws InvalidArgument naming `what`.
Json parse_json(const std::string& text, const std::string& what);
/// A document as JSON: id, project_name, time (UTC microseconds, an integer), tags, parts.
Json document_json(const Document& doc);

/// Adds PyHub to module `m` as class _core.Hub.
void bind_hub(py::module_& m);

}  // namespace tensorhub::python
