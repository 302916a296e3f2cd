// tf.train.Example reading: ExampleParser (tf.io.parse_example's rules), read_example, and
// decode_raw, straight on the protobuf wire format.
//
// Why hand-written, when the build has protobuf's generated classes (tensorhub/tf/example.pb.h,
// which example_writer.cpp uses): speed. Parsing is the hot path of every input pipeline
// (DESIGN.md's data pipeline; bench/example_parse.cpp's goal is 20x python3-protobuf + numpy).
// Building a tf::Example per record allocates a map node, a Feature and a string per value,
// only for the parser to copy them again into batched tensors; reading the bytes in place
// copies each value once, straight into its batch. TensorFlow's own fast parser
// (tensorflow/core/util/example_proto_fast_parsing.cc) does the same for the same reason.
// The writer is not on such a path, so it uses the generated classes.
//
// Wire format (protobuf encoding guide; TensorFlow's tensorflow/core/example/example.proto and
// feature.proto for the field numbers, mirrored in proto/tensorhub/tf/):
//   Example  { Features features = 1; }
//   Features { map<string, Feature> feature = 1; }   map entry: { key = 1; value = 2; }
//   Feature  { oneof kind { BytesList bytes_list = 1; FloatList float_list = 2;
//                           Int64List int64_list = 3; } }
//   BytesList { repeated bytes value = 1; }  FloatList { repeated float value = 1 [packed]; }
//   Int64List { repeated int64 value = 1 [packed]; }
// Parsing accepts what protobuf accepts: fields in any order, unknown fields skipped, packed
// and unpacked repeated scalars, a message field repeated (merged: list values concatenate;
// for the oneof the last kind set wins). The semantic rules are TensorFlow's (example.h).
#include "tensorhub/data/example.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <unordered_map>
#include <utility>

#include "tensorhub/core/error.h"

namespace tensorhub {

namespace {

// ---- Wire reading ---------------------------------------------------------------------------

constexpr std::uint32_t kVarint = 0, kFixed64 = 1, kLen = 2, kFixed32 = 5;

// Kinds of a Feature: the oneof field numbers (0: none set).
constexpr int kNoKind = 0, kBytesKind = 1, kFloatKind = 2, kInt64Kind = 3;

// A forward reader over one message's bytes. Every method returns false on malformed input
// (the caller turns that into DataLoss with `what` and the offset).
struct Wire {
  const std::uint8_t* p;
  const std::uint8_t* end;
  const char* what = nullptr;

  explicit Wire(std::string_view s)
      : p(reinterpret_cast<const std::uint8_t*>(s.data())), end(p + s.size()) {}
  Wire(const std::uint8_t* b, const std::uint8_t* e) : p(b), end(e) {}

  bool done() const { return p >= end; }

  bool fail(const char* why) {
    what = why;
    return false;
  }

  bool varint(std::uint64_t& v) {
    if (p < end && *p < 0x80) {
      v = *p++;
      return true;
    }
    v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p >= end) return fail("a varint runs past the end");
      const std::uint8_t b = *p++;
      v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
      if (b < 0x80) return true;
    }
    return fail("a varint is longer than 10 bytes");
  }

  bool tag(std::uint32_t& field, std::uint32_t& wire_type) {
    std::uint64_t t;
    if (!varint(t)) return false;
    field = static_cast<std::uint32_t>(t >> 3);
    wire_type = static_cast<std::uint32_t>(t & 7);
    if (field == 0) return fail("a field number is 0");
    return true;
  }

  // A length-delimited field's payload.
  bool delimited(const std::uint8_t*& b, const std::uint8_t*& e) {
    std::uint64_t n;
    if (!varint(n)) return false;
    if (n > static_cast<std::uint64_t>(end - p)) return fail("a length-delimited field runs past the end");
    b = p;
    e = p + n;
    p = e;
    return true;
  }

  // Moves past the next length-delimited field `number`, skipping the fields before it; its
  // payload is [b, e). False at the end (what stays null) or on malformed bytes (what set).
  bool next_delimited(std::uint32_t number, const std::uint8_t*& b, const std::uint8_t*& e) {
    while (!done()) {
      std::uint32_t field, wt;
      if (!tag(field, wt)) return false;
      if (field == number && wt == kLen) return delimited(b, e);
      if (!skip(wt)) return false;
    }
    return false;
  }

  bool skip(std::uint32_t wire_type) {
    std::uint64_t v;
    const std::uint8_t *b, *e;
    switch (wire_type) {
      case kVarint: return varint(v);
      case kLen: return delimited(b, e);
      case kFixed64:
        if (end - p < 8) return fail("a fixed64 field runs past the end");
        p += 8;
        return true;
      case kFixed32:
        if (end - p < 4) return fail("a fixed32 field runs past the end");
        p += 4;
        return true;
      default: return fail("a field has a group or unknown wire type");
    }
  }
};

std::string_view view(const std::uint8_t* b, const std::uint8_t* e) {
  return {reinterpret_cast<const char*>(b), static_cast<std::size_t>(e - b)};
}

struct Entry {
  std::string_view key;
  std::string_view feature;
};

// Splits a serialized Example into its feature-map entries, in wire order (duplicates kept).
// On malformed bytes returns false with w.what set and `at` the byte offset.
bool split_example(std::string_view serialized, std::vector<Entry>& entries, const char*& what,
                   std::size_t& at) {
  entries.clear();
  Wire w(serialized);
  const auto* base = w.p;
  auto failed = [&](Wire& x) {
    what = x.what;
    at = static_cast<std::size_t>(x.p - base);
    return false;
  };
  const std::uint8_t *fb, *fe;
  while (w.next_delimited(1, fb, fe)) {  // Example.features
    Wire features(fb, fe);
    const std::uint8_t *eb, *ee;
    while (features.next_delimited(1, eb, ee)) {  // Features: map entries
      Wire entry(eb, ee);
      Entry out{};
      while (!entry.done()) {
        std::uint32_t field, wt;
        if (!entry.tag(field, wt)) return failed(entry);
        if ((field == 1 || field == 2) && wt == kLen) {
          const std::uint8_t *b, *e;
          if (!entry.delimited(b, e)) return failed(entry);
          (field == 1 ? out.key : out.feature) = view(b, e);
        } else if (!entry.skip(wt)) {
          return failed(entry);
        }
      }
      entries.push_back(out);
    }
    if (features.what) return failed(features);
  }
  if (w.what) return failed(w);
  return true;
}

// A Feature's kind and where its list fields start: the fields of that kind from `begin` on
// hold its values (an earlier field of another kind was replaced by the oneof rule).
struct FeatureView {
  int kind = kNoKind;
  const std::uint8_t* begin = nullptr;
  const std::uint8_t* end = nullptr;
};

bool scan_feature(std::string_view bytes, FeatureView& out, const char*& what) {
  Wire w(bytes);
  out = FeatureView{kNoKind, w.p, w.end};
  while (!w.done()) {
    const std::uint8_t* field_start = w.p;
    std::uint32_t field, wt;
    if (!w.tag(field, wt)) break;
    if (field >= 1 && field <= 3 && wt == kLen) {
      if (out.kind != static_cast<int>(field)) {
        out.kind = static_cast<int>(field);
        out.begin = field_start;
      }
    }
    if (!w.skip(wt)) break;
  }
  what = w.what;
  return what == nullptr;
}

// Calls on_list(b, e) for each list message of the feature's kind.
template <typename OnList>
bool for_each_list(const FeatureView& f, OnList&& on_list, const char*& what) {
  Wire w(f.begin, f.end);
  const std::uint8_t *b, *e;
  while (w.next_delimited(static_cast<std::uint32_t>(f.kind), b, e)) {
    if (!on_list(b, e, what)) return false;
  }
  if (w.what) what = w.what;
  return what == nullptr;
}

// What a value reader did with one field 1 of a list message.
enum class ValueStep {
  kRead,  // it read the field's payload
  kSkip,  // a wire type it does not hold values in: skipped like an unknown field
  kFail,  // malformed: `why` says why, or the wire error does
};

// Calls read(w, wire_type, why) at each field 1 (the values) of each list message of the
// feature's kind, skipping other fields; `read` reads the payload from w.
template <typename Read>
bool for_each_value(const FeatureView& f, Read&& read, const char*& what) {
  return for_each_list(f, [&](const std::uint8_t* b, const std::uint8_t* e, const char*& why) {
    Wire w(b, e);
    while (!w.done()) {
      std::uint32_t field, wt;
      if (!w.tag(field, wt)) break;
      why = nullptr;
      const ValueStep step = field == 1 ? read(w, wt, why) : ValueStep::kSkip;
      if (step == ValueStep::kFail) {
        if (why == nullptr) why = w.what;
        return false;
      }
      if (step == ValueStep::kSkip && !w.skip(wt)) break;
    }
    why = w.what;
    return why == nullptr;
  }, what);
}

// Visits a FloatList's values as runs of little-endian floats: run(bytes, count).
template <typename Run>
bool visit_floats(const FeatureView& f, Run&& run, const char*& what) {
  return for_each_value(f, [&](Wire& w, std::uint32_t wt, const char*& why) {
    if (wt == kLen) {
      const std::uint8_t *pb, *pe;
      if (!w.delimited(pb, pe)) return ValueStep::kFail;
      if ((pe - pb) % 4 != 0) {
        why = "a packed float list's length is not a multiple of 4";
        return ValueStep::kFail;
      }
      if (pe != pb) run(pb, static_cast<std::size_t>(pe - pb) / 4);  // never an empty run
      return ValueStep::kRead;
    }
    if (wt != kFixed32) return ValueStep::kSkip;
    if (w.end - w.p < 4) {
      why = "a float runs past the end";
      return ValueStep::kFail;
    }
    run(w.p, 1);
    w.p += 4;
    return ValueStep::kRead;
  }, what);
}

// Visits an Int64List's values one by one: one(value).
template <typename One>
bool visit_int64s(const FeatureView& f, One&& one, const char*& what) {
  return for_each_value(f, [&](Wire& w, std::uint32_t wt, const char*& why) {
    std::uint64_t v;
    if (wt == kLen) {
      const std::uint8_t *pb, *pe;
      if (!w.delimited(pb, pe)) return ValueStep::kFail;
      Wire packed(pb, pe);
      while (!packed.done()) {
        if (!packed.varint(v)) {
          why = packed.what;
          return ValueStep::kFail;
        }
        one(static_cast<std::int64_t>(v));
      }
      return ValueStep::kRead;
    }
    if (wt != kVarint) return ValueStep::kSkip;
    if (!w.varint(v)) return ValueStep::kFail;
    one(static_cast<std::int64_t>(v));
    return ValueStep::kRead;
  }, what);
}

// Visits a BytesList's values: one(string_view).
template <typename One>
bool visit_bytes(const FeatureView& f, One&& one, const char*& what) {
  return for_each_value(f, [&](Wire& w, std::uint32_t wt, const char*&) {
    if (wt != kLen) return ValueStep::kSkip;
    const std::uint8_t *vb, *ve;
    if (!w.delimited(vb, ve)) return ValueStep::kFail;
    one(view(vb, ve));
    return ValueStep::kRead;
  }, what);
}

// ---- Names and messages ---------------------------------------------------------------------

int kind_of(FeatureDType d) {
  switch (d) {
    case FeatureDType::kFloat32: return kFloatKind;
    case FeatureDType::kInt64: return kInt64Kind;
    case FeatureDType::kString: return kBytesKind;
  }
  return kNoKind;
}

const char* kind_name(int kind) {
  switch (kind) {
    case kBytesKind: return "a bytes_list (string)";
    case kFloatKind: return "a float_list (float32)";
    case kInt64Kind: return "an int64_list (int64)";
    default: return "no list";
  }
}

std::string shape_string(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::int64_t product(const std::vector<std::int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>());
}

// "record 3 of file.tfrecord (byte offset 120)", "record 3 of the batch", "the Example".
std::string record_name(const RecordSource* source, std::size_t batch_index, bool single) {
  std::string s;
  if (source && source->index >= 0) {
    s = "record " + std::to_string(source->index);
  } else if (single) {
    s = "the Example";
  } else {
    s = "record " + std::to_string(batch_index) + " of the batch";
  }
  if (source && !source->file.empty()) {
    s += (source->index >= 0 ? " of " : " in ") + source->file;
  }
  if (source && source->offset >= 0) s += " (byte offset " + std::to_string(source->offset) + ")";
  return s;
}

std::size_t values_count(const FeatureValues& v) {
  return std::visit([](const auto& x) -> std::size_t {
    if constexpr (std::is_same_v<std::decay_t<decltype(x)>, std::monostate>) {
      return 0;
    } else {
      return x.size();
    }
  }, v);
}

// The FeatureValues alternative that holds values of `dtype`.
std::size_t alternative_of(FeatureDType dtype) { return static_cast<std::size_t>(kind_of(dtype)); }

DType tensor_dtype(FeatureDType d) { return d == FeatureDType::kFloat32 ? DType::kF32 : DType::kI64; }

// ---- Output building ------------------------------------------------------------------------

enum class SpecKind { kFixed, kVar, kSeq };

struct CompiledSpec {
  std::string name;
  SpecKind kind;
  FeatureDType dtype;
  std::vector<std::int64_t> shape;  // FixedLen: the value shape; Seq: one row's shape
  std::int64_t stride = 1;          // values per example (Fixed) or per row (Seq)
  FeatureValues default_value;      // monostate: none
};

// One feature's output for a batch while it is being parsed.
struct Accumulator {
  Tensor dense;          // FixedLen numeric: [B, shape...], written in place
  StringTensor strings;  // FixedLen string values, or VarLen / Seq string values
  std::vector<float> floats;           // VarLen / Seq values
  std::vector<std::int64_t> int64s;    // VarLen / Seq values
  std::vector<std::uint64_t> ends;     // VarLen / Seq: values after each example
  std::size_t count() const { return floats.size() + int64s.size() + strings.size(); }
};

}  // namespace

// ---- Public small pieces ------------------------------------------------------------------

std::string_view to_string(FeatureDType dtype) noexcept {
  switch (dtype) {
    case FeatureDType::kFloat32: return "float32";
    case FeatureDType::kInt64: return "int64";
    case FeatureDType::kString: return "string";
  }
  return "?";
}

FeatureDType parse_feature_dtype(std::string_view name) {
  if (name == "float32" || name == "float") return FeatureDType::kFloat32;
  if (name == "int64") return FeatureDType::kInt64;
  if (name == "string" || name == "bytes") return FeatureDType::kString;
  throw InvalidArgument("unknown feature dtype '" + std::string(name) +
                        "': a tf.train.Example holds float32 (or float), int64 or string (or bytes)");
}

StringTensor StringTensor::from(std::vector<std::int64_t> shape, const std::vector<std::string>& values) {
  StringTensor t;
  t.shape = std::move(shape);
  if (static_cast<std::int64_t>(values.size()) != t.numel()) {
    throw InvalidArgument("StringTensor::from: " + std::to_string(values.size()) +
                          " strings do not fit shape " + shape_string(t.shape));
  }
  t.offsets.reserve(values.size() + 1);
  for (const auto& v : values) t.push_back(v);
  return t;
}

std::int64_t StringTensor::numel() const { return product(shape); }

void StringTensor::push_back(std::string_view value) {
  bytes.append(value);
  offsets.push_back(bytes.size());
}

std::vector<std::string> StringTensor::to_vector() const {
  std::vector<std::string> out;
  out.reserve(size());
  for (std::size_t i = 0; i < size(); ++i) out.emplace_back((*this)[i]);
  return out;
}

// ---- ExampleParser --------------------------------------------------------------------------

struct ExampleParser::Impl {
  FeatureSpecs specs;
  std::vector<CompiledSpec> compiled;
  std::unordered_map<std::string_view, std::size_t> index;  // for many specs

  explicit Impl(FeatureSpecs s) : specs(std::move(s)) {
    for (const auto& [name, spec] : specs) compiled.push_back(compile(name, spec));
    if (compiled.size() > 8) {
      for (std::size_t d = 0; d < compiled.size(); ++d) index.emplace(compiled[d].name, d);
    }
  }

  static CompiledSpec compile(const std::string& name, const FeatureSpec& spec) {
    auto bad = [&](const std::string& why) { return InvalidArgument("feature '" + name + "': " + why); };
    if (name.empty()) throw InvalidArgument("a feature spec has an empty name");
    CompiledSpec c;
    c.name = name;
    auto check_shape = [&](const std::vector<std::int64_t>& shape, const char* type) {
      for (auto d : shape) {
        if (d < 0) {
          throw bad(std::string(type) + " shape " + shape_string(shape) +
                    ": every dimension must be known and >= 0 (TensorFlow's rule)");
        }
      }
    };
    auto check_default_type = [&](const FeatureValues& v) {
      if (!std::holds_alternative<std::monostate>(v) && v.index() != alternative_of(c.dtype)) {
        throw bad("default_value holds values of another type than the feature's dtype " +
                  std::string(to_string(c.dtype)));
      }
    };
    if (const auto* f = std::get_if<FixedLenFeature>(&spec)) {
      c.kind = SpecKind::kFixed;
      c.dtype = f->dtype;
      c.shape = f->shape;
      check_shape(c.shape, "FixedLenFeature");
      c.stride = product(c.shape);
      c.default_value = f->default_value;
      check_default_type(c.default_value);
      if (!std::holds_alternative<std::monostate>(c.default_value) &&
          static_cast<std::int64_t>(values_count(c.default_value)) != c.stride) {
        throw bad("default_value has " + std::to_string(values_count(c.default_value)) +
                  " values but shape " + shape_string(c.shape) + " needs " + std::to_string(c.stride));
      }
    } else if (const auto* v = std::get_if<VarLenFeature>(&spec)) {
      c.kind = SpecKind::kVar;
      c.dtype = v->dtype;
    } else {
      const auto& s = std::get<FixedLenSequenceFeature>(spec);
      c.kind = SpecKind::kSeq;
      c.dtype = s.dtype;
      c.shape = s.shape;
      if (!s.allow_missing) {
        throw bad("Unsupported: FixedLenSequenceFeature requires allow_missing to be True "
                  "(TensorFlow's rule); set allow_missing");
      }
      check_shape(c.shape, "FixedLenSequenceFeature");
      c.stride = product(c.shape);
      if (c.stride == 0) throw bad("FixedLenSequenceFeature shape " + shape_string(c.shape) + " has no elements");
      check_default_type(s.default_value);
      if (!std::holds_alternative<std::monostate>(s.default_value) && values_count(s.default_value) != 1) {
        throw bad("a FixedLenSequenceFeature default_value is the padding value: exactly one value, not " +
                  std::to_string(values_count(s.default_value)));
      }
      c.default_value = s.default_value;
    }
    return c;
  }

  std::size_t find(std::string_view key) const {
    if (!index.empty()) {
      auto it = index.find(key);
      return it == index.end() ? npos : it->second;
    }
    for (std::size_t d = 0; d < compiled.size(); ++d) {
      if (compiled[d].name.size() == key.size() &&
          std::memcmp(compiled[d].name.data(), key.data(), key.size()) == 0) {
        return d;
      }
    }
    return npos;
  }

  static constexpr std::size_t npos = static_cast<std::size_t>(-1);

  template <typename Str>
  ParsedFeatures parse_batch(std::span<const Str> serialized, std::span<const RecordSource> sources,
                             bool single) const;
};

namespace {

// The per-batch state and per-record rules (TensorFlow's FastParseSerializedExample).
class BatchParser {
 public:
  BatchParser(const std::vector<CompiledSpec>& specs, std::size_t batch, bool single)
      : specs_(specs), acc_(specs.size()), last_seen_(specs.size(), -1), batch_(batch), single_(single) {
    for (std::size_t d = 0; d < specs.size(); ++d) {
      const auto& c = specs[d];
      if (c.kind == SpecKind::kFixed && c.dtype != FeatureDType::kString) {
        std::vector<std::int64_t> shape{static_cast<std::int64_t>(batch)};
        shape.insert(shape.end(), c.shape.begin(), c.shape.end());
        acc_[d].dense.dtype = tensor_dtype(c.dtype);
        acc_[d].dense.shape = std::move(shape);
        acc_[d].dense.data.resize(static_cast<std::size_t>(acc_[d].dense.numel()) * dtype_size(acc_[d].dense.dtype));
      } else if (c.kind == SpecKind::kFixed) {
        acc_[d].strings.offsets.reserve(batch * static_cast<std::size_t>(c.stride) + 1);
      } else {
        acc_[d].ends.reserve(batch);
      }
    }
  }

  template <typename FindFn>
  void record(std::size_t i, std::string_view serialized, const RecordSource* source, FindFn&& find) {
    source_ = source;
    index_ = i;
    const char* what = nullptr;
    std::size_t at = 0;
    if (!split_example(serialized, entries_, what, at)) {
      throw DataLoss(where() + ": not a serialized tf.train.Example (" + what + " at byte " +
                     std::to_string(at) + " of " + std::to_string(serialized.size()) + ")");
    }
    const auto example = static_cast<std::int64_t>(i);
    // Last entry first: protobuf's map keeps the last of a repeated key (TensorFlow's order).
    for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
      const std::size_t d = find(it->key);
      if (d == static_cast<std::size_t>(-1)) continue;
      const CompiledSpec& c = specs_[d];
      FeatureView f;
      if (!scan_feature(it->feature, f, what)) corrupt(c, what);
      if (c.kind != SpecKind::kVar && f.kind == kNoKind) continue;  // empty: as if absent
      if (last_seen_[d] == example) continue;                       // an earlier duplicate
      last_seen_[d] = example;
      if (f.kind != kNoKind && f.kind != kind_of(c.dtype)) {
        throw InvalidArgument(prefix(c) + "data types don't match: the Example holds " + kind_name(f.kind) +
                              " but the feature is declared " + std::string(to_string(c.dtype)));
      }
      if (c.kind == SpecKind::kFixed) {
        fixed(d, f);
      } else {
        variable(d, f);
      }
    }
    missing(example);
  }

  ParsedFeatures finish() {
    ParsedFeatures out;
    for (std::size_t d = 0; d < specs_.size(); ++d) {
      const CompiledSpec& c = specs_[d];
      Accumulator& a = acc_[d];
      switch (c.kind) {
        case SpecKind::kFixed: out.emplace(c.name, finish_fixed(c, a)); break;
        case SpecKind::kVar: out.emplace(c.name, finish_var(c, a)); break;
        case SpecKind::kSeq: out.emplace(c.name, finish_seq(c, a)); break;
      }
    }
    return out;
  }

 private:
  std::string where() const { return record_name(source_, index_, single_); }
  std::string prefix(const CompiledSpec& c) const { return "feature '" + c.name + "' of " + where() + ": "; }

  [[noreturn]] void corrupt(const CompiledSpec& c, const char* what) const {
    throw DataLoss(prefix(c) + "its value is not a valid tf.train.Feature (" + what + ")");
  }

  [[noreturn]] void wrong_count(const CompiledSpec& c, std::size_t n) const {
    throw InvalidArgument(prefix(c) + "FixedLenFeature of shape " + shape_string(c.shape) + " needs " +
                          std::to_string(c.stride) + " " + std::string(to_string(c.dtype)) +
                          " values, the Example holds " + std::to_string(n));
  }

  // FixedLenFeature present: exactly stride values, straight into the batch tensor.
  void fixed(std::size_t d, const FeatureView& f) {
    const CompiledSpec& c = specs_[d];
    Accumulator& a = acc_[d];
    const auto stride = static_cast<std::size_t>(c.stride);
    const char* what = nullptr;
    std::size_t n = 0;
    bool ok = true;
    switch (c.dtype) {
      case FeatureDType::kFloat32: {
        auto* out = a.dense.as<float>() + index_ * stride;
        ok = visit_floats(f, [&](const std::uint8_t* p, std::size_t k) {
          if (n + k <= stride) std::memcpy(out + n, p, k * 4);
          n += k;
        }, what);
        break;
      }
      case FeatureDType::kInt64: {
        auto* out = a.dense.as<std::int64_t>() + index_ * stride;
        ok = visit_int64s(f, [&](std::int64_t v) {
          if (n < stride) out[n] = v;
          ++n;
        }, what);
        break;
      }
      case FeatureDType::kString: {
        const std::size_t before = a.strings.size();
        ok = visit_bytes(f, [&](std::string_view v) { a.strings.push_back(v); }, what);
        n = a.strings.size() - before;
        // Records of a batch are usually alike: size the buffer once from the first one
        // (bounded, so that one huge record cannot reserve batch times its size).
        if (index_ == 0) a.strings.bytes.reserve(std::min<std::size_t>(a.strings.bytes.size() * batch_, 64u << 20));
        break;
      }
    }
    if (!ok) corrupt(c, what);
    if (n != stride) wrong_count(c, n);
  }

  // VarLen / FixedLenSequence present (or VarLen empty): append its values.
  void variable(std::size_t d, const FeatureView& f) {
    const CompiledSpec& c = specs_[d];
    Accumulator& a = acc_[d];
    const std::size_t before = a.count();
    const char* what = nullptr;
    bool ok = true;
    if (f.kind != kNoKind) {
      switch (c.dtype) {
        case FeatureDType::kFloat32:
          ok = visit_floats(f, [&](const std::uint8_t* p, std::size_t k) {
            const std::size_t at = a.floats.size();
            a.floats.resize(at + k);
            std::memcpy(a.floats.data() + at, p, k * 4);
          }, what);
          break;
        case FeatureDType::kInt64:
          ok = visit_int64s(f, [&](std::int64_t v) { a.int64s.push_back(v); }, what);
          break;
        case FeatureDType::kString:
          ok = visit_bytes(f, [&](std::string_view v) { a.strings.push_back(v); }, what);
          break;
      }
    }
    if (!ok) corrupt(c, what);
    const std::size_t n = a.count() - before;
    if (c.kind == SpecKind::kSeq && n % static_cast<std::size_t>(c.stride) != 0) {
      throw InvalidArgument(prefix(c) + "FixedLenSequenceFeature rows of shape " + shape_string(c.shape) +
                            " need a multiple of " + std::to_string(c.stride) + " " +
                            std::string(to_string(c.dtype)) + " values, the Example holds " + std::to_string(n));
    }
    a.ends.push_back(a.count());
  }

  // Features the record does not hold (absent, or dense given as an empty Feature).
  void missing(std::int64_t example) {
    for (std::size_t d = 0; d < specs_.size(); ++d) {
      if (last_seen_[d] == example) continue;
      const CompiledSpec& c = specs_[d];
      Accumulator& a = acc_[d];
      if (c.kind != SpecKind::kFixed) {
        a.ends.push_back(a.count());
        continue;
      }
      if (std::holds_alternative<std::monostate>(c.default_value)) {
        throw InvalidArgument(prefix(c) + "is required (FixedLenFeature " + std::string(to_string(c.dtype)) +
                              " of shape " + shape_string(c.shape) +
                              " without a default_value) but could not be found: the Example does not "
                              "hold it or holds an empty Feature; give the spec a default_value or fix the record");
      }
      const auto stride = static_cast<std::size_t>(c.stride);
      if (stride == 0) continue;  // shape with a 0 dimension: nothing to copy
      switch (c.dtype) {
        case FeatureDType::kFloat32:
          std::memcpy(a.dense.as<float>() + index_ * stride, std::get<2>(c.default_value).data(), stride * 4);
          break;
        case FeatureDType::kInt64:
          std::memcpy(a.dense.as<std::int64_t>() + index_ * stride, std::get<3>(c.default_value).data(),
                      stride * 8);
          break;
        case FeatureDType::kString:
          for (const auto& s : std::get<1>(c.default_value)) a.strings.push_back(s);
          break;
      }
    }
  }

  std::vector<std::int64_t> batch_shape(const std::vector<std::int64_t>& inner) const {
    std::vector<std::int64_t> s;
    if (!single_) s.push_back(static_cast<std::int64_t>(batch_));
    s.insert(s.end(), inner.begin(), inner.end());
    return s;
  }

  FeatureValue finish_fixed(const CompiledSpec& c, Accumulator& a) {
    if (c.dtype == FeatureDType::kString) {
      a.strings.shape = batch_shape(c.shape);
      return std::move(a.strings);
    }
    a.dense.shape = batch_shape(c.shape);
    return std::move(a.dense);
  }

  // Values [N] of a VarLen / Seq feature (moved out of the accumulator).
  std::variant<Tensor, StringTensor> take_values(const CompiledSpec& c, Accumulator& a,
                                                 std::vector<std::int64_t> shape) {
    if (c.dtype == FeatureDType::kString) {
      a.strings.shape = std::move(shape);
      return std::move(a.strings);
    }
    Tensor t;
    t.dtype = tensor_dtype(c.dtype);
    t.shape = std::move(shape);
    if (c.dtype == FeatureDType::kFloat32) {
      t.data.resize(a.floats.size() * 4);
      if (!a.floats.empty()) std::memcpy(t.data.data(), a.floats.data(), t.data.size());
    } else {
      t.data.resize(a.int64s.size() * 8);
      if (!a.int64s.empty()) std::memcpy(t.data.data(), a.int64s.data(), t.data.size());
    }
    return t;
  }

  FeatureValue finish_var(const CompiledSpec& c, Accumulator& a) {
    const std::size_t total = a.count();
    std::uint64_t max_count = 0, prev = 0;
    for (auto e : a.ends) {
      max_count = std::max(max_count, e - prev);
      prev = e;
    }
    SparseTensor s;
    const std::int64_t rank = single_ ? 1 : 2;
    std::vector<std::int64_t> idx;
    idx.reserve(total * static_cast<std::size_t>(rank));
    prev = 0;
    for (std::size_t b = 0; b < a.ends.size(); ++b) {
      for (std::uint64_t k = 0; k < a.ends[b] - prev; ++k) {
        if (!single_) idx.push_back(static_cast<std::int64_t>(b));
        idx.push_back(static_cast<std::int64_t>(k));
      }
      prev = a.ends[b];
    }
    s.indices = Tensor::from(DType::kI64, {static_cast<std::int64_t>(total), rank}, idx);
    std::vector<std::int64_t> dense_shape;
    if (!single_) dense_shape.push_back(static_cast<std::int64_t>(batch_));
    dense_shape.push_back(static_cast<std::int64_t>(max_count));
    s.dense_shape = Tensor::from(DType::kI64, {rank}, dense_shape);
    s.values = take_values(c, a, {static_cast<std::int64_t>(total)});
    return s;
  }

  // [B, max rows, shape...]: each example's rows, then padding.
  FeatureValue finish_seq(const CompiledSpec& c, Accumulator& a) {
    const auto stride = static_cast<std::uint64_t>(c.stride);
    std::uint64_t max_rows = 0, prev = 0;
    for (auto e : a.ends) {
      max_rows = std::max(max_rows, (e - prev) / stride);
      prev = e;
    }
    std::vector<std::int64_t> inner{static_cast<std::int64_t>(max_rows)};
    inner.insert(inner.end(), c.shape.begin(), c.shape.end());
    const std::uint64_t per_example = max_rows * stride;
    if (c.dtype == FeatureDType::kString) {
      const std::string pad = std::holds_alternative<std::monostate>(c.default_value)
                                  ? std::string()
                                  : std::get<1>(c.default_value).front();
      StringTensor t;
      t.shape = batch_shape(inner);
      prev = 0;
      for (auto e : a.ends) {
        for (std::uint64_t k = prev; k < e; ++k) t.push_back(a.strings[k]);
        for (std::uint64_t k = e - prev; k < per_example; ++k) t.push_back(pad);
        prev = e;
      }
      return t;
    }
    Tensor t;
    t.dtype = tensor_dtype(c.dtype);
    t.shape = batch_shape(inner);
    auto fill = [&](auto* out, const auto& values, auto pad) {
      std::uint64_t from = 0;
      for (std::size_t b = 0; b < a.ends.size(); ++b) {
        auto* row = out + b * per_example;
        const std::uint64_t n = a.ends[b] - from;
        std::copy(values.begin() + static_cast<std::ptrdiff_t>(from),
                  values.begin() + static_cast<std::ptrdiff_t>(a.ends[b]), row);
        std::fill(row + n, row + per_example, pad);
        from = a.ends[b];
      }
    };
    t.data.resize(static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype));
    if (c.dtype == FeatureDType::kFloat32) {
      const float pad = std::holds_alternative<std::monostate>(c.default_value) ? 0.0f
                                                                                  : std::get<2>(c.default_value).front();
      fill(t.as<float>(), a.floats, pad);
    } else {
      const std::int64_t pad = std::holds_alternative<std::monostate>(c.default_value)
                                   ? 0
                                   : std::get<3>(c.default_value).front();
      fill(t.as<std::int64_t>(), a.int64s, pad);
    }
    return t;
  }

  const std::vector<CompiledSpec>& specs_;
  std::vector<Accumulator> acc_;
  std::vector<std::int64_t> last_seen_;
  std::vector<Entry> entries_;
  std::size_t batch_;
  bool single_;
  const RecordSource* source_ = nullptr;
  std::size_t index_ = 0;
};

}  // namespace

template <typename Str>
ParsedFeatures ExampleParser::Impl::parse_batch(std::span<const Str> serialized,
                                                std::span<const RecordSource> sources, bool single) const {
  if (!sources.empty() && sources.size() != serialized.size()) {
    throw InvalidArgument("parse_example: " + std::to_string(sources.size()) + " record sources for " +
                          std::to_string(serialized.size()) + " records; give none or one per record");
  }
  BatchParser batch(compiled, serialized.size(), single);
  auto finder = [this](std::string_view key) { return find(key); };
  for (std::size_t i = 0; i < serialized.size(); ++i) {
    batch.record(i, std::string_view(serialized[i]), sources.empty() ? nullptr : &sources[i], finder);
  }
  return batch.finish();
}

ExampleParser::ExampleParser(FeatureSpecs specs) : impl_(std::make_unique<Impl>(std::move(specs))) {}
ExampleParser::~ExampleParser() = default;
ExampleParser::ExampleParser(ExampleParser&&) noexcept = default;
ExampleParser& ExampleParser::operator=(ExampleParser&&) noexcept = default;

const FeatureSpecs& ExampleParser::specs() const noexcept { return impl_->specs; }

ParsedFeatures ExampleParser::parse_single(std::string_view serialized, const RecordSource& source) const {
  const std::string_view one[] = {serialized};
  const RecordSource src[] = {source};
  return impl_->parse_batch(std::span<const std::string_view>(one), std::span<const RecordSource>(src), true);
}

ParsedFeatures ExampleParser::parse(std::span<const std::string> serialized,
                                    std::span<const RecordSource> sources) const {
  return impl_->parse_batch(serialized, sources, false);
}

ParsedFeatures ExampleParser::parse(std::span<const std::string_view> serialized,
                                    std::span<const RecordSource> sources) const {
  return impl_->parse_batch(serialized, sources, false);
}

ParsedFeatures parse_single_example(std::string_view serialized, const FeatureSpecs& features,
                                    const RecordSource& source) {
  return ExampleParser(features).parse_single(serialized, source);
}

ParsedFeatures parse_example(std::span<const std::string> serialized, const FeatureSpecs& features,
                             std::span<const RecordSource> sources) {
  return ExampleParser(features).parse(serialized, sources);
}

// ---- read_example -----------------------------------------------------------------------------

std::map<std::string, FeatureValues> read_example(std::string_view serialized, const RecordSource& source) {
  std::vector<Entry> entries;
  const char* what = nullptr;
  std::size_t at = 0;
  const std::string where = record_name(&source, 0, true);
  if (!split_example(serialized, entries, what, at)) {
    throw DataLoss(where + ": not a serialized tf.train.Example (" + what + " at byte " + std::to_string(at) +
                   " of " + std::to_string(serialized.size()) + ")");
  }
  std::map<std::string, FeatureValues> out;
  for (const auto& e : entries) {  // wire order: a later entry replaces an earlier one
    FeatureView f;
    bool ok = scan_feature(e.feature, f, what);
    FeatureValues values;
    if (ok && f.kind == kBytesKind) {
      std::vector<std::string> v;
      ok = visit_bytes(f, [&](std::string_view s) { v.emplace_back(s); }, what);
      values = std::move(v);
    } else if (ok && f.kind == kFloatKind) {
      std::vector<float> v;
      ok = visit_floats(f, [&](const std::uint8_t* p, std::size_t k) {
        const std::size_t n = v.size();
        v.resize(n + k);
        std::memcpy(v.data() + n, p, k * 4);
      }, what);
      values = std::move(v);
    } else if (ok && f.kind == kInt64Kind) {
      std::vector<std::int64_t> v;
      ok = visit_int64s(f, [&](std::int64_t x) { v.push_back(x); }, what);
      values = std::move(v);
    }
    if (!ok) {
      throw DataLoss("feature '" + std::string(e.key) + "' of " + where +
                     ": its value is not a valid tf.train.Feature (" + what + ")");
    }
    out[std::string(e.key)] = std::move(values);
  }
  return out;
}

// ---- decode_raw -------------------------------------------------------------------------------

Tensor decode_raw(const StringTensor& bytes, DType out_type) {
  const std::size_t size = dtype_size(out_type);
  const std::size_t n = bytes.size();
  const std::size_t len = n == 0 ? 0 : bytes.offsets[1] - bytes.offsets[0];
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t li = bytes.offsets[i + 1] - bytes.offsets[i];
    if (li != len) {
      throw InvalidArgument("decode_raw: the strings must all have the same length, but element " +
                            std::to_string(i) + " has " + std::to_string(li) + " bytes and element 0 has " +
                            std::to_string(len));
    }
  }
  if (len % size != 0) {
    throw InvalidArgument("decode_raw: a string of " + std::to_string(len) + " bytes is not a whole number of " +
                          dtype_name(out_type) + " values (" + std::to_string(size) + " bytes each)");
  }
  Tensor t;
  t.dtype = out_type;
  t.shape = bytes.shape;
  t.shape.push_back(static_cast<std::int64_t>(len / size));
  // The strings lie end to end, so the whole buffer is the row-major result.
  t.data.resize(bytes.bytes.size());
  if (!bytes.bytes.empty()) std::memcpy(t.data.data(), bytes.bytes.data(), bytes.bytes.size());
  return t;
}

}  // namespace tensorhub
