// tf.train.Example: parsing with TensorFlow's feature specs, and writing.
//
// Parsing follows tf.io.parse_example / tf.io.parse_single_example (TensorFlow's fast parser,
// tensorflow/core/util/example_proto_fast_parsing.cc, and the Python checks in
// tensorflow/python/ops/parsing_config.py), rule for rule:
//  - FixedLenFeature(shape, dtype, default_value): the Example must hold exactly
//    product(shape) values of `dtype`. A feature that is absent, or present as an empty
//    Feature (no list set), takes `default_value`; without one it is an error ("is required
//    but could not be found"). A list that is set but has the wrong number of values (an empty
//    list too) is an error. A default must have exactly product(shape) values.
//  - VarLenFeature(dtype): any number of values (absent or empty: none); the result is a
//    SparseTensor. parse_example gives indices [N, 2] (example, position), values [N] and
//    dense_shape [B, max count]; parse_single_example gives indices [N, 1] and dense_shape [N].
//  - FixedLenSequenceFeature(shape, dtype, allow_missing, default_value): any multiple of
//    product(shape) values, as [rows, shape...]; allow_missing must be true (TensorFlow refuses
//    false in parse_example and parse_single_example alike); an absent or empty Feature gives
//    0 rows. In a batch, shorter examples are padded to the longest with default_value (one
//    scalar; without one 0, or "" for strings): [B, max rows, shape...].
//  - dtype: the Example's list kind must be the declared dtype (float_list for kFloat32,
//    int64_list for kInt64, bytes_list for kString), else an error ("data types don't match").
//    An empty Feature has no kind and matches any dtype.
//  - A key repeated inside one Example's feature map (possible on the wire, e.g. two Examples
//    concatenated): the last entry wins, as protobuf map parsing does - except that, as in
//    TensorFlow's fast parser, for dense features (FixedLen, FixedLenSequence) a later *empty*
//    Feature does not hide an earlier non-empty one (empty Features are skipped before the
//    duplicate check); for VarLen features the last entry wins even if empty. Not an error
//    (TensorFlow logs "Data loss! ... Ignoring all but last one").
//  - Features of the Example that the specs do not name are ignored.
// Errors: tensorhub::InvalidArgument for a record that breaks a rule (and for invalid specs),
// tensorhub::DataLoss for bytes that are not a serialized Example. Each names the feature, the
// record (its index, and the file and byte offset when the caller passes a RecordSource) and
// the rule.
//
// Reading (src/data/example_reader.cpp) parses the wire format directly, for speed (no protobuf
// objects; TensorFlow's fast parser does the same); writing (ExampleBuilder,
// src/data/example_writer.cpp) uses protobuf's generated classes for our .proto with
// TensorFlow's field numbers, proto/tensorhub/tf/example.proto and feature.proto (generated
// header tensorhub/tf/example.pb.h). Feature specs as JSON (a features file, a hub dataset's
// "features") are data/hub_dataset.h's feature_specs_from_json and feature_specs_to_json.
//
// Thread safety: ExampleParser is immutable after construction; its methods may be called
// from several threads at once. Results share nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "tensorhub/core/named_tensors.h"

namespace tensorhub {

namespace tf {
class Example;  // tensorhub/tf/example.pb.h (protobuf's generated class), used by ExampleBuilder
}  // namespace tf

/// The value type of a feature: tf.float32 (float_list), tf.int64 (int64_list),
/// tf.string (bytes_list).
enum class FeatureDType { kFloat32, kInt64, kString };

/// "float32", "int64" or "string" (TensorFlow's dtype names).
std::string_view to_string(FeatureDType dtype) noexcept;
/// Parses "float32" (or "float"), "int64" or "string" (or "bytes").
/// Throws InvalidArgument naming the allowed names for anything else.
FeatureDType parse_feature_dtype(std::string_view name);

/// A dense tensor of byte strings (tf.string), row-major. The strings lie end to end in
/// `bytes`; element i is bytes[offsets[i], offsets[i + 1]). Invariant:
/// offsets.size() == numel() + 1, offsets[0] == 0, offsets.back() == bytes.size().
struct StringTensor {
  std::vector<std::int64_t> shape;  ///< empty for a scalar
  std::string bytes;
  std::vector<std::uint64_t> offsets{0};

  /// `values` as a tensor of `shape`. Throws InvalidArgument if the count differs from
  /// product(shape).
  static StringTensor from(std::vector<std::int64_t> shape, const std::vector<std::string>& values);
  /// Number of strings (product of shape; 1 for a scalar).
  std::int64_t numel() const;
  /// Number of strings stored (offsets.size() - 1).
  std::size_t size() const noexcept { return offsets.size() - 1; }
  /// Element i (no bounds check).
  std::string_view operator[](std::size_t i) const noexcept {
    return std::string_view(bytes).substr(offsets[i], offsets[i + 1] - offsets[i]);
  }
  /// Appends one string (the shape is not changed).
  void push_back(std::string_view value);
  /// The strings as a vector.
  std::vector<std::string> to_vector() const;
};

/// tf.SparseTensor: values[i] is at position indices[i, :] of a dense tensor of dense_shape.
struct SparseTensor {
  Tensor indices;                               ///< I64 [N, rank], in row-major order
  std::variant<Tensor, StringTensor> values;    ///< [N]: F32 or I64 Tensor, or strings
  Tensor dense_shape;                           ///< I64 [rank]
};

/// One parsed feature: a dense numeric Tensor (F32 for kFloat32, I64 for kInt64), a
/// StringTensor (kString), or a SparseTensor (VarLenFeature).
using FeatureValue = std::variant<Tensor, StringTensor, SparseTensor>;
/// Parsed features by name, one entry per spec.
using ParsedFeatures = std::map<std::string, FeatureValue>;

/// The values of one tf.train.Feature. The alternative's index is the Feature's oneof field
/// number: monostate = empty Feature (no list set), 1 = bytes_list, 2 = float_list,
/// 3 = int64_list. Also the type of default values (monostate: no default).
using FeatureValues =
    std::variant<std::monostate, std::vector<std::string>, std::vector<float>, std::vector<std::int64_t>>;

/// tf.io.FixedLenFeature.
struct FixedLenFeature {
  std::vector<std::int64_t> shape;  ///< every dimension >= 0; {} = a scalar
  FeatureDType dtype = FeatureDType::kFloat32;
  /// product(shape) values of `dtype`, row-major (vector<float> for kFloat32,
  /// vector<int64_t> for kInt64, vector<string> for kString); monostate: required.
  FeatureValues default_value;
};

/// tf.io.VarLenFeature.
struct VarLenFeature {
  FeatureDType dtype = FeatureDType::kFloat32;
};

/// tf.io.FixedLenSequenceFeature.
struct FixedLenSequenceFeature {
  std::vector<std::int64_t> shape;  ///< of one row; every dimension >= 0, product > 0
  FeatureDType dtype = FeatureDType::kFloat32;
  bool allow_missing = false;       ///< must be true (TensorFlow's rule)
  /// The padding value in a batch: exactly one value of `dtype`; monostate: 0 or "".
  FeatureValues default_value;
};

using FeatureSpec = std::variant<FixedLenFeature, VarLenFeature, FixedLenSequenceFeature>;
/// Specs by feature name (the `features` dict of tf.io.parse_example).
using FeatureSpecs = std::map<std::string, FeatureSpec>;

/// Where a serialized record came from, for error messages. All optional.
struct RecordSource {
  std::string file;          ///< the TFRecord file, or "" if unknown
  std::int64_t index = -1;   ///< the record's index in that file (0-based), -1 if unknown
  std::int64_t offset = -1;  ///< the record's byte offset (TFRecordReader::offset()), -1 if unknown
};

/// Parses serialized tf.train.Examples with fixed specs. Build one per spec set and reuse it:
/// the specs are checked and indexed once.
class ExampleParser {
 public:
  /// Checks `specs` as TensorFlow does before parsing. Throws InvalidArgument naming the
  /// feature for: an empty name; a negative dimension; a FixedLenFeature default whose type is
  /// not `dtype`'s or whose count is not product(shape); a FixedLenSequenceFeature without
  /// allow_missing, with a row of 0 elements, or with a default that is not one value of its
  /// dtype.
  explicit ExampleParser(FeatureSpecs specs);
  ~ExampleParser();
  ExampleParser(ExampleParser&&) noexcept;
  ExampleParser& operator=(ExampleParser&&) noexcept;

  /// tf.io.parse_single_example: one result per spec, without a batch dimension (see the
  /// file comment for shapes). Throws InvalidArgument / DataLoss as the file comment says,
  /// naming `source`.
  ParsedFeatures parse_single(std::string_view serialized, const RecordSource& source = {}) const;

  /// tf.io.parse_example on a batch of B records: FixedLen [B, shape...], VarLen sparse with
  /// dense_shape [B, max count], FixedLenSequence [B, max rows, shape...] padded.
  /// `sources` is empty or has one entry per record (for error messages; without it a record
  /// is named by its index in the batch). Throws as parse_single for the first bad record.
  ParsedFeatures parse(std::span<const std::string> serialized,
                       std::span<const RecordSource> sources = {}) const;
  ParsedFeatures parse(std::span<const std::string_view> serialized,
                       std::span<const RecordSource> sources = {}) const;

  /// The specs this parser was built with (checked once, in the constructor).
  const FeatureSpecs& specs() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// ExampleParser(features).parse_single(serialized, source).
ParsedFeatures parse_single_example(std::string_view serialized, const FeatureSpecs& features,
                                    const RecordSource& source = {});
/// ExampleParser(features).parse(serialized, sources).
ParsedFeatures parse_example(std::span<const std::string> serialized, const FeatureSpecs& features,
                             std::span<const RecordSource> sources = {});

/// Every feature of a serialized Example with its own kind, no specs (for inspection, e.g.
/// `dataset head`). A key repeated in the map: the last entry wins (protobuf's map rule).
/// Throws DataLoss naming `source` if `serialized` is not a serialized Example.
std::map<std::string, FeatureValues> read_example(std::string_view serialized, const RecordSource& source = {});

/// Builds one serialized tf.train.Example, feature by feature, with protobuf's generated
/// tensorhub::tf::Example (proto/tensorhub/tf/example.proto: TensorFlow's field numbers).
/// The bytes are protobuf's deterministic serialization: features in name order (byte-wise),
/// float and int64 lists packed, as TensorFlow's own writers write them.
/// Copyable; one builder is used by one thread at a time.
class ExampleBuilder {
 public:
  /// An Example with no features (serializes to "\x0a\x00": its features field, empty).
  ExampleBuilder();
  ~ExampleBuilder();
  ExampleBuilder(const ExampleBuilder& other);
  ExampleBuilder& operator=(const ExampleBuilder& other);

  /// Sets feature `name` (replacing an earlier one of that name) to a bytes_list / float_list /
  /// int64_list with these values (an empty span gives an empty list, which is not the same as
  /// an empty Feature), or to an empty Feature (add_empty). Returns *this.
  ExampleBuilder& add_bytes(const std::string& name, std::span<const std::string_view> values);
  ExampleBuilder& add_bytes(const std::string& name, std::string_view value);
  ExampleBuilder& add_floats(const std::string& name, std::span<const float> values);
  ExampleBuilder& add_int64s(const std::string& name, std::span<const std::int64_t> values);
  ExampleBuilder& add_empty(const std::string& name);
  ExampleBuilder& add(const std::string& name, const FeatureValues& values);

  /// The serialized Example (the builder is unchanged: call clear() to start another).
  /// Throws InvalidArgument when it would exceed protobuf's 2 GiB message limit.
  std::string serialize() const;
  /// serialize() into `out` (replacing its content), reusing its buffer.
  void serialize_to(std::string& out) const;
  /// Removes every feature.
  void clear() noexcept;

 private:
  std::unique_ptr<tf::Example> example_;  // never null
};

/// A serialized tf.train.Example holding `features` (ExampleBuilder::add for each).
std::string serialize_example(const std::map<std::string, FeatureValues>& features);

/// tf.io.decode_raw: each string of `bytes` reinterpreted as little-endian values of
/// `out_type`; the result has shape bytes.shape + [n]. Throws InvalidArgument if the strings
/// differ in length or a length is not a multiple of dtype_size(out_type) (naming the element).
Tensor decode_raw(const StringTensor& bytes, DType out_type);

}  // namespace tensorhub
