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

// The same input names and dtypes, each of one rank; `equal_rows`: also one shape after the
// batch dimension.
bool same_layout(const NamedTensors& a, const NamedTensors& b, bool equal_rows) {
  if (a.size() != b.size()) return false;
  for (auto ia = a.begin(), ib = b.begin(); ia != a.end(); ++ia, ++ib) {
    if (ia->first != ib->first || ia->second.dtype != ib->second.dtype) return false;
    const auto& sa = ia->second.shape;
    const auto& sb = ib->second.shape;
    if (sa.size() != sb.size() || sa.empty()) return false;
    if (equal_rows && !std::equal(sa.begin() + 1, sa.end(), sb.begin() + 1)) return false;
  }
  return true;
}

// Copies the row-major `src` of shape `from` into `dst` of the larger shape `to` (same rank),
// each index at its own place: dims [dim, rank) of one block.
void copy_into_larger(const std::byte* src, const std::vector<std::int64_t>& from, std::byte* dst,
                      const std::vector<std::int64_t>& to, std::size_t dim, std::size_t element) {
  if (dim + 1 == from.size()) {
    std::memcpy(dst, src, static_cast<std::size_t>(from[dim]) * element);
    return;
  }
  std::size_t src_stride = element, dst_stride = element;
  for (std::size_t d = dim + 1; d < from.size(); ++d) {
    src_stride *= static_cast<std::size_t>(from[d]);
    dst_stride *= static_cast<std::size_t>(to[d]);
  }
  for (std::int64_t i = 0; i < from[dim]; ++i)
    copy_into_larger(src + i * src_stride, from, dst + i * dst_stride, to, dim + 1, element);
}

// TF Serving's AddPadding (batching_util.cc): `t` padded at the end of every dimension but the
// first up to `dims`, with its own first element.
Tensor pad_to(const Tensor& t, const std::vector<std::int64_t>& dims) {
  std::vector<std::int64_t> shape = dims;
  shape[0] = t.shape[0];
  if (shape == t.shape) return t;
  if (t.shape.size() > 6) throw InvalidArgument("Only tensors with rank from 1 to 6 can be padded.");
  if (t.numel() < 1) throw InvalidArgument("Got empty tensor in batch of non-empty tensors.");
  Tensor out;
  out.dtype = t.dtype;
  out.shape = shape;
  const std::size_t element = dtype_size(t.dtype);
  out.data.resize(static_cast<std::size_t>(out.numel()) * element);
  for (std::size_t at = 0; at < out.data.size(); at += element) std::memcpy(out.data.data() + at, t.data.data(), element);
  copy_into_larger(t.data.data(), t.shape, out.data.data(), out.shape, 0, element);
  return out;
}

}  // namespace

void validate_batching_parameters(const BatchingParameters& p) {
  if (p.max_batch_size < 1 || p.batch_timeout_micros < 0 || p.max_enqueued_batches < 1 || p.num_batch_threads < 0)
    throw InvalidArgument("batching parameters must be positive (max_batch_size, max_enqueued_batches) or "
                          "non-negative (batch_timeout_micros, num_batch_threads)");
  const auto& allowed = p.allowed_batch_sizes;
  for (std::size_t i = 0; i < allowed.size(); ++i) {
    if (allowed[i] < 1) throw InvalidArgument("allowed_batch_sizes entries must be positive, got " + std::to_string(allowed[i]));
    if (i > 0 && allowed[i] <= allowed[i - 1])
      throw InvalidArgument("allowed_batch_sizes entries must be monotonically increasing");
  }
  // TF Serving's CreateBasicBatchingSession, word for word.
  if (!allowed.empty() && allowed.back() != p.max_batch_size)
    throw InvalidArgument("Last entry in allowed_batch_sizes must match max_batch_size; last entry was " +
                          std::to_string(allowed.back()) + "; expected " + std::to_string(p.max_batch_size));
}

BatchingParameters parse_batching_parameters(const std::string& text) {
  serving::BatchingParameters proto;
  parse_text_proto(text, &proto, "--batching_parameters_file");
  BatchingParameters p;
  if (proto.has_max_batch_size()) p.max_batch_size = proto.max_batch_size().value();
  if (proto.has_batch_timeout_micros()) p.batch_timeout_micros = proto.batch_timeout_micros().value();
  if (proto.has_max_enqueued_batches()) p.max_enqueued_batches = proto.max_enqueued_batches().value();
  if (proto.has_num_batch_threads()) p.num_batch_threads = proto.num_batch_threads().value();
  p.allowed_batch_sizes.assign(proto.allowed_batch_sizes().begin(), proto.allowed_batch_sizes().end());
  p.pad_variable_length_inputs = proto.pad_variable_length_inputs();
  validate_batching_parameters(p);
  return p;
}

struct Batcher::Call {
  Call(const std::shared_ptr<const Servable>& s, const std::string& sig, NamedTensors in,
       std::chrono::steady_clock::time_point until, Done on_done)
      : servable(s), signature(sig), inputs(std::move(in)), rows(rows_of(inputs)),
        enqueued(std::chrono::steady_clock::now()), deadline(until), done(std::move(on_done)) {}

  std::shared_ptr<const Servable> servable;
  std::string signature;
  NamedTensors inputs;  // owned: a caller past its deadline leaves while the batch may still run
  std::int64_t rows;
  std::chrono::steady_clock::time_point enqueued;
  std::chrono::steady_clock::time_point deadline;
  Done done;  // called once, by answer()
  bool answered = false;

  void answer(NamedTensors outputs, std::exception_ptr error) {
    if (answered) return;
    answered = true;
    done(std::move(outputs), error);
  }
};

namespace {

const char* const kDeadlineText = "Deadline exceeded while waiting for a batch or running in it";

}  // namespace

Batcher::Batcher(BatchingParameters params) : params_(std::move(params)) {
  validate_batching_parameters(params_);
  std::int64_t n = params_.num_batch_threads;
  if (n <= 0) n = std::max(1u, std::thread::hardware_concurrency());
  for (std::int64_t i = 0; i < n; ++i) threads_.emplace_back([this] { work(); });
}

Batcher::~Batcher() {
  {
    MutexLock lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void Batcher::enqueue(const std::shared_ptr<Call>& call) {
  if (call->rows > params_.max_batch_size)
    throw InvalidArgument("Task size " + std::to_string(call->rows) + " is larger than maximum input batch size " +
                          std::to_string(params_.max_batch_size));
  {
    MutexLock lock(mutex_);
    if (queued_rows_ + call->rows > params_.max_enqueued_batches * params_.max_batch_size)
      throw Unavailable("the batch queue is full (max_enqueued_batches " + std::to_string(params_.max_enqueued_batches) +
                        " of max_batch_size " + std::to_string(params_.max_batch_size) + "); retry later");
    queued_rows_ += call->rows;
    queue_.push_back(call);
  }
  cv_.notify_one();
}

void Batcher::submit(const std::shared_ptr<const Servable>& servable, const std::string& signature, NamedTensors inputs,
                     std::chrono::steady_clock::time_point deadline, Done done) {
  enqueue(std::make_shared<Call>(servable, signature, std::move(inputs), deadline, std::move(done)));
}

NamedTensors Batcher::predict(const std::shared_ptr<const Servable>& servable, const std::string& signature,
                              NamedTensors inputs, std::chrono::steady_clock::time_point deadline) {
  // The promise outlives this frame when the caller leaves at its deadline with the batch
  // still running: the call owns it.
  auto result = std::make_shared<std::promise<NamedTensors>>();
  auto future = result->get_future();
  auto call = std::make_shared<Call>(servable, signature, std::move(inputs), deadline,
                                     [result](NamedTensors outputs, std::exception_ptr error) {
                                       if (error) result->set_exception(error);
                                       else result->set_value(std::move(outputs));
                                     });
  enqueue(call);
  if (future.wait_until(deadline) == std::future_status::ready) return future.get();
  {
    MutexLock lock(mutex_);
    const auto it = std::find(queue_.begin(), queue_.end(), call);
    if (it != queue_.end()) {  // still waiting for a batch: it will never run
      queue_.erase(it);
      queued_rows_ -= call->rows;
    }
  }
  cv_.notify_all();  // a worker waiting on this call's batch timeout re-reads the queue
  throw DeadlineExceeded(kDeadlineText);
}

std::int64_t Batcher::queued_rows() const {
  MutexLock lock(mutex_);
  return queued_rows_;
}

bool Batcher::can_share_batch(const NamedTensors& a, const NamedTensors& b) const {
  return same_layout(a, b, !params_.pad_variable_length_inputs);
}

std::int64_t Batcher::padded_batch_size(std::int64_t rows) const {
  for (std::int64_t allowed : params_.allowed_batch_sizes)
    if (allowed >= rows) return allowed;
  return rows;  // no allowed sizes (predict() refuses more rows than the last one)
}

// The inputs of `batch` concatenated along the batch dimension (row-major tensors concatenate
// as bytes), each padded to the batch's largest shape with pad_variable_length_inputs, then
// `padding_rows` copies of the last request's first row (TF Serving's MergeInputTensors).
NamedTensors Batcher::merge_inputs(const std::vector<std::shared_ptr<Call>>& batch, std::int64_t padding_rows) const {
  NamedTensors merged;
  for (const auto& [name, first] : batch[0]->inputs) {
    std::vector<std::int64_t> dims = first.shape;
    if (params_.pad_variable_length_inputs)
      for (const auto& c : batch) {
        const auto& shape = c->inputs.at(name).shape;
        for (std::size_t d = 1; d < dims.size(); ++d) dims[d] = std::max(dims[d], shape[d]);
      }
    Tensor& t = merged[name];
    t.dtype = first.dtype;
    t.shape = dims;
    t.shape[0] = 0;
    for (const auto& c : batch) {
      const Tensor& part = c->inputs.at(name);
      if (params_.pad_variable_length_inputs && part.shape != t.shape) {
        const Tensor padded = pad_to(part, dims);
        t.data.insert(t.data.end(), padded.data.begin(), padded.data.end());
      } else {
        t.data.insert(t.data.end(), part.data.begin(), part.data.end());
      }
      t.shape[0] += c->rows;
    }
    if (padding_rows > 0 && t.shape[0] > 0) {
      const std::size_t row_bytes = t.data.size() / static_cast<std::size_t>(t.shape[0]);
      const auto row = t.data.begin() + static_cast<std::ptrdiff_t>(t.data.size() -
                                                                   static_cast<std::size_t>(std::max<std::int64_t>(batch.back()->rows, 1)) * row_bytes);
      const std::vector<std::byte> first_row(row, row + static_cast<std::ptrdiff_t>(row_bytes));
      for (std::int64_t i = 0; i < padding_rows; ++i) t.data.insert(t.data.end(), first_row.begin(), first_row.end());
      t.shape[0] += padding_rows;
    }
  }
  return merged;
}

bool Batcher::next_batch(std::vector<std::shared_ptr<Call>>& batch, std::vector<std::shared_ptr<Call>>& expired) {
  MutexLock lock(mutex_);
  // Wait for a call, then (up to the batch timeout, counted from the oldest call) for the
  // batch to fill. The oldest call can change while waiting (a caller past its deadline
  // leaves), so the timeout is read again after every wake-up.
  while (true) {
    while (!stop_ && queue_.empty()) mutex_.wait(cv_);
    if (queue_.empty()) return false;  // stop_ and nothing left
    if (stop_ || queued_rows_ >= params_.max_batch_size) break;
    const auto timeout = queue_.front()->enqueued + std::chrono::microseconds(params_.batch_timeout_micros);
    if (std::chrono::steady_clock::now() >= timeout) break;
    mutex_.wait_until(cv_, timeout);
  }
  // Calls past their deadline are answered, not run (submit()'s callers do not wait for
  // their deadline themselves).
  const auto now = std::chrono::steady_clock::now();
  for (auto it = queue_.begin(); it != queue_.end();) {
    if ((*it)->deadline >= now) {
      ++it;
      continue;
    }
    queued_rows_ -= (*it)->rows;
    expired.push_back(*it);
    it = queue_.erase(it);
  }
  if (queue_.empty()) return true;
  auto first = queue_.front();
  queue_.pop_front();
  batch.push_back(first);
  std::int64_t rows = first->rows;
  for (auto it = queue_.begin(); it != queue_.end() && rows < params_.max_batch_size;) {
    const auto& c = *it;
    if (c->servable == first->servable && c->signature == first->signature &&
        rows + c->rows <= params_.max_batch_size && can_share_batch(c->inputs, first->inputs)) {
      rows += c->rows;
      batch.push_back(c);
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& c : batch) queued_rows_ -= c->rows;
  return true;
}

void Batcher::work() {
  while (true) {
    std::vector<std::shared_ptr<Call>> batch, expired;
    if (!next_batch(batch, expired)) return;
    for (auto& c : expired) c->answer({}, std::make_exception_ptr(DeadlineExceeded(kDeadlineText)));
    if (!batch.empty()) run(batch);
  }
}

void Batcher::run(std::vector<std::shared_ptr<Call>>& batch) {
  try {
    std::int64_t total = 0;
    for (const auto& c : batch) total += c->rows;
    const std::int64_t padded = padded_batch_size(total);
    if (batch.size() == 1 && padded == total) {  // nothing to merge or pad
      batch[0]->answer(batch[0]->servable->predict(batch[0]->signature, batch[0]->inputs), nullptr);
      return;
    }
    const NamedTensors out = batch[0]->servable->predict(batch[0]->signature, merge_inputs(batch, padded - total));
    // Split along the batch dimension; the padding rows at the end are dropped.
    std::int64_t offset = 0;
    for (auto& c : batch) {
      NamedTensors mine;
      for (const auto& [name, t] : out) {
        if (t.shape.empty() || t.shape[0] != padded) throw Internal("output " + name + " lost the batch dimension");
        const std::size_t row_bytes = t.data.size() / static_cast<std::size_t>(padded);
        Tensor slice;
        slice.dtype = t.dtype;
        slice.shape = t.shape;
        slice.shape[0] = c->rows;
        slice.data.assign(t.data.begin() + static_cast<std::ptrdiff_t>(offset * row_bytes),
                          t.data.begin() + static_cast<std::ptrdiff_t>((offset + c->rows) * row_bytes));
        mine.emplace(name, std::move(slice));
      }
      offset += c->rows;
      c->answer(std::move(mine), nullptr);
    }
  } catch (...) {
    for (auto& c : batch) c->answer({}, std::current_exception());  // those not answered yet
  }
}

}  // namespace tensorhub
