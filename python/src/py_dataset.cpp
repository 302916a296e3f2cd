#include "py_dataset.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <utility>

#include "tensorhub/core/error.h"
#include "tensorhub/data/hub_dataset.h"
#include "tensorhub/data/hub_source.h"
#include "tensors.h"

namespace tensorhub::python {
namespace {

// The lengths an element holds for feature `f`, whose padded values `values` are [n]
// (unbatched: one length) or [B, n] (batched: B lengths); each checked to lie within n, so
// that no offset computed from them leaves the buffer.
std::vector<std::int64_t> lengths_of(NamedTensors& element, const FeatureLayout& f, const Tensor& values,
                                     bool batched) {
  auto node = element.extract(f.length_key);
  const std::size_t rank = batched ? 2 : 1;
  if (node.empty() || node.mapped().dtype != DType::kI64 || values.shape.size() != rank ||
      node.mapped().numel() != (batched ? values.shape[0] : 1))
    throw Internal("tensorhub.data: the element's feature '" + f.name + "' does not match its length");
  const Tensor& t = node.mapped();
  std::vector<std::int64_t> lengths(t.as<std::int64_t>(), t.as<std::int64_t>() + t.numel());
  for (std::int64_t n : lengths)
    if (n < 0 || n > values.shape.back())
      throw Internal("tensorhub.data: feature '" + f.name + "' has a length outside its padded row");
  return lengths;
}

// U8 [n] (unbatched) or U8 [B, max] (batched) as bytes / a list of B bytes (one copy each:
// bytes objects own their memory).
py::object to_bytes(Tensor&& t, NamedTensors& element, const FeatureLayout& f, bool batched) {
  const char* data = reinterpret_cast<const char*>(t.data.data());
  const std::vector<std::int64_t> lengths = lengths_of(element, f, t, batched);
  if (!batched) return py::bytes(data, static_cast<std::size_t>(lengths[0]));
  const std::int64_t row = t.shape[1];
  py::list out;
  for (std::size_t i = 0; i < lengths.size(); ++i)
    out.append(py::bytes(data + static_cast<std::int64_t>(i) * row, static_cast<std::size_t>(lengths[i])));
  return out;
}

// F32/I64 [n] (unbatched) or [B, max] (batched) as one array / a list of B 1-D arrays, each
// a view of one row of the batch's array (no copy).
py::object to_ragged(Tensor&& t, NamedTensors& element, const FeatureLayout& f, bool batched) {
  const std::vector<std::int64_t> lengths = lengths_of(element, f, t, batched);
  if (!batched) return to_numpy(std::move(t));
  const std::int64_t row = t.shape[1];
  py::array padded = to_numpy(std::move(t));
  const auto item = static_cast<py::ssize_t>(padded.itemsize());
  const char* data = static_cast<const char*>(padded.data());
  py::list out;
  for (std::size_t i = 0; i < lengths.size(); ++i)
    out.append(py::array(padded.dtype(), {static_cast<py::ssize_t>(lengths[i])}, {item},
                         data + static_cast<py::ssize_t>(i) * row * item, padded));
  return out;
}

// One element as Python values in the layout's forms. REQUIRES the GIL.
py::dict to_python(NamedTensors&& element, const ElementLayout& layout, bool batched) {
  py::dict out;
  for (const FeatureLayout& f : layout.features) {
    auto node = element.extract(f.name);
    if (node.empty()) throw Internal("tensorhub.data: the element lacks feature '" + f.name + "'");
    Tensor t = std::move(node.mapped());
    switch (f.form) {
      case FeatureForm::kDense: out[py::str(f.name)] = to_numpy(std::move(t)); break;
      case FeatureForm::kBytes: out[py::str(f.name)] = to_bytes(std::move(t), element, f, batched); break;
      case FeatureForm::kRagged: out[py::str(f.name)] = to_ragged(std::move(t), element, f, batched); break;
    }
  }
  return out;
}

// True while this thread may release the GIL: it holds it and the interpreter is not being
// finalized (a destructor called then must not let other threads run).
bool may_release_gil() {
#if PY_VERSION_HEX >= 0x030D0000
  return PyGILState_Check() && !Py_IsFinalizing();
#else
  return PyGILState_Check() && !_Py_IsFinalizing();
#endif
}

// Specs from the caller's JSON text, else the dataset's own; nothing for raw records.
std::optional<FeatureSpecs> specs_for(const ShardedDataset& dataset, const std::string& features_json) {
  if (features_json.empty()) return hub_feature_specs(dataset);
  return feature_specs_from_json(parse_json(features_json, "features"));
}

// Checks tensorhub.data's file sharding before the pass: every worker must get a file.
void check_file_shards(const ShardedDataset& dataset, const std::string& name, std::int64_t num_shards,
                       std::int64_t index) {
  if (num_shards < 1 || index < 0 || index >= num_shards)
    throw InvalidArgument("from_hub: num_shards = " + std::to_string(num_shards) + " and index = " +
                          std::to_string(index) + " must satisfy num_shards >= 1 and 0 <= index < num_shards");
  const auto files = static_cast<std::int64_t>(dataset.shards.size());
  if (num_shards > files)
    throw InvalidArgument("from_hub: dataset \"" + name + "\" has " + std::to_string(files) +
                          " shard files, fewer than num_shards = " + std::to_string(num_shards) +
                          ", so some workers would read nothing; shard its records instead: "
                          "from_hub(...).shard(num_shards, index) (every worker then reads every file)");
}

// The pipeline of open_hub_dataset for the dataset found (no GIL needed).
PyDataset pipeline_of(const std::string& uri, ShardedDataset sharded, const std::string& name,
                      const std::string& features_json, std::int64_t num_shards, std::int64_t index) {
  check_file_shards(sharded, name, num_shards, index);
  auto source = std::make_shared<PipelineSource>();
  std::shared_ptr<const ExampleParser> parser;
  if (std::optional<FeatureSpecs> specs = specs_for(sharded, features_json)) {
    parser = std::make_shared<const ExampleParser>(*specs);  // checks the specs
    source->layout = layout_of(*specs);
  } else {
    source->layout = raw_record_layout();
  }
  source->cache = machine_blob_cache();
  // The map holds the layout through an aliasing pointer that keeps the whole source alive.
  std::shared_ptr<const ElementLayout> layout(source, &source->layout);
  Dataset records = from_hub(uri, std::move(sharded), source->cache.get(), num_shards, index);
  return PyDataset(records.map(element_fn(parser, layout)), source, false);
}

}  // namespace

PyDatasetIterator::PyDatasetIterator(Dataset dataset, SourcePtr source, bool batched)
    : source_(std::move(source)), it_(dataset.iterator()), batched_(batched) {}

PyDatasetIterator::~PyDatasetIterator() { close(); }

void PyDatasetIterator::close() {
  if (may_release_gil()) {
    py::gil_scoped_release release;  // the pass joins its threads: let other Python threads run
    std::lock_guard lock(mu_);
    it_.reset();
  } else {
    std::lock_guard lock(mu_);
    it_.reset();
  }
}

py::object PyDatasetIterator::next() {
  std::optional<NamedTensors> element;
  {
    py::gil_scoped_release release;
    std::lock_guard lock(mu_);
    if (it_) element = it_->next();
    if (!element) it_.reset();  // the end: stop the pass's threads at once
  }
  if (!element) throw py::stop_iteration();
  return to_python(std::move(*element), source_->layout, batched_);
}

PyDataset::PyDataset(Dataset dataset, SourcePtr source, bool batched)
    : dataset_(std::move(dataset)), source_(std::move(source)), batched_(batched) {}

PyDataset PyDataset::batch(std::int64_t batch_size, bool drop_remainder) const {
  if (batched_)
    throw InvalidArgument("batch: this dataset is batched already; tensorhub.data batches once (each "
                          "element is then one batch)");
  return PyDataset(dataset_.padded_batch(batch_size, {}, source_->layout.padding_values, drop_remainder), source_,
                   true);
}

PyDataset PyDataset::shuffle(std::int64_t buffer_size, std::optional<std::uint64_t> seed,
                             bool reshuffle_each_iteration) const {
  return with(dataset_.shuffle(buffer_size, seed, reshuffle_each_iteration));
}
PyDataset PyDataset::prefetch(std::int64_t buffer_size) const { return with(dataset_.prefetch(buffer_size)); }
PyDataset PyDataset::take(std::int64_t count) const { return with(dataset_.take(count)); }
PyDataset PyDataset::skip(std::int64_t count) const { return with(dataset_.skip(count)); }
PyDataset PyDataset::repeat(std::int64_t count) const { return with(dataset_.repeat(count)); }
PyDataset PyDataset::shard(std::int64_t num_shards, std::int64_t index) const {
  return with(dataset_.shard(num_shards, index));
}

std::unique_ptr<PyDatasetIterator> PyDataset::iterate() const {
  py::gil_scoped_release release;
  return std::make_unique<PyDatasetIterator>(dataset_, source_, batched_);
}

py::object open_hub_dataset(PyHub& hub, const std::string& name, const std::string& filter, const PySort& sort,
                            const std::string& features_json, std::int64_t num_shards, std::int64_t index) {
  const Json f = parse_json(filter, "filter");
  std::optional<PyDataset> dataset;
  {
    py::gil_scoped_release release;
    if (std::optional<ShardedDataset> sharded = hub.find_sharded_dataset(name, f, sort))
      dataset = pipeline_of(hub.uri(), std::move(*sharded), name, features_json, num_shards, index);
  }
  if (!dataset) return py::none();
  return py::cast(std::move(*dataset));
}

void bind_dataset(py::module_& m) {
  py::class_<PyDatasetIterator>(m, "DatasetIterator", "One pass over a HubDataset (tensorhub.data).")
      .def("__iter__", [](py::object self) { return self; })
      .def("__next__", &PyDatasetIterator::next, "The next element as a dict; GIL released while it is made.")
      .def("close", &PyDatasetIterator::close, "Stops the pass and joins its threads.");
  py::class_<PyDataset>(m, "HubDataset", "A pipeline over a sharded hub dataset (see tensorhub.data.Dataset).")
      .def("batch", &PyDataset::batch, py::arg("batch_size"), py::arg("drop_remainder"))
      .def("shuffle", &PyDataset::shuffle, py::arg("buffer_size"), py::arg("seed"), py::arg("reshuffle_each_iteration"))
      .def("prefetch", &PyDataset::prefetch, py::arg("buffer_size"))
      .def("take", &PyDataset::take, py::arg("count"))
      .def("skip", &PyDataset::skip, py::arg("count"))
      .def("repeat", &PyDataset::repeat, py::arg("count"))
      .def("shard", &PyDataset::shard, py::arg("num_shards"), py::arg("index"))
      .def("cardinality", &PyDataset::cardinality)
      .def_property_readonly("batched", &PyDataset::batched)
      .def("__iter__", &PyDataset::iterate);
  m.def("open_hub_dataset", &open_hub_dataset, py::arg("hub"), py::arg("name"), py::arg("filter"), py::arg("sort"),
        py::arg("features"), py::arg("num_shards"), py::arg("index"),
        "A HubDataset of a sharded dataset's records, or None when no dataset of that name matches.");
  m.def("dataset_background_threads", &dataset_background_threads,
        "Prefetch threads of tensorhub.data pipelines alive in this process.");
}

}  // namespace tensorhub::python
