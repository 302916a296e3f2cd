#include "tensorhub/serve/batcher.h"


#include <algorithm>
#include <chrono>
#include <cstring>
#include <future>

#include "serving_config.pb.h"
#include "text_proto.h"
#include "tensorhub/core/error.h"

namespace tensorhub {
namespace {


std::int64_t rows_of(const NamedTensors& inputs) {
  return inputs.empty() || inputs.begin()->second.shape.empty() ? 0 : inputs.begin()->second.shape[0];
}

// Inputs can share a batch when every tensor has the same name, dtype and per-row shape.
bool same_layout(const NamedTensors& a, const NamedTensors& b) {
  if (a.size() != b.size()) return false;
  for (auto ia = a.begin(), ib = b.begin(); ia != a.end(); ++ia, ++ib) {
    if (ia->first != ib->first || ia->second.dtype != ib->second.dtype) return false;
    const auto& sa = ia->second.shape;
    const auto& sb = ib->second.shape;
    if (sa.size() != sb.size() || sa.empty() || !std::equal(sa.begin() + 1, sa.end(), sb.begin() + 1)) return false;
  }
  return true;
}

}  // namespace

BatchingParameters parse_batching_parameters(const std::string& text) {
  serving::BatchingParameters proto;
  parse_text_proto(text, &proto, "--batching_parameters_file");
  BatchingParameters p;
  if (proto.has_max_batch_size()) p.max_batch_size = proto.max_batch_size().value();
  if (proto.has_batch_timeout_micros()) p.batch_timeout_micros = proto.batch_timeout_micros().value();
  if (proto.has_max_enqueued_batches()) p.max_enqueued_batches = proto.max_enqueued_batches().value();
  if (proto.has_num_batch_threads()) p.num_batch_threads = proto.num_batch_threads().value();
  if (p.max_batch_size < 1 || p.batch_timeout_micros < 0 || p.max_enqueued_batches < 1 || p.num_batch_threads < 0)
    throw InvalidArgument("batching parameters must be positive (max_batch_size, max_enqueued_batches) or "
                          "non-negative (batch_timeout_micros, num_batch_threads)");
  return p;
}

struct Batcher::Call {
  std::shared_ptr<const Servable> servable;
  std::string signature;
  NamedTensors inputs;  // owned: a caller past its deadline leaves while the batch may still run
  std::int64_t rows;
  std::chrono::steady_clock::time_point enqueued;
  std::promise<NamedTensors> result;
};

Batcher::Batcher(BatchingParameters params) : params_(params) {
  std::int64_t n = params_.num_batch_threads;
  if (n <= 0) n = std::max(1u, std::thread::hardware_concurrency());
  for (std::int64_t i = 0; i < n; ++i) threads_.emplace_back([this] { work(); });
}

Batcher::~Batcher() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

NamedTensors Batcher::predict(const std::shared_ptr<const Servable>& servable, const std::string& signature,
                              NamedTensors inputs, std::chrono::steady_clock::time_point deadline) {
  auto call = std::make_shared<Call>();
  call->servable = servable;
  call->signature = signature;
  call->rows = rows_of(inputs);
  call->inputs = std::move(inputs);
  call->enqueued = std::chrono::steady_clock::now();
  auto future = call->result.get_future();
  {
    std::lock_guard lock(mutex_);
    if (queued_rows_ + call->rows > params_.max_enqueued_batches * params_.max_batch_size)
      throw Unavailable("the batch queue is full (max_enqueued_batches " + std::to_string(params_.max_enqueued_batches) +
                        " of max_batch_size " + std::to_string(params_.max_batch_size) + "); retry later");
    queued_rows_ += call->rows;
    queue_.push_back(call);
  }
  cv_.notify_one();
  if (future.wait_until(deadline) == std::future_status::ready) return future.get();
  {
    std::lock_guard lock(mutex_);
    const auto it = std::find(queue_.begin(), queue_.end(), call);
    if (it != queue_.end()) {  // still waiting for a batch: it will never run
      queue_.erase(it);
      queued_rows_ -= call->rows;
    }
  }
  cv_.notify_all();  // a worker waiting on this call's batch timeout re-reads the queue
  throw DeadlineExceeded("Deadline exceeded while waiting for a batch or running in it");
}

void Batcher::work() {
  while (true) {
    std::vector<std::shared_ptr<Call>> batch;
    {
      std::unique_lock lock(mutex_);
      // Wait for a call, then (up to the batch timeout, counted from the oldest call) for
      // the batch to fill. The oldest call can change while waiting (a caller past its
      // deadline leaves), so the timeout is read again after every wake-up.
      while (true) {
        cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stop_ and nothing left
        if (stop_ || queued_rows_ >= params_.max_batch_size) break;
        const auto timeout = queue_.front()->enqueued + std::chrono::microseconds(params_.batch_timeout_micros);
        if (std::chrono::steady_clock::now() >= timeout) break;
        cv_.wait_until(lock, timeout);
      }
      auto first = queue_.front();
      queue_.pop_front();
      batch.push_back(first);
      std::int64_t rows = first->rows;
      for (auto it = queue_.begin(); it != queue_.end() && rows < params_.max_batch_size;) {
        const auto& c = *it;
        if (c->servable == first->servable && c->signature == first->signature &&
            rows + c->rows <= params_.max_batch_size && same_layout(c->inputs, first->inputs)) {
          rows += c->rows;
          batch.push_back(c);
          it = queue_.erase(it);
        } else {
          ++it;
        }
      }
      for (const auto& c : batch) queued_rows_ -= c->rows;
    }
    run(batch);
  }
}

void Batcher::run(std::vector<std::shared_ptr<Call>>& batch) {
  try {
    if (batch.size() == 1) {
      batch[0]->result.set_value(batch[0]->servable->predict(batch[0]->signature, batch[0]->inputs));
      return;
    }
    // Concatenate along the batch dimension: row-major tensors concatenate as bytes.
    std::int64_t total = 0;
    for (const auto& c : batch) total += c->rows;
    NamedTensors merged;
    for (const auto& [name, first] : batch[0]->inputs) {
      Tensor& t = merged[name];
      t.dtype = first.dtype;
      t.shape = first.shape;
      t.shape[0] = total;
      t.data.reserve(first.data.size() / static_cast<std::size_t>(std::max<std::int64_t>(1, batch[0]->rows)) *
                     static_cast<std::size_t>(total));
      for (const auto& c : batch) {
        const auto& part = c->inputs.at(name).data;
        t.data.insert(t.data.end(), part.begin(), part.end());
      }
    }
    const NamedTensors out = batch[0]->servable->predict(batch[0]->signature, merged);
    std::int64_t offset = 0;
    for (auto& c : batch) {
      NamedTensors mine;
      for (const auto& [name, t] : out) {
        if (t.shape.empty() || t.shape[0] != total) throw Internal("output " + name + " lost the batch dimension");
        const std::size_t row_bytes = t.data.size() / static_cast<std::size_t>(total);
        Tensor slice;
        slice.dtype = t.dtype;
        slice.shape = t.shape;
        slice.shape[0] = c->rows;
        slice.data.assign(t.data.begin() + static_cast<std::ptrdiff_t>(offset * row_bytes),
                          t.data.begin() + static_cast<std::ptrdiff_t>((offset + c->rows) * row_bytes));
        mine.emplace(name, std::move(slice));
      }
      offset += c->rows;
      c->result.set_value(std::move(mine));
    }
  } catch (...) {
    for (auto& c : batch) {
      try {
        c->result.set_exception(std::current_exception());
      } catch (const std::future_error&) {
        // already answered
      }
    }
  }
}

}  // namespace tensorhub
