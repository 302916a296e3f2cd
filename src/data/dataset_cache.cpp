// cache(): in memory, or in a TFRecord file of safetensors-serialized elements. A cache is
// published only by a pass that read its input to the end without an error: the memory cache
// is swapped in under a lock, the file cache renamed from a temporary name.
#include <unistd.h>

#include <atomic>

#include "dataset_internal.h"
#include "tensorhub/core/error.h"
#include "tensorhub/core/mutex.h"

namespace tensorhub::detail {
namespace {

std::vector<std::byte> as_bytes(const std::string& s) {
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  return {p, p + s.size()};
}

class CacheNode final : public UnaryNode {
 public:
  CacheNode(NodePtr input, std::string filename)
      : UnaryNode(std::move(input)), filename_(std::move(filename)) {}
  IteratorPtr make_iterator(const ContextPtr& context) const override;

  std::filesystem::path cache_file() const { return filename_ + ".cache.tfrecord"; }
  std::filesystem::path temp_file() const {
    static std::atomic<std::uint64_t> counter{0};
    return filename_ + ".cache.tfrecord.tmp-" + std::to_string(::getpid()) + "-" +
           std::to_string(counter++);
  }

  std::string filename_;
  mutable Mutex mu_;
  mutable std::shared_ptr<const std::vector<NamedTensors>> memory_ TENSORHUB_GUARDED_BY(mu_);  // complete, or null
};

// Replays a complete memory cache.
class MemoryReplay final : public ElementIterator {
 public:
  explicit MemoryReplay(std::shared_ptr<const std::vector<NamedTensors>> e) : elements_(std::move(e)) {}
  std::optional<NamedTensors> next() override {
    if (i_ >= elements_->size()) return std::nullopt;
    return (*elements_)[i_++];
  }

 private:
  std::shared_ptr<const std::vector<NamedTensors>> elements_;
  std::size_t i_ = 0;
};

// Reads a complete cache file.
class FileReplay final : public ElementIterator {
 public:
  explicit FileReplay(const std::filesystem::path& file) : reader_(file), file_(file) {}
  std::optional<NamedTensors> next() override {
    const std::uint64_t offset = reader_.offset();
    if (!reader_.read(record_)) return std::nullopt;
    return from_safetensors(as_bytes(record_), "cache file " + file_.string() +
                                                   ", record at offset " + std::to_string(offset));
  }

 private:
  TFRecordReader reader_;
  std::filesystem::path file_;
  std::string record_;
};

// Reads the input and records it; publishes the record only after a clean end.
class Recorder final : public ElementIterator {
 public:
  Recorder(IteratorPtr input, const CacheNode& node)
      : input_(std::move(input)), node_(node) {
    if (node_.filename_.empty()) return;
    temp_ = node_.temp_file();
    writer_.emplace(temp_);
  }
  ~Recorder() override {
    if (!writer_) return;
    writer_.reset();  // an unfinished pass: drop the partial file
    std::error_code ec;
    std::filesystem::remove(temp_, ec);
  }

  std::optional<NamedTensors> next() override {
    std::optional<NamedTensors> e;
    try {
      e = input_->next();
    } catch (...) {
      poisoned_ = true;  // this pass skipped something: its record is not the data set
      throw;
    }
    if (!e) {
      if (!poisoned_ && !published_) publish();
      return std::nullopt;
    }
    record(*e);
    return e;
  }

 private:
  void record(const NamedTensors& e) {
    if (poisoned_) return;
    if (writer_) {
      const auto bytes = to_safetensors(e);
      writer_->write(std::span<const std::byte>(bytes));
    } else {
      elements_.push_back(e);
    }
  }

  void publish() {
    published_ = true;
    if (!writer_) {
      MutexLock lock(node_.mu_);
      if (!node_.memory_)
        node_.memory_ = std::make_shared<const std::vector<NamedTensors>>(std::move(elements_));
      return;
    }
    writer_->close();
    writer_.reset();
    std::filesystem::rename(temp_, node_.cache_file());  // atomic: readers see all or nothing
  }

  IteratorPtr input_;
  const CacheNode& node_;
  std::vector<NamedTensors> elements_;
  std::optional<TFRecordWriter> writer_;
  std::filesystem::path temp_;
  bool poisoned_ = false;
  bool published_ = false;
};

IteratorPtr CacheNode::make_iterator(const ContextPtr& context) const {
  if (filename_.empty()) {
    MutexLock lock(mu_);
    if (memory_) return std::make_unique<MemoryReplay>(memory_);
  } else if (std::filesystem::exists(cache_file())) {
    return std::make_unique<FileReplay>(cache_file());
  }
  return std::make_unique<Recorder>(input_->make_iterator(context), *this);
}

}  // namespace

NodePtr make_cache_node(NodePtr input, std::string filename) {
  return std::make_shared<CacheNode>(std::move(input), std::move(filename));
}

}  // namespace tensorhub::detail
