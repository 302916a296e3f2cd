// Dataset: the public facade (argument checks, node construction) and DatasetIterator.
#include "tensorhub/data/dataset.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>

#include "dataset_internal.h"
#include "tensorhub/core/error.h"
#include "tensorhub/core/mutex.h"

namespace tensorhub {

namespace detail {

std::atomic<std::size_t> g_background_threads{0};

namespace {

Mutex shared_pool_mu;
std::size_t shared_pool_threads TENSORHUB_GUARDED_BY(shared_pool_mu) = 0;  // 0: not set
bool shared_pool_created TENSORHUB_GUARDED_BY(shared_pool_mu) = false;

// set_shared_pool_threads' value, else TENSORHUB_DATA_THREADS, else 0 (one per core).
std::size_t shared_pool_size() TENSORHUB_EXCLUSIVE_LOCKS_REQUIRED(shared_pool_mu) {
  if (shared_pool_threads > 0) return shared_pool_threads;
  if (const char* env = std::getenv("TENSORHUB_DATA_THREADS"); env && *env) {
    const long n = std::strtol(env, nullptr, 10);
    if (n > 0) return static_cast<std::size_t>(n);
  }
  return 0;
}

}  // namespace

ThreadPool& shared_pool() {
  static ThreadPool* pool = [] {
    MutexLock lock(shared_pool_mu);
    shared_pool_created = true;
    // Never destroyed: joining workers at exit would only add a way to hang.
    return new ThreadPool(shared_pool_size());
  }();
  return *pool;
}

void set_shared_pool_threads(std::size_t threads) {
  if (threads == 0) throw InvalidArgument("set_shared_pool_threads: 0 threads; give at least 1");
  MutexLock lock(shared_pool_mu);
  if (shared_pool_created) {
    throw FailedPrecondition("set_shared_pool_threads(" + std::to_string(threads) +
                             "): the shared data pool exists already; call it before the first "
                             "pipeline runs, or use DatasetOptions::private_threadpool_size");
  }
  shared_pool_threads = threads;
}

[[noreturn]] void rethrow_with_prefix(const std::string& prefix) {
  try {
    throw;
  } catch (const Error& e) {
    throw Error(e.kind(), prefix + e.message());
  } catch (const std::invalid_argument& e) {
    throw InvalidArgument(prefix + e.what());
  } catch (const std::exception& e) {
    throw Internal(prefix + e.what());
  } catch (...) {
    throw Internal(prefix + "an exception that is not a std::exception");
  }
}

bool is_data_error(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    return e.kind() == ErrorKind::kDataLoss || e.kind() == ErrorKind::kInvalidArgument;
  } catch (...) {
    return false;
  }
}

std::string shape_string(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::int64_t autotuned(std::int64_t value, const ContextPtr& context) {
  return value == Dataset::kAutotune ? static_cast<std::int64_t>(context->pool->size()) : value;
}

}  // namespace detail

namespace {

void require(bool ok, const std::string& message) {
  if (!ok) throw InvalidArgument(message);
}

std::uint64_t random_seed() {
  std::random_device device;
  return (static_cast<std::uint64_t>(device()) << 32) ^ device();
}

}  // namespace

// --- DatasetIterator -------------------------------------------------------------------------

DatasetIterator::DatasetIterator(std::shared_ptr<detail::PassContext> context,
                                 std::shared_ptr<const detail::DatasetNode> node,
                                 std::unique_ptr<detail::ElementIterator> root)
    : context_(std::move(context)), node_(std::move(node)), root_(std::move(root)) {}
DatasetIterator::DatasetIterator(DatasetIterator&&) noexcept = default;
DatasetIterator& DatasetIterator::operator=(DatasetIterator&& other) noexcept {
  root_.reset();  // stop this pass before its nodes and pool may go
  context_ = std::move(other.context_);
  node_ = std::move(other.node_);
  root_ = std::move(other.root_);
  closed_by_ = std::move(other.closed_by_);
  return *this;
}
DatasetIterator::~DatasetIterator() {
  root_.reset();  // stages first: they join their threads and tasks while the pool exists
}

std::optional<NamedTensors> DatasetIterator::next() {
  if (!closed_by_.empty()) {
    throw FailedPrecondition("dataset iterator: this pass was closed by an earlier error (" +
                             closed_by_ + "); start a new pass with Dataset::iterator()");
  }
  if (!root_) return std::nullopt;
  try {
    auto element = root_->next();
    if (!element) root_.reset();  // the pass is over: free its threads and buffers now
    return element;
  } catch (const std::exception& e) {
    closed_by_ = e.what();
    root_.reset();
    throw;
  } catch (...) {
    closed_by_ = "an exception that is not a std::exception";
    root_.reset();
    throw;
  }
}

std::int64_t DatasetIterator::ignored_errors() const noexcept {
  return context_ ? context_->ignored_errors.load() : 0;
}

DatasetIterator::Cursor::Cursor(std::shared_ptr<DatasetIterator> owner)
    : owner_(std::move(owner)), it_(owner_.get()) {
  ++*this;
}

DatasetIterator::Cursor& DatasetIterator::Cursor::operator++() {
  current_ = it_->next();
  return *this;
}

DatasetIterator::Cursor DatasetIterator::begin() {
  Cursor cursor;
  cursor.it_ = this;
  ++cursor;
  return cursor;
}

// --- Dataset: sources ------------------------------------------------------------------------

Dataset::Dataset(std::shared_ptr<const detail::DatasetNode> node, DatasetOptions options)
    : node_(std::move(node)), options_(options) {}

Dataset Dataset::then(std::shared_ptr<const detail::DatasetNode> node) const {
  return Dataset(std::move(node), options_);
}

Dataset Dataset::from_tensor_slices(NamedTensors tensors) {
  require(!tensors.empty(), "from_tensor_slices: no tensors; give at least one");
  const auto& [first_name, first] = *tensors.begin();
  for (const auto& [name, t] : tensors) {
    require(!t.shape.empty(), "from_tensor_slices: tensor '" + name +
                                  "' is a scalar; slicing needs at least one dimension");
    require(t.shape[0] == first.shape[0],
            "from_tensor_slices: tensor '" + name + "' has shape " + detail::shape_string(t.shape) +
                " but '" + first_name + "' has " + detail::shape_string(first.shape) +
                "; every tensor needs the same first dimension");
  }
  return Dataset(detail::make_tensor_slices_node(std::move(tensors)));
}

Dataset Dataset::range(std::int64_t stop) { return range(0, stop, 1); }

Dataset Dataset::range(std::int64_t start, std::int64_t stop, std::int64_t step) {
  require(step != 0, "range: step is 0; give a positive or negative step");
  return Dataset(detail::make_range_node(start, stop, step));
}

Dataset Dataset::zip(const std::vector<Dataset>& datasets) {
  require(!datasets.empty(), "zip: no datasets; give at least one");
  std::vector<detail::NodePtr> nodes;
  for (const auto& d : datasets) nodes.push_back(d.node_);
  return Dataset(detail::make_zip_node(std::move(nodes)), datasets.front().options_);
}

// --- Dataset: transformations ----------------------------------------------------------------

Dataset Dataset::map(MapFn fn, std::int64_t num_parallel_calls, bool deterministic) const {
  require(num_parallel_calls >= 0 || num_parallel_calls == kAutotune,
          "map: num_parallel_calls " + std::to_string(num_parallel_calls) +
              "; give 0 (sequential), a positive count or Dataset::kAutotune");
  if (num_parallel_calls == 0) return then(detail::make_map_node(node_, std::move(fn)));
  return then(detail::make_parallel_map_node(node_, std::move(fn), num_parallel_calls, deterministic));
}

Dataset Dataset::filter(Predicate predicate) const {
  return then(detail::make_filter_node(node_, std::move(predicate)));
}

Dataset Dataset::batch(std::int64_t batch_size, bool drop_remainder) const {
  require(batch_size >= 1, "batch: batch_size " + std::to_string(batch_size) + "; give at least 1");
  return then(detail::make_batch_node(node_, batch_size, drop_remainder));
}

Dataset Dataset::padded_batch(std::int64_t batch_size,
                              std::map<std::string, std::vector<std::int64_t>> padded_shapes,
                              std::map<std::string, double> padding_values,
                              bool drop_remainder) const {
  require(batch_size >= 1,
          "padded_batch: batch_size " + std::to_string(batch_size) + "; give at least 1");
  return then(detail::make_padded_batch_node(node_, batch_size, std::move(padded_shapes),
                                             std::move(padding_values), drop_remainder));
}

Dataset Dataset::unbatch() const { return then(detail::make_unbatch_node(node_)); }

Dataset Dataset::shuffle(std::int64_t buffer_size, std::optional<std::uint64_t> seed,
                         bool reshuffle_each_iteration) const {
  require(buffer_size >= 1,
          "shuffle: buffer_size " + std::to_string(buffer_size) + "; give at least 1");
  return then(detail::make_shuffle_node(node_, buffer_size, seed ? *seed : random_seed(),
                                        reshuffle_each_iteration));
}

Dataset Dataset::repeat(std::int64_t count) const {
  require(count >= -1, "repeat: count " + std::to_string(count) + "; give -1 (forever) or >= 0");
  return then(detail::make_repeat_node(node_, count));
}

Dataset Dataset::take(std::int64_t count) const {
  require(count >= -1, "take: count " + std::to_string(count) + "; give -1 (all) or >= 0");
  return then(detail::make_take_node(node_, count));
}

Dataset Dataset::skip(std::int64_t count) const {
  require(count >= -1, "skip: count " + std::to_string(count) + "; give -1 (all) or >= 0");
  return then(detail::make_skip_node(node_, count));
}

Dataset Dataset::shard(std::int64_t num_shards, std::int64_t index) const {
  require(num_shards >= 1, "shard: num_shards " + std::to_string(num_shards) + "; give at least 1");
  require(index >= 0 && index < num_shards,
          "shard: index " + std::to_string(index) + " is outside [0, " +
              std::to_string(num_shards) + ")");
  return then(detail::make_shard_node(node_, num_shards, index));
}

Dataset Dataset::cache(const std::string& filename) const {
  return then(detail::make_cache_node(node_, filename));
}

Dataset Dataset::prefetch(std::int64_t buffer_size) const {
  require(buffer_size >= 0 || buffer_size == kAutotune,
          "prefetch: buffer_size " + std::to_string(buffer_size) +
              "; give >= 0 or Dataset::kAutotune");
  if (buffer_size == 0) return *this;
  return then(detail::make_prefetch_node(node_, buffer_size == kAutotune ? 2 : buffer_size));
}

Dataset Dataset::interleave(InterleaveFn fn, std::int64_t cycle_length, std::int64_t block_length,
                            std::int64_t num_parallel_calls, bool deterministic) const {
  require(cycle_length >= 1 || cycle_length == kAutotune,
          "interleave: cycle_length " + std::to_string(cycle_length) +
              "; give at least 1 or Dataset::kAutotune");
  require(block_length >= 1,
          "interleave: block_length " + std::to_string(block_length) + "; give at least 1");
  require(num_parallel_calls >= 0 || num_parallel_calls == kAutotune,
          "interleave: num_parallel_calls " + std::to_string(num_parallel_calls) +
              "; give 0, a positive count or Dataset::kAutotune");
  (void)deterministic;  // the sequential order is always kept (see the header)
  return then(detail::make_interleave_node(node_, std::move(fn), cycle_length, block_length,
                                           num_parallel_calls != 0));
}

Dataset Dataset::enumerate(std::int64_t start, const std::string& key) const {
  return then(detail::make_enumerate_node(node_, start, key));
}

Dataset Dataset::ignore_errors() const { return then(detail::make_ignore_errors_node(node_)); }

Dataset Dataset::with_options(DatasetOptions options) const { return Dataset(node_, options); }

// --- Dataset: iteration ----------------------------------------------------------------------

DatasetIterator Dataset::iterator() const {
  auto context = std::make_shared<detail::PassContext>();
  if (options_.private_threadpool_size > 0) {
    context->private_pool = std::make_unique<ThreadPool>(options_.private_threadpool_size);
    context->pool = context->private_pool.get();
  } else {
    context->pool = &detail::shared_pool();
  }
  auto root = node_->make_iterator(context);
  return DatasetIterator(std::move(context), node_, std::move(root));
}

DatasetIterator::Cursor Dataset::begin() const {
  return DatasetIterator::Cursor(std::make_shared<DatasetIterator>(iterator()));
}

std::int64_t Dataset::cardinality() const { return node_->cardinality(); }

std::int64_t Dataset::ignored_errors() const {
  std::int64_t total = 0;
  std::vector<detail::NodePtr> stack{node_};
  while (!stack.empty()) {
    auto node = stack.back();
    stack.pop_back();
    total += node->ignored_errors();
    for (auto& input : node->inputs()) stack.push_back(input);
  }
  return total;
}

// --- Byte strings ----------------------------------------------------------------------------

Tensor bytes_tensor(std::string_view bytes) {
  Tensor t;
  t.dtype = DType::kU8;
  t.shape = {static_cast<std::int64_t>(bytes.size())};
  t.data.resize(bytes.size());
  if (!bytes.empty()) std::memcpy(t.data.data(), bytes.data(), bytes.size());
  return t;
}

std::string tensor_bytes(const Tensor& tensor) {
  if (tensor.dtype != DType::kU8 || tensor.shape.size() != 1) {
    throw InvalidArgument("tensor_bytes: a byte string is a U8 tensor of rank 1; got " +
                          dtype_name(tensor.dtype) + " " + detail::shape_string(tensor.shape));
  }
  return {reinterpret_cast<const char*>(tensor.data.data()), tensor.data.size()};
}

std::size_t dataset_background_threads() noexcept { return detail::g_background_threads.load(); }

}  // namespace tensorhub
