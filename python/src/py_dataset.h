// tensorhub.data's C++ half: a pipeline (data/dataset.h) over a sharded hub dataset, and its
// iterator, which yields each element (a batch, once batched) as a dict of numpy arrays.
//
// The Python class tensorhub.data.Dataset (python/tensorhub/data.py) wraps PyDataset; its
// iterator is PyDatasetIterator itself. The pipeline runs in C++ only (the parse, shuffle,
// batch and prefetch stages never call Python), so the GIL is released while the next
// element is produced, and pool or prefetch threads never need it.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "element_layout.h"
#include "py_hub.h"
#include "tensorhub/data/dataset.h"
#include "tensorhub/store/blob_cache.h"

namespace tensorhub::python {

/// What every pass of a PyDataset shares: the element layout, and the machine's blob cache
/// (store/blob_cache.h) that the from_hub source reads through, kept alive while any pass
/// may use it.
struct PipelineSource {
  ElementLayout layout;
  std::shared_ptr<BlobCache> cache;  ///< null: each shard into an unnamed temporary file
};
using SourcePtr = std::shared_ptr<const PipelineSource>;

/// One pass over a PyDataset: Python's iterator protocol. Destroying it (or close()) stops the
/// pass: the C++ iterator joins its prefetch thread and waits for its pool tasks, with the
/// GIL released.
class PyDatasetIterator {
 public:
  PyDatasetIterator(Dataset dataset, SourcePtr source, bool batched);
  ~PyDatasetIterator();
  PyDatasetIterator(const PyDatasetIterator&) = delete;
  PyDatasetIterator& operator=(const PyDatasetIterator&) = delete;

  /// The next element as a dict (see element_layout.h for each feature's form); throws
  /// py::stop_iteration at the end of the pass or once closed, and the tensorhub::Error that
  /// producing the element raised (the pass is closed after it). GIL released while waiting.
  py::object next();
  /// Stops the pass now (idempotent); a later next() ends the iteration.
  void close();

 private:
  std::mutex mu_;  // one next()/close() at a time, taken with the GIL released
  SourcePtr source_;  // declared before it_, so destroyed after the pass
  std::optional<DatasetIterator> it_;
  bool batched_;
};

/// An immutable pipeline description: tf.data.Dataset's methods, each returning a new one.
class PyDataset {
 public:
  PyDataset(Dataset dataset, SourcePtr source, bool batched);

  /// tf.data's batch, as padded_batch with the layout's padding (equal to batch for fixed
  /// shapes). Throws InvalidArgument for batch_size < 1 or a dataset already batched.
  PyDataset batch(std::int64_t batch_size, bool drop_remainder) const;
  /// Dataset::shuffle, prefetch, take, skip, repeat and shard (data/dataset.h).
  PyDataset shuffle(std::int64_t buffer_size, std::optional<std::uint64_t> seed, bool reshuffle_each_iteration) const;
  PyDataset prefetch(std::int64_t buffer_size) const;
  PyDataset take(std::int64_t count) const;
  PyDataset skip(std::int64_t count) const;
  PyDataset repeat(std::int64_t count) const;
  PyDataset shard(std::int64_t num_shards, std::int64_t index) const;
  /// Dataset::cardinality: elements of one pass, or -1 (infinite) / -2 (unknown).
  std::int64_t cardinality() const { return dataset_.cardinality(); }
  bool batched() const { return batched_; }
  /// A new pass. GIL released while the pass starts (a prefetch stage starts its thread).
  std::unique_ptr<PyDatasetIterator> iterate() const;

 private:
  PyDataset with(Dataset dataset) const { return PyDataset(std::move(dataset), source_, batched_); }
  Dataset dataset_;
  SourcePtr source_;
  bool batched_;
};

/// The records of sharded dataset `name` (as PyHub::find_sharded_dataset finds it), each shard
/// read through the machine's blob cache (machine_blob_cache(): $TENSORHUB_BLOB_CACHE_DIR ...,
/// off with TENSORHUB_BLOB_CACHE=off) as runners read theirs, parsed
/// with `features_json` (feature specs as JSON text, data/hub_dataset.h's form) or, when it is
/// empty, the dataset's stored specs, else left as raw records; reading the shard files whose
/// position mod num_shards == index. None when no dataset of that name matches. Throws
/// InvalidArgument for invalid specs, a feature layout_of refuses, num_shards < 1, an index
/// outside [0, num_shards) or more num_shards than shard files; what find_sharded_dataset
/// throws. Nothing is read until a pass begins.
py::object open_hub_dataset(PyHub& hub, const std::string& name, const std::string& filter, const PySort& sort,
                            const std::string& features_json, std::int64_t num_shards, std::int64_t index);

/// Adds Dataset, DatasetIterator, open_hub_dataset and dataset_background_threads to `m`.
void bind_dataset(py::module_& m);

}  // namespace tensorhub::python
