// Dataset sources: from_tensor_slices, range, list_files, TFRecordDataset, zip.
#include <glob.h>

#include <cstring>

#include "dataset_internal.h"
#include "tensorhub/core/error.h"

namespace tensorhub {
namespace detail {
namespace {

// --- from_tensor_slices --------------------------------------------------------------------

class TensorSlicesNode final : public DatasetNode {
 public:
  explicit TensorSlicesNode(NamedTensors tensors) : tensors_(std::move(tensors)) {}
  IteratorPtr make_iterator(const ContextPtr&) const override {
    class It final : public ElementIterator {
     public:
      explicit It(const NamedTensors& t) : tensors_(t), rows_(t.begin()->second.shape[0]) {}
      std::optional<NamedTensors> next() override {
        if (row_ >= rows_) return std::nullopt;
        return slice_element(tensors_, row_++);
      }

     private:
      const NamedTensors& tensors_;  // the node outlives its iterators (the Dataset holds it)
      std::int64_t rows_;
      std::int64_t row_ = 0;
    };
    return std::make_unique<It>(tensors_);
  }
  std::int64_t cardinality() const override { return tensors_.begin()->second.shape[0]; }

 private:
  NamedTensors tensors_;
};

// --- from_generator --------------------------------------------------------------------------

class GeneratorNode final : public DatasetNode {
 public:
  explicit GeneratorNode(std::function<Dataset::Generator()> make) : make_(std::move(make)) {}
  IteratorPtr make_iterator(const ContextPtr&) const override {
    class It final : public ElementIterator {
     public:
      explicit It(const std::function<Dataset::Generator()>& make) : make_(make) {}
      std::optional<NamedTensors> next() override {
        try {
          if (!generator_) generator_ = make_();  // on the first next(): in the consumer's thread
          auto e = generator_();
          if (e) ++index_;
          return e;
        } catch (...) {
          rethrow_with_prefix("from_generator: element " + std::to_string(index_++) +
                              " of this pass: ");
        }
      }

     private:
      const std::function<Dataset::Generator()>& make_;
      Dataset::Generator generator_;
      std::int64_t index_ = 0;
    };
    return std::make_unique<It>(make_);
  }

 private:
  std::function<Dataset::Generator()> make_;
};

// --- A fixed list of elements ----------------------------------------------------------------

class ElementsNode final : public DatasetNode {
 public:
  explicit ElementsNode(std::vector<NamedTensors> elements) : elements_(std::move(elements)) {}
  IteratorPtr make_iterator(const ContextPtr&) const override {
    class It final : public ElementIterator {
     public:
      explicit It(const std::vector<NamedTensors>& e) : elements_(e) {}
      std::optional<NamedTensors> next() override {
        if (i_ >= elements_.size()) return std::nullopt;
        return elements_[i_++];
      }

     private:
      const std::vector<NamedTensors>& elements_;
      std::size_t i_ = 0;
    };
    return std::make_unique<It>(elements_);
  }
  std::int64_t cardinality() const override { return static_cast<std::int64_t>(elements_.size()); }

 private:
  std::vector<NamedTensors> elements_;
};

// --- range -----------------------------------------------------------------------------------

class RangeNode final : public DatasetNode {
 public:
  RangeNode(std::int64_t start, std::int64_t stop, std::int64_t step)
      : start_(start), stop_(stop), step_(step) {}
  IteratorPtr make_iterator(const ContextPtr&) const override {
    class It final : public ElementIterator {
     public:
      It(std::int64_t start, std::int64_t stop, std::int64_t step)
          : next_(start), stop_(stop), step_(step) {}
      std::optional<NamedTensors> next() override {
        if (done_ || (step_ > 0 ? next_ >= stop_ : next_ <= stop_)) return std::nullopt;
        NamedTensors e{{"value", Tensor::from<std::int64_t>(DType::kI64, {}, {next_})}};
        done_ = __builtin_add_overflow(next_, step_, &next_);  // range(0, INT64_MAX) ends
        return e;
      }

     private:
      std::int64_t next_, stop_, step_;
      bool done_ = false;
    };
    return std::make_unique<It>(start_, stop_, step_);
  }
  // ceil((stop - start) / step), 0 when the range is empty; computed in 128 bits so that
  // range(INT64_MIN, INT64_MAX) does not overflow.
  std::int64_t cardinality() const override {
    const __int128 span = static_cast<__int128>(stop_) - start_;
    if ((step_ > 0 && span <= 0) || (step_ < 0 && span >= 0)) return 0;
    return static_cast<std::int64_t>((span + step_ + (step_ > 0 ? -1 : 1)) / step_);
  }

 private:
  std::int64_t start_, stop_, step_;
};

// --- One TFRecord file -----------------------------------------------------------------------

class TFRecordFileNode final : public DatasetNode {
 public:
  TFRecordFileNode(std::filesystem::path file, TFRecordCompression compression)
      : file_(std::move(file)), compression_(compression) {}
  IteratorPtr make_iterator(const ContextPtr&) const override {
    class It final : public ElementIterator {
     public:
      It(const std::filesystem::path& f, TFRecordCompression c) : file_(f), compression_(c) {}
      std::optional<NamedTensors> next() override {
        if (failed_) return std::nullopt;  // the rest of a corrupt file is skipped
        try {
          if (!reader_) reader_.emplace(file_, compression_);
          if (!reader_->read(record_)) return std::nullopt;
        } catch (...) {
          failed_ = true;
          throw;
        }
        return NamedTensors{{"record", bytes_tensor(record_)}};
      }

     private:
      std::filesystem::path file_;
      TFRecordCompression compression_;
      std::optional<TFRecordReader> reader_;  // opened on the first next()
      std::string record_;
      bool failed_ = false;
    };
    return std::make_unique<It>(file_, compression_);
  }

 private:
  std::filesystem::path file_;
  TFRecordCompression compression_;
};

// --- zip -------------------------------------------------------------------------------------

class ZipNode final : public DatasetNode {
 public:
  explicit ZipNode(std::vector<NodePtr> inputs) : inputs_(std::move(inputs)) {}
  std::vector<NodePtr> inputs() const override { return inputs_; }
  IteratorPtr make_iterator(const ContextPtr& context) const override {
    class It final : public ElementIterator {
     public:
      explicit It(std::vector<IteratorPtr> inputs) : inputs_(std::move(inputs)) {}
      std::optional<NamedTensors> next() override {
        if (done_) return std::nullopt;
        NamedTensors merged;
        for (auto& input : inputs_) {
          auto e = input->next();
          if (!e) {
            done_ = true;  // tf.data's zip ends with its shortest input
            return std::nullopt;
          }
          for (auto& [name, t] : *e) {
            if (!merged.emplace(name, std::move(t)).second) {
              throw InvalidArgument("zip: two datasets both have a tensor '" + name +
                                    "'; rename one with map before zipping");
            }
          }
        }
        return merged;
      }

     private:
      std::vector<IteratorPtr> inputs_;
      bool done_ = false;
    };
    std::vector<IteratorPtr> its;
    for (auto& n : inputs_) its.push_back(n->make_iterator(context));
    return std::make_unique<It>(std::move(its));
  }
  // The shortest input's (tf.data's ZipDataset): unknown if any input is unknown, infinite
  // only if all are.
  std::int64_t cardinality() const override {
    std::int64_t result = Dataset::kInfiniteCardinality;
    for (const auto& input : inputs_) {
      const std::int64_t n = input->cardinality();
      if (n == Dataset::kUnknownCardinality) return n;
      if (n != Dataset::kInfiniteCardinality && (result == Dataset::kInfiniteCardinality || n < result)) result = n;
    }
    return result;
  }

 private:
  std::vector<NodePtr> inputs_;
};

std::vector<std::string> glob_paths(const std::string& pattern) {
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
  std::vector<std::string> paths;
  if (rc == 0) {
    for (std::size_t i = 0; i < g.gl_pathc; ++i) paths.emplace_back(g.gl_pathv[i]);
  }
  globfree(&g);
  if (rc == GLOB_NOSPACE || rc == GLOB_ABORTED) {
    throw Unavailable("list_files: glob(\"" + pattern + "\") failed: " +
                      (rc == GLOB_NOSPACE ? "out of memory" : "a directory could not be read"));
  }
  return paths;  // glob(3) sorts them
}

}  // namespace

NodePtr make_tensor_slices_node(NamedTensors tensors) {
  return std::make_shared<TensorSlicesNode>(std::move(tensors));
}
NodePtr make_elements_node(std::vector<NamedTensors> elements) {
  return std::make_shared<ElementsNode>(std::move(elements));
}
NodePtr make_range_node(std::int64_t start, std::int64_t stop, std::int64_t step) {
  return std::make_shared<RangeNode>(start, stop, step);
}
NodePtr make_tfrecord_file_node(std::filesystem::path file, TFRecordCompression compression) {
  return std::make_shared<TFRecordFileNode>(std::move(file), compression);
}
NodePtr make_zip_node(std::vector<NodePtr> inputs) {
  return std::make_shared<ZipNode>(std::move(inputs));
}

}  // namespace detail

Dataset Dataset::from_generator(std::function<Generator()> make) {
  if (!make) throw InvalidArgument("from_generator: no function given");
  return Dataset(std::make_shared<detail::GeneratorNode>(std::move(make)));
}

Dataset Dataset::list_files(const std::string& pattern, bool shuffle,
                            std::optional<std::uint64_t> seed) {
  return list_files(std::vector<std::string>{pattern}, shuffle, seed);
}

Dataset Dataset::list_files(const std::vector<std::string>& patterns, bool shuffle,
                            std::optional<std::uint64_t> seed) {
  std::vector<std::string> paths;
  std::string joined;
  for (const auto& pattern : patterns) {
    for (auto& p : detail::glob_paths(pattern)) paths.push_back(std::move(p));
    joined += (joined.empty() ? "" : ", ") + pattern;
  }
  if (paths.empty()) throw InvalidArgument("list_files: No files matched pattern: " + joined);
  std::vector<NamedTensors> elements;
  for (const auto& p : paths) elements.push_back({{"filename", bytes_tensor(p)}});
  Dataset files(detail::make_elements_node(std::move(elements)));
  if (!shuffle) return files;
  return files.shuffle(static_cast<std::int64_t>(paths.size()), seed);  // as tf.data does
}

Dataset TFRecordDataset(std::vector<std::filesystem::path> filenames,
                        std::string_view compression_type, std::int64_t buffer_size,
                        std::int64_t num_parallel_reads) {
  const auto compression = parse_tfrecord_compression(compression_type);
  if (buffer_size < -1) {
    throw InvalidArgument("TFRecordDataset: buffer_size " + std::to_string(buffer_size) +
                          "; give -1 (default), 0 or a byte count");
  }
  if (num_parallel_reads < 0 && num_parallel_reads != Dataset::kAutotune) {
    throw InvalidArgument("TFRecordDataset: num_parallel_reads " +
                          std::to_string(num_parallel_reads) +
                          "; give 0 (sequential), a positive count or Dataset::kAutotune");
  }
  std::vector<NamedTensors> names;
  for (const auto& f : filenames) names.push_back({{"filename", bytes_tensor(f.string())}});
  Dataset files(detail::make_elements_node(std::move(names)));
  auto read_one = [compression](const NamedTensors& e) {
    return Dataset(detail::make_tfrecord_file_node(tensor_bytes(e.at("filename")), compression));
  };
  if (num_parallel_reads == 0) return files.interleave(read_one, 1, 1);
  return files.interleave(read_one, num_parallel_reads, 1, num_parallel_reads);
}

}  // namespace tensorhub
