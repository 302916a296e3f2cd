// Stages that use threads: parallel map (pool tasks), prefetch (one background thread per
// iterator) and interleave (pool tasks reading blocks when parallel).
//
// Every stage here waits, when destroyed, for the work it started: tasks capture raw pointers
// into their stage, which therefore must outlive them.
#include <atomic>
#include <condition_variable>
#include <deque>
#include <thread>

#include "dataset_internal.h"
#include "tensorhub/core/error.h"
#include "tensorhub/core/mutex.h"

namespace tensorhub::detail {

extern std::atomic<std::size_t> g_background_threads;

namespace {

// An element or the error raised while producing it.
struct Produced {
  std::optional<NamedTensors> value;
  std::exception_ptr error;
  NamedTensors take() {
    if (error) std::rethrow_exception(error);
    return std::move(*value);
  }
};

// --- parallel map ----------------------------------------------------------------------------

class ParallelMapNode final : public UnaryNode {
 public:
  ParallelMapNode(NodePtr input, Dataset::MapFn fn, std::int64_t parallel, bool deterministic)
      : UnaryNode(std::move(input)), fn_(std::move(fn)), parallel_(parallel),
        deterministic_(deterministic) {}
  IteratorPtr make_iterator(const ContextPtr& context) const override;

  Dataset::MapFn fn_;
  std::int64_t parallel_;
  bool deterministic_;
};

class ParallelMapIterator final : public ElementIterator {
 public:
  ParallelMapIterator(IteratorPtr input, const ParallelMapNode& node, ContextPtr context)
      : input_(std::move(input)), node_(node), context_(std::move(context)),
        limit_(static_cast<std::size_t>(autotuned(node.parallel_, context_))) {}

  ~ParallelMapIterator() override {
    pool_of(context_).wait_until(
        [&] {
          for (auto& s : in_flight_)
            if (s->task && !s->task->done) return false;
          return true;
        },
        tasks());
  }

  std::optional<NamedTensors> next() override {
    fill();
    if (in_flight_.empty()) return std::nullopt;
    auto slot = node_.deterministic_ ? take_front() : take_first_done();
    return slot->result.take();
  }

 private:
  struct Slot {
    ThreadPool::TaskHandle task;  // null when the input itself failed
    Produced result;
  };

  // Starts calls until `limit_` are in flight or the input ends.
  void fill() {
    while (!eof_ && in_flight_.size() < limit_) {
      auto slot = std::make_shared<Slot>();
      std::optional<NamedTensors> in;
      try {
        in = input_->next();
      } catch (...) {
        slot->result.error = std::current_exception();  // keeps its place in the order
        in_flight_.push_back(std::move(slot));
        continue;
      }
      if (!in) {
        eof_ = true;
        break;
      }
      start(*slot, std::move(*in), index_++);
      in_flight_.push_back(std::move(slot));
    }
  }

  void start(Slot& slot, NamedTensors element, std::int64_t index) {
    Produced* out = &slot.result;
    const Dataset::MapFn* fn = &node_.fn_;
    slot.task = pool_of(context_).submit([out, fn, index, e = std::move(element)]() mutable {
      try {
        out->value = (*fn)(std::move(e));
      } catch (...) {
        try {
          rethrow_with_prefix("map: the function failed on element " + std::to_string(index) +
                              " of this pass: ");
        } catch (...) {
          out->error = std::current_exception();
        }
      }
    });
  }

  std::shared_ptr<Slot> take_front() {
    auto slot = std::move(in_flight_.front());
    in_flight_.pop_front();
    if (slot->task) pool_of(context_).wait(slot->task);
    return slot;
  }

  std::vector<ThreadPool::TaskHandle> tasks() const {
    std::vector<ThreadPool::TaskHandle> out;
    for (auto& s : in_flight_) out.push_back(s->task);
    return out;
  }

  std::shared_ptr<Slot> take_first_done() {
    std::size_t found = 0;
    auto done = [&] {
      for (std::size_t i = 0; i < in_flight_.size(); ++i) {
        if (!in_flight_[i]->task || in_flight_[i]->task->done) {
          found = i;
          return true;
        }
      }
      return false;
    };
    pool_of(context_).wait_until(done, tasks());
    auto slot = std::move(in_flight_[found]);
    in_flight_.erase(in_flight_.begin() + static_cast<std::ptrdiff_t>(found));
    return slot;
  }

  IteratorPtr input_;
  const ParallelMapNode& node_;
  ContextPtr context_;
  std::size_t limit_;
  std::deque<std::shared_ptr<Slot>> in_flight_;
  std::int64_t index_ = 0;
  bool eof_ = false;
};

IteratorPtr ParallelMapNode::make_iterator(const ContextPtr& context) const {
  return std::make_unique<ParallelMapIterator>(input_->make_iterator(context), *this, context);
}

// --- prefetch --------------------------------------------------------------------------------

class PrefetchIterator final : public ElementIterator {
 public:
  PrefetchIterator(IteratorPtr input, std::size_t capacity)
      : input_(std::move(input)), capacity_(capacity) {}

  ~PrefetchIterator() override {
    {
      MutexLock lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();  // after its current input_->next() returns
  }

  std::optional<NamedTensors> next() override {
    // finished_ is set by the thread start() makes only: false until it has started.
    if (!thread_.joinable()) start();
    MutexLock lock(mu_);
    while (buffer_.empty() && !finished_) mu_.wait(cv_);
    if (buffer_.empty()) return std::nullopt;
    Produced p = std::move(buffer_.front());
    buffer_.pop_front();
    lock.unlock();
    cv_.notify_all();
    return p.take();
  }

 private:
  void start() {
    ++g_background_threads;
    thread_ = std::thread([this] {
      produce();
      --g_background_threads;
    });
  }

  // The background loop: fills the buffer up to capacity_, errors included (so that a later
  // ignore_errors can skip them and the loop continues).
  void produce() {
    for (;;) {
      {
        MutexLock lock(mu_);
        while (!stop_ && buffer_.size() >= capacity_) mu_.wait(cv_);
        if (stop_) break;
      }
      Produced p;
      try {
        p.value = input_->next();
      } catch (...) {
        p.error = std::current_exception();
      }
      MutexLock lock(mu_);
      if (!p.error && !p.value) break;
      buffer_.push_back(std::move(p));
      cv_.notify_all();
    }
    MutexLock lock(mu_);
    finished_ = true;
    cv_.notify_all();
  }

  IteratorPtr input_;
  std::size_t capacity_;
  Mutex mu_;
  std::condition_variable cv_;
  std::deque<Produced> buffer_ TENSORHUB_GUARDED_BY(mu_);
  bool stop_ TENSORHUB_GUARDED_BY(mu_) = false;
  bool finished_ TENSORHUB_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

class PrefetchNode final : public UnaryNode {
 public:
  PrefetchNode(NodePtr input, std::int64_t size) : UnaryNode(std::move(input)), size_(size) {}
  IteratorPtr make_iterator(const ContextPtr& context) const override {
    return std::make_unique<PrefetchIterator>(input_->make_iterator(context),
                                              static_cast<std::size_t>(size_));
  }

 private:
  std::int64_t size_;
};

// --- interleave ------------------------------------------------------------------------------

class InterleaveNode final : public UnaryNode {
 public:
  InterleaveNode(NodePtr input, Dataset::InterleaveFn fn, std::int64_t cycle, std::int64_t block,
                 bool parallel)
      : UnaryNode(std::move(input)), fn_(std::move(fn)), cycle_(cycle), block_(block),
        parallel_(parallel) {}
  IteratorPtr make_iterator(const ContextPtr& context) const override;
  // Unknown, as tf.data's interleave: the datasets fn returns are not known before a pass.
  std::int64_t cardinality() const override { return Dataset::kUnknownCardinality; }

  Dataset::InterleaveFn fn_;
  std::int64_t cycle_, block_;
  bool parallel_;
};

// tf.data's interleave order (InterleaveDatasetOp): cycle through cycle_length open inputs,
// block_length elements from each; an input that ends is replaced by the next input element
// at its position in the cycle. In parallel mode each open input reads its next block on the
// pool ahead of time; the order of the output is the same.
class InterleaveIterator final : public ElementIterator {
 public:
  InterleaveIterator(IteratorPtr input, const InterleaveNode& node, ContextPtr context)
      : input_(std::move(input)), node_(node), context_(std::move(context)),
        slots_(static_cast<std::size_t>(autotuned(node.cycle_, context_))) {}

  ~InterleaveIterator() override {
    std::vector<ThreadPool::TaskHandle> tasks;
    for (auto& s : slots_) tasks.push_back(s.task);
    pool_of(context_).wait_until(
        [&] {
          for (auto& s : slots_)
            if (s.task && !s.task->done) return false;
          return true;
        },
        tasks);
  }

  std::optional<NamedTensors> next() override {
    while (!eof_ || open_ > 0) {
      Slot& s = slots_[cycle_index_];
      if (s.it) {
        if (auto e = take_from(s)) {
          if (++block_index_ == node_.block_) advance();
          return e->take();
        }
        close(s);
        advance();
      } else if (!eof_) {
        open(s);
      } else {
        advance();
      }
    }
    return std::nullopt;
  }

 private:
  struct Block {
    std::deque<Produced> items;
    bool end = false;
  };
  struct Slot {
    std::shared_ptr<const DatasetNode> node;  // keeps fn's dataset alive while it is read
    IteratorPtr it;
    std::deque<Produced> items;
    bool end = false;
    std::unique_ptr<Block> pending;  // being filled by `task`
    ThreadPool::TaskHandle task;
  };

  void advance() {
    block_index_ = 0;
    cycle_index_ = (cycle_index_ + 1) % slots_.size();
  }

  // Opens the next input element's dataset in `s`, or notes the end of the input.
  void open(Slot& s) {
    auto in = input_->next();
    if (!in) {
      eof_ = true;
      return;
    }
    const std::int64_t index = index_++;
    try {
      s.node = node_.fn_(*in).node();
    } catch (...) {
      rethrow_with_prefix("interleave: the function failed on input element " +
                          std::to_string(index) + " of this pass: ");
    }
    s.it = s.node->make_iterator(context_);
    s.items.clear();
    s.end = false;
    ++open_;
    if (node_.parallel_) launch(s);
  }

  void close(Slot& s) {
    s.it.reset();
    s.node.reset();
    --open_;
  }

  // The next element of `s`, or nullopt once it has ended.
  std::optional<Produced> take_from(Slot& s) {
    while (s.items.empty() && !s.end) {
      if (s.task) {
        pool_of(context_).wait(s.task);
        s.task.reset();
        for (auto& p : s.pending->items) s.items.push_back(std::move(p));
        s.end = s.pending->end;
        s.pending.reset();
      } else {
        read_block(*s.it, s.items, s.end, node_.block_);  // sequential: in this thread
      }
      if (node_.parallel_ && !s.end) launch(s);  // read ahead while this block is consumed
    }
    if (s.items.empty()) return std::nullopt;
    Produced p = std::move(s.items.front());
    s.items.pop_front();
    return p;
  }

  void launch(Slot& s) {
    s.pending = std::make_unique<Block>();
    Block* block = s.pending.get();
    ElementIterator* it = s.it.get();
    const auto n = node_.block_;
    s.task = pool_of(context_).submit([block, it, n] {
      std::deque<Produced> items;
      bool end = false;
      read_block(*it, items, end, n);
      block->items = std::move(items);
      block->end = end;
    });
  }

  // Reads up to `n` elements into `items`, stopping after an error; `end` once `it` ends.
  static void read_block(ElementIterator& it, std::deque<Produced>& items, bool& end,
                         std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) {
      Produced p;
      try {
        p.value = it.next();
      } catch (...) {
        p.error = std::current_exception();
        items.push_back(std::move(p));
        return;
      }
      if (!p.value) {
        end = true;
        return;
      }
      items.push_back(std::move(p));
    }
  }

  IteratorPtr input_;
  const InterleaveNode& node_;
  ContextPtr context_;
  std::vector<Slot> slots_;
  std::size_t cycle_index_ = 0;
  std::int64_t block_index_ = 0;
  std::int64_t open_ = 0;
  std::int64_t index_ = 0;
  bool eof_ = false;
};

IteratorPtr InterleaveNode::make_iterator(const ContextPtr& context) const {
  return std::make_unique<InterleaveIterator>(input_->make_iterator(context), *this, context);
}

}  // namespace

NodePtr make_parallel_map_node(NodePtr input, Dataset::MapFn fn, std::int64_t parallel,
                               bool deterministic) {
  return std::make_shared<ParallelMapNode>(std::move(input), std::move(fn), parallel, deterministic);
}
NodePtr make_prefetch_node(NodePtr input, std::int64_t buffer_size) {
  return std::make_shared<PrefetchNode>(std::move(input), buffer_size);
}
NodePtr make_interleave_node(NodePtr input, Dataset::InterleaveFn fn, std::int64_t cycle_length,
                             std::int64_t block_length, bool parallel) {
  return std::make_shared<InterleaveNode>(std::move(input), std::move(fn), cycle_length,
                                          block_length, parallel);
}

}  // namespace tensorhub::detail
