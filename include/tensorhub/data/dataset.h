// A tf.data-style input pipeline over named tensors, without libtorch.
//
// A Dataset is an immutable description of a pipeline (a graph of shared nodes); building
// one reads nothing. Iterating it is one pass: Dataset::iterator() (or a range-for) starts a
// fresh pass from the top, as a Python `for` over a tf.data.Dataset does; every pass sees the
// sources again (a cache aside). An element is a NamedTensors, tf.data's dict element.
//
//   auto ds = Dataset::range(10).shuffle(10, 42).batch(4).prefetch(Dataset::kAutotune);
//   for (const NamedTensors& batch : ds) { ... batch.at("value") ... }   // I64 [4], [4], [2]
//
// Names, arguments and defaults follow tf.data.Dataset (TensorFlow 2.x,
// tensorflow/python/data/ops/dataset_ops.py); each method's comment says where it differs.
// Element keys made by sources: range -> "value" (I64 scalar); TFRecordDataset -> "record";
// list_files -> "filename"; enumerate adds "index" (I64 scalar).
//
// Strings and records: core Tensor has no string dtype (example.h's StringTensor lives outside
// NamedTensors), so a byte string (a TFRecord record, a file name) is a U8 tensor of shape
// [length]; bytes_tensor() / tensor_bytes() convert. Batching such elements needs padded_batch
// (their lengths differ); parse_example_fn() turns records into dense features first.
//
// Threads: functions (map with num_parallel_calls, parallel interleave's reads) run on one
// core/thread_pool.h ThreadPool (data/'s process-wide one, sized by TENSORHUB_DATA_THREADS or
// the number of cores, or a private one per pass, DatasetOptions); each prefetch
// iterator owns one background thread. Destroying an iterator mid-pass stops and joins its
// threads and waits for its tasks in flight. Memory is bounded by the buffers asked for:
// shuffle's buffer_size, prefetch's buffer_size, num_parallel_calls elements in a parallel map,
// two blocks per open input of a parallel interleave, and cache (the whole data set).
//
// Errors: an exception raised while producing an element (a map function, a corrupt record)
// reaches the consumer from next() as a tensorhub::Error whose message says where: the stage
// and the element's index in the pass, or the file and byte offset of a record. The DatasetIterator is then closed: a later next() throws
// FailedPrecondition naming the first error. ignore_errors() drops such elements instead.
//
// AUTOTUNE (kAutotune) is a fixed heuristic, not tf.data's runtime tuning: a prefetch buffer of
// 2 elements; num_parallel_calls, cycle_length and num_parallel_reads of the pool's size.
//
// Thread safety: a Dataset may be shared and iterated from many threads at once; one
// DatasetIterator must be used from one thread at a time. Functions given to map with
// num_parallel_calls, and those of the datasets a parallel interleave reads, run on pool
// threads, several at once: they must be safe to call concurrently. Stages upstream of a
// prefetch run on its thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tensorhub/core/named_tensors.h"
#include "tensorhub/data/example.h"

namespace tensorhub {

namespace detail {
class DatasetNode;
class ElementIterator;
struct PassContext;
}  // namespace detail

/// Options of a whole pipeline (tf.data.Options).
struct DatasetOptions {
  /// Threads of a private pool created for each pass (tf.data.Options.threading.
  /// private_threadpool_size); 0 = the process-wide data pool.
  std::size_t private_threadpool_size = 0;
};

/// One pass over a Dataset. Not thread-safe; move-only.
class DatasetIterator {
 public:
  DatasetIterator(DatasetIterator&&) noexcept;
  DatasetIterator& operator=(DatasetIterator&&) noexcept;
  /// Stops the pass: joins its background threads, waits for its tasks in flight, and drops
  /// a cache that was being filled (it was not complete).
  ~DatasetIterator();

  /// The next element, or std::nullopt at the end of the pass.
  /// Throws the tensorhub::Error that producing the element raised (message naming the stage
  /// and element index); the iterator is closed after it: every later call throws
  /// FailedPrecondition naming that first error.
  std::optional<NamedTensors> next();

  /// Elements dropped by ignore_errors() stages during this pass so far.
  std::int64_t ignored_errors() const noexcept;

  /// Range-for support: `for (NamedTensors& e : it)` consumes this pass.
  class Cursor {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = NamedTensors;
    using difference_type = std::ptrdiff_t;
    using pointer = NamedTensors*;
    using reference = NamedTensors&;
    Cursor() = default;
    explicit Cursor(std::shared_ptr<DatasetIterator> owner);
    NamedTensors& operator*() const { return *current_; }
    NamedTensors* operator->() const { return &*current_; }
    Cursor& operator++();
    void operator++(int) { ++*this; }
    bool operator==(std::default_sentinel_t) const { return !current_.has_value(); }

   private:
    friend class DatasetIterator;
    std::shared_ptr<DatasetIterator> owner_;  // keeps the pass alive (Dataset::begin)
    DatasetIterator* it_ = nullptr;
    mutable std::optional<NamedTensors> current_;
  };
  Cursor begin();
  std::default_sentinel_t end() const { return {}; }

 private:
  friend class Dataset;
  DatasetIterator(std::shared_ptr<detail::PassContext> context,
                  std::shared_ptr<const detail::DatasetNode> node,
                  std::unique_ptr<detail::ElementIterator> root);
  std::shared_ptr<detail::PassContext> context_;
  std::shared_ptr<const detail::DatasetNode> node_;  // the stages read their nodes
  std::unique_ptr<detail::ElementIterator> root_;   // destroyed first (see ~DatasetIterator)
  std::string closed_by_;  // non-empty once an error closed the pass
};

/// A pipeline description (tf.data.Dataset). Cheap to copy; immutable.
class Dataset {
 public:
  /// tf.data.AUTOTUNE: see the file comment for what it means here.
  static constexpr std::int64_t kAutotune = -1;
  /// tf.data.INFINITE_CARDINALITY and tf.data.UNKNOWN_CARDINALITY: what cardinality() returns
  /// for a pipeline that never ends, or whose length cannot be known without reading it.
  static constexpr std::int64_t kInfiniteCardinality = -1;
  static constexpr std::int64_t kUnknownCardinality = -2;

  using MapFn = std::function<NamedTensors(NamedTensors)>;
  using Predicate = std::function<bool(const NamedTensors&)>;
  using InterleaveFn = std::function<Dataset(const NamedTensors&)>;
  /// Produces the elements of one pass, then std::nullopt.
  using Generator = std::function<std::optional<NamedTensors>()>;

  // --- Sources -------------------------------------------------------------------------------

  /// tf.data.Dataset.from_tensor_slices: element i holds row i of every tensor (the first
  /// dimension removed). Throws InvalidArgument for no tensors, a scalar, or tensors whose
  /// first dimensions differ (naming them).
  static Dataset from_tensor_slices(NamedTensors tensors);

  /// tf.data.Dataset.range(start, stop, step), Python's range: {"value": I64 scalar}.
  /// range(1, 5, 2) = [1, 3]; range(5, 1, -2) = [5, 3]; range(5, 1) = []. Throws
  /// InvalidArgument for step 0.
  static Dataset range(std::int64_t stop);
  static Dataset range(std::int64_t start, std::int64_t stop, std::int64_t step = 1);

  /// tf.data.Dataset.list_files: {"filename": bytes} for each path matching the glob `pattern`
  /// (POSIX glob(3), sorted), shuffled (shuffle, default true: a new order each pass, fixed by
  /// `seed` as Dataset::shuffle does). Matched when called (as in eager TensorFlow). Throws
  /// InvalidArgument "No files matched pattern: ..." when nothing matches.
  static Dataset list_files(const std::string& pattern, bool shuffle = true,
                            std::optional<std::uint64_t> seed = std::nullopt);
  /// list_files over several patterns (tf.data accepts a list): each pattern's matches in
  /// order, pattern after pattern, then shuffled as above. "No files matched pattern: a, b"
  /// when none matches anything.
  static Dataset list_files(const std::vector<std::string>& patterns, bool shuffle = true,
                            std::optional<std::uint64_t> seed = std::nullopt);

  /// tf.data.Dataset.from_generator: `make` is called at the start of every pass (and of every
  /// repetition under repeat) and returns that pass's generator, which is then called for each
  /// element until it returns std::nullopt. Both run in the thread that consumes this source
  /// (the caller's, a prefetch thread or a pool worker), one call at a time per pass; `make`
  /// may be called from several passes at once. An exception reaches the consumer as Error
  /// "from_generator: element I ..." (kinds kept as for map); the pass may call the generator
  /// again after it (ignore_errors does).
  static Dataset from_generator(std::function<Generator()> make);

  /// tf.data.Dataset.zip: element i merges element i of every dataset; ends with the
  /// shortest. Throws InvalidArgument for no datasets; next() throws InvalidArgument when two
  /// datasets' elements share a tensor name.
  static Dataset zip(const std::vector<Dataset>& datasets);

  // --- Transformations -----------------------------------------------------------------------

  /// tf.data.Dataset.map. num_parallel_calls 0 (tf.data's None): sequential, in the consumer's
  /// thread; > 0 or kAutotune: that many calls in flight on the pool. deterministic (default
  /// true) keeps the input order; false yields whichever call finishes first. An exception
  /// from `fn` reaches the consumer as Error "map: the function failed on element I ...", I
  /// the 0-based index of the input element in this map's pass (restarting at 0 on each
  /// repetition when a repeat() follows): the kind of a tensorhub::Error is kept,
  /// std::invalid_argument becomes InvalidArgument, anything else Internal.
  Dataset map(MapFn fn, std::int64_t num_parallel_calls = 0, bool deterministic = true) const;

  /// tf.data.Dataset.filter: keeps the elements for which `predicate` is true. Exceptions as map.
  Dataset filter(Predicate predicate) const;

  /// tf.data.Dataset.batch: stacks batch_size consecutive elements along a new first
  /// dimension; the last batch is smaller unless drop_remainder. Throws InvalidArgument for
  /// batch_size < 1; next() throws InvalidArgument when elements of one batch differ in names,
  /// dtypes or shapes (use padded_batch).
  Dataset batch(std::int64_t batch_size, bool drop_remainder = false) const;

  /// tf.data.Dataset.padded_batch: as batch, padding each tensor to padded_shapes[name] (-1 in
  /// a dimension, or a name left out: the largest size in the batch) with
  /// padding_values[name] (else padding_values[""], tf.data's single value for every
  /// component; else 0; converted to the tensor's dtype). next() throws
  /// InvalidArgument when ranks differ or an element is larger than its padded shape.
  Dataset padded_batch(std::int64_t batch_size,
                       std::map<std::string, std::vector<std::int64_t>> padded_shapes = {},
                       std::map<std::string, double> padding_values = {},
                       bool drop_remainder = false) const;

  /// tf.data.Dataset.unbatch: splits each element along its first dimension. next() throws
  /// InvalidArgument for a scalar or tensors of one element whose first dimensions differ.
  Dataset unbatch() const;

  /// tf.data.Dataset.shuffle: a buffer of buffer_size elements, from which each output is
  /// drawn uniformly and replaced by the next input. With a seed the order of every pass is
  /// reproducible whatever the thread count (inputs arrive in a deterministic order unless a
  /// map or interleave upstream has deterministic=false); reshuffle_each_iteration gives each
  /// pass (and each repetition under repeat) a different order, pass k drawing from
  /// (seed, k); false repeats the first pass's order. No seed: a random one per Dataset.
  /// Throws InvalidArgument for buffer_size < 1.
  Dataset shuffle(std::int64_t buffer_size, std::optional<std::uint64_t> seed = std::nullopt,
                  bool reshuffle_each_iteration = true) const;

  /// tf.data.Dataset.repeat: count passes over this dataset, -1 (default) forever; 0 is
  /// empty. Stops (instead of spinning) when a repetition yields nothing, as tf.data does.
  Dataset repeat(std::int64_t count = -1) const;

  /// tf.data.Dataset.take / skip: at most `count` elements / all but the first `count`;
  /// take(-1) is everything, skip(-1) nothing.
  Dataset take(std::int64_t count) const;
  Dataset skip(std::int64_t count) const;

  /// tf.data.Dataset.shard: the elements whose index mod num_shards == index. Throws
  /// InvalidArgument unless num_shards >= 1 and 0 <= index < num_shards.
  Dataset shard(std::int64_t num_shards, std::int64_t index) const;

  /// tf.data.Dataset.cache. filename "" caches in memory; otherwise in a file: reads
  /// "<filename>.cache.tfrecord" if it exists (even on the first pass, as tf.data does),
  /// else writes the pass to a temporary file renamed to that name when the pass completes.
  /// A pass that is destroyed early or meets an error leaves no cache (never a partial one).
  /// File format: TFRecord, one safetensors-serialized element per record; a corrupt cache
  /// file gives DataLoss naming it.
  Dataset cache(const std::string& filename = "") const;

  /// tf.data.Dataset.prefetch: a background thread keeps up to buffer_size elements ready
  /// (kAutotune: 2; 0: no prefetching). Throws InvalidArgument for other negative sizes.
  Dataset prefetch(std::int64_t buffer_size) const;

  /// tf.data.Dataset.interleave: fn maps each input element to a dataset; cycle_length of them
  /// are read at once, block_length consecutive elements from each in turn (defaults: kAutotune
  /// = the pool's size, 1). num_parallel_calls 0: reads in the consumer's thread; otherwise
  /// each open input reads its next block on the pool. The order is the sequential order in
  /// both cases (deterministic = false is accepted and also yields it, as tf.data permits).
  Dataset interleave(InterleaveFn fn, std::int64_t cycle_length = kAutotune,
                     std::int64_t block_length = 1, std::int64_t num_parallel_calls = 0,
                     bool deterministic = true) const;

  /// tf.data.Dataset.enumerate: adds `key` (default "index": I64 scalar start, start+1, ...).
  /// next() throws InvalidArgument if the element already has `key`.
  Dataset enumerate(std::int64_t start = 0, const std::string& key = "index") const;

  /// tf.data.experimental.ignore_errors: drops elements whose production raised a data error
  /// (tensorhub::Error of kind DataLoss or InvalidArgument: a corrupt record, a failed parse, a
  /// map function refusing its input) and counts them (DatasetIterator::ignored_errors(),
  /// Dataset::ignored_errors()). Other errors still reach the consumer.
  Dataset ignore_errors() const;

  /// tf.data.Dataset.with_options.
  Dataset with_options(DatasetOptions options) const;
  /// The options with_options() set (defaults otherwise).
  const DatasetOptions& options() const noexcept { return options_; }

  // --- Iteration -----------------------------------------------------------------------------

  /// tf.data.Dataset.cardinality: the number of elements of one pass when it is known without
  /// reading, else kInfiniteCardinality or kUnknownCardinality, by tf.data's rules: sources of
  /// tensors, range, list_files and from_hub know their length; TFRecordDataset, from_generator,
  /// filter, unbatch, interleave and ignore_errors do not; repeat() forever is infinite; batch,
  /// take, skip, shard and zip compute theirs from their inputs'. Never throws.
  std::int64_t cardinality() const;

  /// Starts a pass from the top.
  DatasetIterator iterator() const;
  /// Range-for: each loop is a new pass.
  DatasetIterator::Cursor begin() const;
  std::default_sentinel_t end() const { return {}; }

  /// Elements all ignore_errors() stages of this pipeline have dropped, every pass together
  /// (stages inside the datasets an interleave function returns are counted by
  /// DatasetIterator::ignored_errors only: they are not part of this description).
  std::int64_t ignored_errors() const;

  /// Internal: the root node.
  const std::shared_ptr<const detail::DatasetNode>& node() const noexcept { return node_; }
  /// Internal: a Dataset over a node built by a source outside dataset.cpp (from_hub).
  explicit Dataset(std::shared_ptr<const detail::DatasetNode> node, DatasetOptions options = {});

 private:
  Dataset then(std::shared_ptr<const detail::DatasetNode> node) const;
  std::shared_ptr<const detail::DatasetNode> node_;
  DatasetOptions options_;
};

/// tf.data.TFRecordDataset: {"record": U8 [length]} for each record of `filenames`, in order.
/// compression_type "", "NONE", "GZIP" or "ZLIB" (InvalidArgument otherwise, when called).
/// buffer_size is accepted for tf.data's signature (the reader keeps its own 256 KiB buffer);
/// num_parallel_reads 0 reads the files one after another, N > 0 (or kAutotune) interleaves N
/// files record by record on the pool, as TensorFlow's readers.py does
/// (interleave(cycle_length=N, block_length=1, num_parallel_calls=N)).
/// next() throws NotFound for a missing file and DataLoss naming the file and byte offset of a
/// corrupt or truncated record; after DataLoss the rest of that file is skipped (the framing
/// cannot be resynchronised), so ignore_errors() continues with the next file.
Dataset TFRecordDataset(std::vector<std::filesystem::path> filenames,
                        std::string_view compression_type = "", std::int64_t buffer_size = -1,
                        std::int64_t num_parallel_reads = 0);

/// A function for Dataset::map that parses the serialized tf.train.Example held in the byte
/// string `record_key` (as TFRecordDataset yields it) with `specs`, as
/// tf.io.parse_single_example does (example.h: shapes, defaults, errors), and returns one tensor
/// per feature, the record dropped:
///  - FixedLen / FixedLenSequence float32 or int64: the dense Tensor (F32 / I64).
///  - FixedLen string of shape []: the byte string as U8 [length] (e.g. a raw image, for
///    decoding in a later map). Other string shapes: InvalidArgument (no string tensors in
///    NamedTensors yet).
///  - VarLen float32 / int64: three tensors "<name>/indices" (I64 [N, 1]), "<name>/values"
///    ([N]) and "<name>/dense_shape" (I64 [1]), tf.SparseTensor's components; VarLen string:
///    InvalidArgument.
/// Throws (inside the pipeline, so the error names the map and element index) InvalidArgument
/// for a record that breaks a rule, DataLoss for bytes that are not an Example: both are what
/// ignore_errors() skips. Specs are checked when this is called (InvalidArgument).
Dataset::MapFn parse_example_fn(FeatureSpecs specs, std::string record_key = "record");

/// A U8 tensor of shape [bytes.size()] holding `bytes` (the byte-string representation).
Tensor bytes_tensor(std::string_view bytes);
/// The bytes of a U8 rank-1 tensor. Throws InvalidArgument for another dtype or rank.
std::string tensor_bytes(const Tensor& tensor);

/// Number of pipeline background threads (prefetch producers) alive in this process.
std::size_t dataset_background_threads() noexcept;

}  // namespace tensorhub
