// Internals of the Dataset pipeline (dataset.h): nodes describe, element iterators run a pass.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tensorhub/core/thread_pool.h"
#include "tensorhub/data/dataset.h"
#include "tensorhub/data/tfrecord.h"

namespace tensorhub::detail {

/// What every node iterator of one pass shares. Outlives all of them (each holds a
/// shared_ptr), so a private pool is joined only after every task of the pass finished.
struct PassContext {
  std::unique_ptr<ThreadPool> private_pool;  // when DatasetOptions asks for one
  ThreadPool* pool = nullptr;
  std::atomic<std::int64_t> ignored_errors{0};
};
using ContextPtr = std::shared_ptr<PassContext>;

/// One stage of one pass. next() may throw for one element and be called again (a stage
/// keeps its state consistent when its input throws), which ignore_errors relies on.
class ElementIterator {
 public:
  virtual ~ElementIterator() = default;
  virtual std::optional<NamedTensors> next() = 0;
};
using IteratorPtr = std::unique_ptr<ElementIterator>;

/// One stage of a pipeline description. Immutable but for counters (shuffle's pass count,
/// ignore_errors' total) that tf.data keeps in resources the same way.
class DatasetNode {
 public:
  virtual ~DatasetNode() = default;
  virtual IteratorPtr make_iterator(const ContextPtr& context) const = 0;
  virtual std::vector<std::shared_ptr<const DatasetNode>> inputs() const { return {}; }
  /// Elements this node dropped (ignore_errors), every pass together.
  virtual std::int64_t ignored_errors() const { return 0; }
  /// Elements of one pass as tf.data's DatasetBase::Cardinality counts them: a count,
  /// Dataset::kInfiniteCardinality or Dataset::kUnknownCardinality (the default: a node that
  /// cannot know without reading, e.g. a file or a generator).
  virtual std::int64_t cardinality() const { return Dataset::kUnknownCardinality; }
};
using NodePtr = std::shared_ptr<const DatasetNode>;

/// A node with one input.
class UnaryNode : public DatasetNode {
 public:
  explicit UnaryNode(NodePtr input) : input_(std::move(input)) {}
  std::vector<NodePtr> inputs() const override { return {input_}; }
  /// One element out per element in (map, shuffle, cache, prefetch, enumerate); stages that
  /// change the count override it.
  std::int64_t cardinality() const override { return input_->cardinality(); }

 protected:
  NodePtr input_;
};

// --- Nodes (each file defines its own; these construct them) ----------------------------

NodePtr make_tensor_slices_node(NamedTensors tensors);
/// The given elements, in order (list_files, TFRecordDataset's file names).
NodePtr make_elements_node(std::vector<NamedTensors> elements);
NodePtr make_range_node(std::int64_t start, std::int64_t stop, std::int64_t step);
NodePtr make_tfrecord_file_node(std::filesystem::path file, TFRecordCompression compression);
NodePtr make_zip_node(std::vector<NodePtr> inputs);
NodePtr make_map_node(NodePtr input, Dataset::MapFn fn);
NodePtr make_parallel_map_node(NodePtr input, Dataset::MapFn fn, std::int64_t parallel,
                               bool deterministic);
NodePtr make_filter_node(NodePtr input, Dataset::Predicate predicate);
NodePtr make_batch_node(NodePtr input, std::int64_t batch_size, bool drop_remainder);
NodePtr make_padded_batch_node(NodePtr input, std::int64_t batch_size,
                               std::map<std::string, std::vector<std::int64_t>> shapes,
                               std::map<std::string, double> values, bool drop_remainder);
NodePtr make_unbatch_node(NodePtr input);
NodePtr make_shuffle_node(NodePtr input, std::int64_t buffer_size, std::uint64_t seed,
                          bool reshuffle_each_iteration);
NodePtr make_repeat_node(NodePtr input, std::int64_t count);
NodePtr make_take_node(NodePtr input, std::int64_t count);
NodePtr make_skip_node(NodePtr input, std::int64_t count);
NodePtr make_shard_node(NodePtr input, std::int64_t num_shards, std::int64_t index);
NodePtr make_cache_node(NodePtr input, std::string filename);
NodePtr make_prefetch_node(NodePtr input, std::int64_t buffer_size);
NodePtr make_interleave_node(NodePtr input, Dataset::InterleaveFn fn, std::int64_t cycle_length,
                             std::int64_t block_length, bool parallel);
NodePtr make_enumerate_node(NodePtr input, std::int64_t start, std::string key);
NodePtr make_ignore_errors_node(NodePtr input);

// --- Helpers shared by the stages ---------------------------------------------------------

/// Rethrows the exception in flight with `prefix` before its message: a tensorhub::Error keeps
/// its kind, std::invalid_argument becomes InvalidArgument, anything else Internal.
[[noreturn]] void rethrow_with_prefix(const std::string& prefix);

/// True for the errors ignore_errors drops: tensorhub::Error of kind DataLoss/InvalidArgument.
bool is_data_error(const std::exception_ptr& error);

/// "[2, 3]"
std::string shape_string(const std::vector<std::int64_t>& shape);

/// Stacks equal-shaped elements along a new first dimension (batch). Throws InvalidArgument.
NamedTensors stack_elements(const std::vector<NamedTensors>& elements);
/// Row `row` of every tensor (first dimension removed).
NamedTensors slice_element(const NamedTensors& element, std::int64_t row);
/// Pads and stacks (padded_batch). Throws InvalidArgument.
NamedTensors pad_and_stack(const std::vector<NamedTensors>& elements,
                           const std::map<std::string, std::vector<std::int64_t>>& shapes,
                           const std::map<std::string, double>& values);

/// The process-wide pool every pipeline's pass uses unless its DatasetOptions ask for a
/// private one (private_threadpool_size). Created on first use, never destroyed (pipelines may
/// still be iterated from static destructors). Sized by set_shared_pool_threads() if called
/// first, else the environment's TENSORHUB_DATA_THREADS if a positive number, else one worker
/// per core.
ThreadPool& shared_pool();
/// Sets shared_pool()'s number of workers before its first use. Throws InvalidArgument for 0,
/// FailedPrecondition once the shared pool exists.
void set_shared_pool_threads(std::size_t threads);

/// The pool of this pass.
inline ThreadPool& pool_of(const ContextPtr& context) { return *context->pool; }
/// kAutotune -> the pool's size; other values unchanged.
std::int64_t autotuned(std::int64_t value, const ContextPtr& context);

}  // namespace tensorhub::detail
