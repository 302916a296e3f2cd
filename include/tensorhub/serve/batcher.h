// Request batching, after TF Serving's --enable_batching: concurrent predict calls for the
// same servable and signature are merged into one batch (up to max_batch_size rows, waiting
// at most batch_timeout_micros for more), run as one predict, and split back. One matrix
// product for many requests is what makes a small model fast under load.
//
// Thread safety: predict() and submit() may be called from any number of threads.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tensorhub/core/mutex.h"
#include "tensorhub/serve/servable.h"

namespace tensorhub {

/// TF Serving's BatchingParameters (--batching_parameters_file), with its defaults.
struct BatchingParameters {
  std::int64_t max_batch_size = 1000;
  std::int64_t batch_timeout_micros = 0;
  std::int64_t max_enqueued_batches = 100;
  std::int64_t num_batch_threads = 0;  ///< 0: the number of cores
  /// Batch sizes the model may be run with, increasing, the last one max_batch_size: a batch
  /// of n rows is padded up to the first entry >= n with copies of the first row of its last
  /// request, and each caller gets only its own rows back. Empty: any size.
  std::vector<std::int64_t> allowed_batch_sizes;
  /// TF Serving's pad_variable_length_inputs: requests whose inputs differ in dimensions
  /// other than the first (the batch) share a batch; each input is padded at the end of every
  /// such dimension to the largest in the batch, with its own first element. Outputs keep the
  /// padded shape. Inputs of rank 1 to 6 only. Off: only requests of equal shapes share one.
  bool pad_variable_length_inputs = false;
};

/// Parses a --batching_parameters_file (text-format BatchingParameters, e.g.
/// "max_batch_size { value: 128 } batch_timeout_micros { value: 1000 }").
/// Throws InvalidArgument naming the line for a syntax error, and what
/// validate_batching_parameters throws.
BatchingParameters parse_batching_parameters(const std::string& text);

/// Throws InvalidArgument for a non-positive size, or allowed_batch_sizes that do not increase
/// ("allowed_batch_sizes entries must be monotonically increasing") or whose last entry is not
/// max_batch_size (TF Serving's "Last entry in allowed_batch_sizes must match max_batch_size;
/// last entry was 6; expected 8").
void validate_batching_parameters(const BatchingParameters& params);

class Batcher {
 public:
  /// Starts num_batch_threads workers. Throws what validate_batching_parameters throws.
  explicit Batcher(BatchingParameters params);
  ~Batcher();
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  /// servable->predict(signature, inputs), run inside a batch. Blocks until done or until
  /// `deadline`. Throws what predict throws, InvalidArgument for more rows than max_batch_size
  /// ("Task size 9 is larger than maximum input batch size 8", as TF Serving), Unavailable
  /// when more than max_enqueued_batches batches wait, and DeadlineExceeded when `deadline`
  /// passes first: a request still queued is then taken out of the queue; one already running
  /// finishes and its answer is dropped.
  NamedTensors predict(const std::shared_ptr<const Servable>& servable, const std::string& signature,
                       NamedTensors inputs,
                       std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max());

  /// What submit() calls when a call is done: its outputs, or the exception predict() would
  /// have thrown (then `outputs` is empty).
  using Done = std::function<void(NamedTensors outputs, std::exception_ptr error)>;

  /// predict() without blocking, for servers that answer from another thread (gRPC's callback
  /// API): queues the call and returns; `done` is then called exactly once, on a batch thread,
  /// with the outputs or the error. A call whose `deadline` has passed when its batch forms is
  /// not run: `done` gets DeadlineExceeded. Throws at once, without calling `done`, for more
  /// rows than max_batch_size (InvalidArgument) and a full queue (Unavailable), as predict().
  void submit(const std::shared_ptr<const Servable>& servable, const std::string& signature, NamedTensors inputs,
              std::chrono::steady_clock::time_point deadline, Done done);

  /// Rows waiting in the queue for a batch (for monitoring, and for tests that need to know
  /// that requests are queued).
  std::int64_t queued_rows() const;

 private:
  struct Call;
  void enqueue(const std::shared_ptr<Call>& call) TENSORHUB_LOCKS_EXCLUDED(mutex_);
  /// Waits for the next batch and takes it (and the calls past their deadline) out of the
  /// queue; false when stopped with nothing left.
  bool next_batch(std::vector<std::shared_ptr<Call>>& batch, std::vector<std::shared_ptr<Call>>& expired)
      TENSORHUB_LOCKS_EXCLUDED(mutex_);
  void work();
  void run(std::vector<std::shared_ptr<Call>>& batch) TENSORHUB_LOCKS_EXCLUDED(mutex_);
  bool can_share_batch(const NamedTensors& a, const NamedTensors& b) const;
  NamedTensors merge_inputs(const std::vector<std::shared_ptr<Call>>& batch, std::int64_t padding_rows) const;
  std::int64_t padded_batch_size(std::int64_t rows) const;

  BatchingParameters params_;
  mutable Mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Call>> queue_ TENSORHUB_GUARDED_BY(mutex_);
  std::int64_t queued_rows_ TENSORHUB_GUARDED_BY(mutex_) = 0;
  bool stop_ TENSORHUB_GUARDED_BY(mutex_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace tensorhub
