// Request batching, after TF Serving's --enable_batching: concurrent predict calls for the
// same servable and signature are merged into one batch (up to max_batch_size rows, waiting
// at most batch_timeout_micros for more), run as one predict, and split back. One matrix
// product for many requests is what makes a small model fast under load.
//
// Thread safety: predict() may be called from any number of threads.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tensorhub/serve/servable.h"

namespace tensorhub {

/// TF Serving's BatchingParameters (--batching_parameters_file), with its defaults.
struct BatchingParameters {
  std::int64_t max_batch_size = 1000;
  std::int64_t batch_timeout_micros = 0;
  std::int64_t max_enqueued_batches = 100;
  std::int64_t num_batch_threads = 0;  ///< 0: the number of cores
};

/// Parses a --batching_parameters_file (text-format BatchingParameters, e.g.
/// "max_batch_size { value: 128 } batch_timeout_micros { value: 1000 }").
/// Throws InvalidArgument naming the line for a syntax error or a non-positive size.
BatchingParameters parse_batching_parameters(const std::string& text);

class Batcher {
 public:
  explicit Batcher(BatchingParameters params);
  ~Batcher();
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  /// servable->predict(signature, inputs), run inside a batch. Blocks until done or until
  /// `deadline`. Throws what predict throws, Unavailable when more than max_enqueued_batches
  /// batches wait, and DeadlineExceeded when `deadline` passes first: a request still queued
  /// is then taken out of the queue; one already running finishes and its answer is dropped.
  NamedTensors predict(const std::shared_ptr<const Servable>& servable, const std::string& signature,
                       NamedTensors inputs,
                       std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max());

 private:
  struct Call;
  void work();
  void run(std::vector<std::shared_ptr<Call>>& batch);

  BatchingParameters params_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Call>> queue_;
  std::int64_t queued_rows_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace tensorhub
