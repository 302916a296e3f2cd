// tf.train.Example writing: ExampleBuilder and serialize_example, through protobuf's generated
// classes for our proto/tensorhub/tf/example.proto and feature.proto (TensorFlow's field
// numbers, so the bytes are TensorFlow's tf.train.Example).
//
// The bytes are protobuf's deterministic serialization (io::CodedOutputStream::
// SetSerializationDeterministic): map entries in key order, so one set of features always
// gives the same record (content hashes of written files stay stable). Repeated float and
// int64 values are packed (proto3's default, as TensorFlow writes them); an empty list is a
// list message with no values; an empty Feature is a Feature with no kind set.
//
// Reading stays hand-written for speed (example_reader.cpp says why); writing is not on a hot
// path, and protobuf's own serializer is the format's reference.
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <cstdint>
#include <utility>

#include "tensorhub/core/error.h"
#include "tensorhub/data/example.h"
#include "tensorhub/tf/example.pb.h"

namespace tensorhub {

namespace {

// The Feature named `name` in `example`, added with no kind set if there is none.
tf::Feature& feature(tf::Example& example, const std::string& name) {
  return (*example.mutable_features()->mutable_feature())[name];
}

}  // namespace

// An Example always has its features field, even with no feature in it ("\x0a\x00"), as
// TensorFlow's tf.train.Example(features=tf.train.Features()) serializes.
ExampleBuilder::ExampleBuilder() : example_(std::make_unique<tf::Example>()) { example_->mutable_features(); }
ExampleBuilder::~ExampleBuilder() = default;

ExampleBuilder::ExampleBuilder(const ExampleBuilder& other)
    : example_(std::make_unique<tf::Example>(*other.example_)) {}

ExampleBuilder& ExampleBuilder::operator=(const ExampleBuilder& other) {
  if (this != &other) *example_ = *other.example_;
  return *this;
}

ExampleBuilder& ExampleBuilder::add_bytes(const std::string& name, std::span<const std::string_view> values) {
  // mutable_bytes_list() keeps the list of an earlier add_bytes of this name: Clear() keeps
  // its strings' buffers, so a builder reused record after record does not allocate.
  tf::BytesList* list = feature(*example_, name).mutable_bytes_list();
  list->Clear();
  list->mutable_value()->Reserve(static_cast<int>(values.size()));
  for (auto v : values) list->add_value(v.data(), v.size());
  return *this;
}

ExampleBuilder& ExampleBuilder::add_bytes(const std::string& name, std::string_view value) {
  return add_bytes(name, std::span<const std::string_view>(&value, 1));
}

ExampleBuilder& ExampleBuilder::add_floats(const std::string& name, std::span<const float> values) {
  tf::FloatList* list = feature(*example_, name).mutable_float_list();
  list->Clear();
  list->mutable_value()->Add(values.begin(), values.end());
  return *this;
}

ExampleBuilder& ExampleBuilder::add_int64s(const std::string& name, std::span<const std::int64_t> values) {
  tf::Int64List* list = feature(*example_, name).mutable_int64_list();
  list->Clear();
  list->mutable_value()->Add(values.begin(), values.end());
  return *this;
}

ExampleBuilder& ExampleBuilder::add_empty(const std::string& name) {
  feature(*example_, name).Clear();
  return *this;
}

ExampleBuilder& ExampleBuilder::add(const std::string& name, const FeatureValues& values) {
  switch (values.index()) {
    case 0: return add_empty(name);
    case 1: {
      const auto& v = std::get<1>(values);
      std::vector<std::string_view> views(v.begin(), v.end());
      return add_bytes(name, std::span<const std::string_view>(views));
    }
    case 2: return add_floats(name, std::get<2>(values));
    default: return add_int64s(name, std::get<3>(values));
  }
}

void ExampleBuilder::serialize_to(std::string& out) const {
  const std::size_t size = example_->ByteSizeLong();
  if (size > static_cast<std::size_t>(INT32_MAX)) {
    throw InvalidArgument("tf.train.Example: " + std::to_string(size) +
                          " bytes is more than protobuf can serialize (2 GiB); write fewer or smaller features");
  }
  out.resize(size);
  google::protobuf::io::ArrayOutputStream array(out.data(), static_cast<int>(size));
  google::protobuf::io::CodedOutputStream stream(&array);
  stream.SetSerializationDeterministic(true);  // map entries in key order
  example_->SerializeWithCachedSizes(&stream);
  if (stream.HadError() || static_cast<std::size_t>(stream.ByteCount()) != size) {
    throw Internal("tf.train.Example: protobuf wrote " + std::to_string(stream.ByteCount()) + " bytes of " +
                   std::to_string(size));
  }
}

std::string ExampleBuilder::serialize() const {
  std::string out;
  serialize_to(out);
  return out;
}

void ExampleBuilder::clear() noexcept { example_->mutable_features()->Clear(); }

std::string serialize_example(const std::map<std::string, FeatureValues>& features) {
  ExampleBuilder b;
  for (const auto& [name, values] : features) b.add(name, values);
  return b.serialize();
}

}  // namespace tensorhub
