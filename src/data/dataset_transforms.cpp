// Sequential transformations: map, filter, batch, padded_batch, unbatch, shuffle, repeat,
// take, skip, shard, enumerate, ignore_errors. Each runs in its consumer's thread.
#include <algorithm>
#include <atomic>
#include <deque>
#include <limits>
#include <random>

#include "dataset_internal.h"
#include "tensorhub/core/error.h"

namespace tensorhub::detail {
namespace {

// A stage with one input iterator.
class UnaryIterator : public ElementIterator {
 public:
  explicit UnaryIterator(IteratorPtr input) : input_(std::move(input)) {}

 protected:
  IteratorPtr input_;
};

// Builds a node whose iterator is `It(input_iterator, node)`.
template <typename It, typename Node>
IteratorPtr unary_iterator(const Node& node, const NodePtr& input, const ContextPtr& context) {
  return std::make_unique<It>(input->make_iterator(context), node);
}

// --- map (sequential) and filter ------------------------------------------------------------

// A stage that calls a user function of type Fn on each element: It(input iterator, fn) reads
// through call(), which names the function and the element's index in this pass in the error
// the function throws.
template <typename Fn>
class CallingIterator : public UnaryIterator {
 public:
  CallingIterator(IteratorPtr input, const Fn& fn) : UnaryIterator(std::move(input)), fn_(fn) {}

 protected:
  // fn(args...); `failed` ("map: the function failed") starts the error it throws.
  template <typename... Args>
  auto call(const char* failed, Args&&... args) {
    const std::int64_t index = index_++;
    try {
      return fn_(std::forward<Args>(args)...);
    } catch (...) {
      rethrow_with_prefix(std::string(failed) + " on element " + std::to_string(index) + " of this pass: ");
    }
  }

 private:
  const Fn& fn_;
  std::int64_t index_ = 0;
};

// `keeps_count`: one element out per element in (map), else the count is unknown (filter).
template <typename Fn, typename It>
class CallingNode final : public UnaryNode {
 public:
  CallingNode(NodePtr input, Fn fn, bool keeps_count)
      : UnaryNode(std::move(input)), fn_(std::move(fn)), keeps_count_(keeps_count) {}
  IteratorPtr make_iterator(const ContextPtr& context) const override {
    return std::make_unique<It>(input_->make_iterator(context), fn_);
  }
  // tf.data's filter: unknown, even over an infinite input (it may drop everything).
  std::int64_t cardinality() const override {
    return keeps_count_ ? input_->cardinality() : Dataset::kUnknownCardinality;
  }

 private:
  Fn fn_;
  bool keeps_count_;
};

class MapIterator final : public CallingIterator<Dataset::MapFn> {
 public:
  using CallingIterator::CallingIterator;
  std::optional<NamedTensors> next() override {
    auto e = input_->next();
    if (!e) return std::nullopt;
    return call("map: the function failed", std::move(*e));
  }
};

class FilterIterator final : public CallingIterator<Dataset::Predicate> {
 public:
  using CallingIterator::CallingIterator;
  std::optional<NamedTensors> next() override {
    while (auto e = input_->next()) {
      if (call("filter: the predicate failed", *e)) return e;
    }
    return std::nullopt;
  }
};

// --- batch / padded_batch --------------------------------------------------------------------

class BatchNode final : public UnaryNode {
 public:
  BatchNode(NodePtr input, std::int64_t size, bool drop, bool padded,
            std::map<std::string, std::vector<std::int64_t>> shapes,
            std::map<std::string, double> values)
      : UnaryNode(std::move(input)), size_(size), drop_(drop), padded_(padded),
        shapes_(std::move(shapes)), values_(std::move(values)) {}
  IteratorPtr make_iterator(const ContextPtr& context) const override {
    class It final : public UnaryIterator {
     public:
      It(IteratorPtr in, const BatchNode& n) : UnaryIterator(std::move(in)), node_(n) {}
      std::optional<NamedTensors> next() override {
        // Elements gathered before an input error stay in pending_ for the next call.
        while (static_cast<std::int64_t>(pending_.size()) < node_.size_) {
          auto e = input_->next();
          if (!e) break;
          pending_.push_back(std::move(*e));
        }
        std::vector<NamedTensors> batch = std::move(pending_);
        pending_.clear();
        if (batch.empty() || (node_.drop_ && static_cast<std::int64_t>(batch.size()) < node_.size_))
          return std::nullopt;
        return node_.padded_ ? pad_and_stack(batch, node_.shapes_, node_.values_)
                             : stack_elements(batch);
      }

     private:
      const BatchNode& node_;
      std::vector<NamedTensors> pending_;
    };
    return unary_iterator<It>(*this, input_, context);
  }
  std::int64_t cardinality() const override {
    const std::int64_t n = input_->cardinality();
    if (n < 0) return n;  // infinite or unknown stays so
    return drop_ ? n / size_ : (n + size_ - 1) / size_;
  }

 private:
  std::int64_t size_;
  bool drop_, padded_;
  std::map<std::string, std::vector<std::int64_t>> shapes_;
  std::map<std::string, double> values_;
};

// --- unbatch ---------------------------------------------------------------------------------

class UnbatchNode final : public UnaryNode {
 public:
  using UnaryNode::UnaryNode;
  // Unknown, as tf.data's unbatch: batches may have any first dimension.
  std::int64_t cardinality() const override { return Dataset::kUnknownCardinality; }
  IteratorPtr make_iterator(const ContextPtr& context) const override {
    class It final : public UnaryIterator {
     public:
      It(IteratorPtr in, const UnbatchNode&) : UnaryIterator(std::move(in)) {}
      std::optional<NamedTensors> next() override {
        while (!current_ || row_ >= rows_) {
          current_ = input_->next();
          if (!current_) return std::nullopt;
          rows_ = rows_of(*current_);
          row_ = 0;
        }
        return slice_element(*current_, row_++);
      }

     private:
      static std::int64_t rows_of(const NamedTensors& e) {
        std::int64_t rows = -1;
        for (const auto& [name, t] : e) {
          if (t.shape.empty())
            throw InvalidArgument("unbatch: tensor '" + name + "' is a scalar; nothing to split");
          if (rows >= 0 && t.shape[0] != rows) {
            throw InvalidArgument("unbatch: tensor '" + name + "' has " +
                                  std::to_string(t.shape[0]) + " rows, another has " +
                                  std::to_string(rows) + "; an element splits only if all agree");
          }
          rows = t.shape[0];
        }
        return std::max<std::int64_t>(rows, 0);
      }
      std::optional<NamedTensors> current_;
      std::int64_t rows_ = 0, row_ = 0;
    };
    return unary_iterator<It>(*this, input_, context);
  }
};

// --- shuffle ---------------------------------------------------------------------------------

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

class ShuffleNode final : public UnaryNode {
 public:
  ShuffleNode(NodePtr input, std::int64_t buffer, std::uint64_t seed, bool reshuffle)
      : UnaryNode(std::move(input)), buffer_(buffer), seed_(seed), reshuffle_(reshuffle) {}
  IteratorPtr make_iterator(const ContextPtr& context) const override {
    // Pass k of this node draws from (seed, k): reproducible, and new each pass if asked.
    const std::uint64_t pass = reshuffle_ ? passes_.fetch_add(1) : 0;
    const std::uint64_t seed = splitmix64(seed_ ^ splitmix64(pass));
    class It final : public UnaryIterator {
     public:
      It(IteratorPtr in, std::int64_t buffer, std::uint64_t seed)
          : UnaryIterator(std::move(in)), capacity_(static_cast<std::size_t>(buffer)), rng_(seed) {}
      std::optional<NamedTensors> next() override {
        while (!eof_ && buffer_.size() < capacity_) {
          auto e = input_->next();
          if (!e) {
            eof_ = true;
            break;
          }
          buffer_.push_back(std::move(*e));
        }
        if (buffer_.empty()) return std::nullopt;
        const std::size_t i = rng_() % buffer_.size();  // mt19937_64: same on every platform
        std::swap(buffer_[i], buffer_.back());
        NamedTensors out = std::move(buffer_.back());
        buffer_.pop_back();
        return out;
      }

     private:
      std::size_t capacity_;
      std::mt19937_64 rng_;
      std::vector<NamedTensors> buffer_;
      bool eof_ = false;
    };
    return std::make_unique<It>(input_->make_iterator(context), buffer_, seed);
  }

 private:
  std::int64_t buffer_;
  std::uint64_t seed_;
  bool reshuffle_;
  mutable std::atomic<std::uint64_t> passes_{0};
};

// --- repeat ----------------------------------------------------------------------------------

class RepeatNode final : public UnaryNode {
 public:
  RepeatNode(NodePtr input, std::int64_t count) : UnaryNode(std::move(input)), count_(count) {}
  IteratorPtr make_iterator(const ContextPtr& context) const override {
    class It final : public ElementIterator {
     public:
      It(const RepeatNode& n, ContextPtr c) : node_(n), context_(std::move(c)) {}
      std::optional<NamedTensors> next() override {
        while (node_.count_ < 0 || done_ < node_.count_) {
          if (!current_) {
            current_ = node_.input_->make_iterator(context_);
            produced_ = false;
          }
          std::optional<NamedTensors> e;
          try {
            e = current_->next();
          } catch (...) {
            produced_ = true;  // an error is output too: not an empty repetition
            throw;
          }
          if (e) {
            produced_ = true;
            return e;
          }
          current_.reset();
          ++done_;
          if (!produced_ && node_.count_ < 0) return std::nullopt;  // empty input: stop
        }
        return std::nullopt;
      }

     private:
      const RepeatNode& node_;
      ContextPtr context_;
      IteratorPtr current_;
      std::int64_t done_ = 0;
      bool produced_ = false;
    };
    return std::make_unique<It>(*this, context);
  }
  // tf.data's RepeatDataset: forever over a non-empty (or unknown) input is infinite.
  std::int64_t cardinality() const override {
    const std::int64_t n = input_->cardinality();
    if (count_ < 0) return n == 0 ? 0 : Dataset::kInfiniteCardinality;
    if (count_ == 0 || n == 0) return 0;
    if (n < 0) return n;
    return n > std::numeric_limits<std::int64_t>::max() / count_ ? Dataset::kInfiniteCardinality : n * count_;
  }

 private:
  std::int64_t count_;
};

// --- take / skip / shard / enumerate ---------------------------------------------------------

// Counts elements and asks `Decide` what to do with each: kEmit, kDrop or kEnd.
enum class Verdict { kEmit, kDrop, kEnd };

class CountingNode final : public UnaryNode {
 public:
  using Decide = std::function<Verdict(std::int64_t index, NamedTensors& element)>;
  /// The output's cardinality given the input's (a count, infinite or unknown).
  using Count = std::function<std::int64_t(std::int64_t input_cardinality)>;
  CountingNode(NodePtr input, Decide decide, std::function<bool(std::int64_t)> ended, Count count)
      : UnaryNode(std::move(input)), decide_(std::move(decide)), ended_(std::move(ended)), count_(std::move(count)) {}
  std::int64_t cardinality() const override { return count_(input_->cardinality()); }
  IteratorPtr make_iterator(const ContextPtr& context) const override {
    class It final : public UnaryIterator {
     public:
      It(IteratorPtr in, const CountingNode& n) : UnaryIterator(std::move(in)), node_(n) {}
      std::optional<NamedTensors> next() override {
        while (!done_) {
          if (node_.ended_(index_)) break;  // take: stop without reading further
          auto e = input_->next();
          if (!e) break;
          switch (node_.decide_(index_++, *e)) {
            case Verdict::kEmit: return e;
            case Verdict::kDrop: continue;
            case Verdict::kEnd: done_ = true; break;
          }
        }
        done_ = true;
        return std::nullopt;
      }

     private:
      const CountingNode& node_;
      std::int64_t index_ = 0;
      bool done_ = false;
    };
    return unary_iterator<It>(*this, input_, context);
  }

 private:
  Decide decide_;
  std::function<bool(std::int64_t)> ended_;
  Count count_;
};

// --- ignore_errors ---------------------------------------------------------------------------

class IgnoreErrorsNode final : public UnaryNode {
 public:
  using UnaryNode::UnaryNode;
  std::int64_t ignored_errors() const override { return ignored_.load(); }
  // tf.data's ignore_errors: unknown (any element may be dropped).
  std::int64_t cardinality() const override { return Dataset::kUnknownCardinality; }
  IteratorPtr make_iterator(const ContextPtr& context) const override {
    class It final : public UnaryIterator {
     public:
      It(IteratorPtr in, const IgnoreErrorsNode& n, ContextPtr c)
          : UnaryIterator(std::move(in)), node_(n), context_(std::move(c)) {}
      std::optional<NamedTensors> next() override {
        for (;;) {
          try {
            return input_->next();
          } catch (...) {
            if (!is_data_error(std::current_exception())) throw;
            ++node_.ignored_;
            ++context_->ignored_errors;
          }
        }
      }

     private:
      const IgnoreErrorsNode& node_;
      ContextPtr context_;
    };
    return std::make_unique<It>(input_->make_iterator(context), *this, context);
  }

 private:
  mutable std::atomic<std::int64_t> ignored_{0};
};

bool never_ends(std::int64_t) { return false; }
std::int64_t same_count(std::int64_t n) { return n; }

}  // namespace

NodePtr make_map_node(NodePtr input, Dataset::MapFn fn) {
  return std::make_shared<CallingNode<Dataset::MapFn, MapIterator>>(std::move(input), std::move(fn), true);
}
NodePtr make_filter_node(NodePtr input, Dataset::Predicate predicate) {
  return std::make_shared<CallingNode<Dataset::Predicate, FilterIterator>>(std::move(input), std::move(predicate),
                                                                           false);
}
NodePtr make_batch_node(NodePtr input, std::int64_t batch_size, bool drop_remainder) {
  return std::make_shared<BatchNode>(std::move(input), batch_size, drop_remainder, false,
                                     std::map<std::string, std::vector<std::int64_t>>{},
                                     std::map<std::string, double>{});
}
NodePtr make_padded_batch_node(NodePtr input, std::int64_t batch_size,
                               std::map<std::string, std::vector<std::int64_t>> shapes,
                               std::map<std::string, double> values, bool drop_remainder) {
  return std::make_shared<BatchNode>(std::move(input), batch_size, drop_remainder, true,
                                     std::move(shapes), std::move(values));
}
NodePtr make_unbatch_node(NodePtr input) { return std::make_shared<UnbatchNode>(std::move(input)); }
NodePtr make_shuffle_node(NodePtr input, std::int64_t buffer_size, std::uint64_t seed,
                          bool reshuffle_each_iteration) {
  return std::make_shared<ShuffleNode>(std::move(input), buffer_size, seed, reshuffle_each_iteration);
}
NodePtr make_repeat_node(NodePtr input, std::int64_t count) {
  return std::make_shared<RepeatNode>(std::move(input), count);
}
NodePtr make_take_node(NodePtr input, std::int64_t count) {
  return std::make_shared<CountingNode>(
      std::move(input), [](std::int64_t, NamedTensors&) { return Verdict::kEmit; },
      [count](std::int64_t i) { return count >= 0 && i >= count; },
      // tf.data's TakeDataset
      [count](std::int64_t n) {
        if (n == Dataset::kUnknownCardinality || count < 0) return n;
        return n == Dataset::kInfiniteCardinality ? count : std::min(n, count);
      });
}
NodePtr make_skip_node(NodePtr input, std::int64_t count) {
  return std::make_shared<CountingNode>(
      std::move(input),
      [count](std::int64_t i, NamedTensors&) {
        return count < 0 ? Verdict::kEnd : i < count ? Verdict::kDrop : Verdict::kEmit;
      },
      never_ends,
      // tf.data's SkipDataset: skip(-1) skips everything
      [count](std::int64_t n) {
        if (n < 0) return n;
        return count < 0 ? 0 : std::max<std::int64_t>(0, n - count);
      });
}
NodePtr make_shard_node(NodePtr input, std::int64_t num_shards, std::int64_t index) {
  return std::make_shared<CountingNode>(
      std::move(input),
      [num_shards, index](std::int64_t i, NamedTensors&) {
        return i % num_shards == index ? Verdict::kEmit : Verdict::kDrop;
      },
      never_ends,
      // elements index, index + num_shards, ... of the input
      [num_shards, index](std::int64_t n) {
        if (n < 0) return n;
        return n / num_shards + (index < n % num_shards ? 1 : 0);
      });
}
NodePtr make_enumerate_node(NodePtr input, std::int64_t start, std::string key) {
  return std::make_shared<CountingNode>(
      std::move(input),
      [start, key](std::int64_t i, NamedTensors& e) {
        const Tensor index = Tensor::from<std::int64_t>(DType::kI64, {}, {start + i});
        if (!e.emplace(key, index).second) {
          throw InvalidArgument("enumerate: the element already has a tensor '" + key +
                                "'; pass another key to enumerate()");
        }
        return Verdict::kEmit;
      },
      never_ends, same_count);
}
NodePtr make_ignore_errors_node(NodePtr input) {
  return std::make_shared<IgnoreErrorsNode>(std::move(input));
}

}  // namespace tensorhub::detail
