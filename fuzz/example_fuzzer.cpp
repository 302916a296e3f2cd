// libFuzzer target for tf.train.Example parsing (data/example.h): the input is one serialized
// Example. Parsing either throws tensorhub::Error or gives results, and then:
//  - read_example's features, written again with serialize_example and read back, are the
//    same (compared as serialized bytes, so NaN payloads count too);
//  - parse_single_example gives each spec's documented shape, and a VarLenFeature's values are
//    the ones read_example sees for that key (both keep the last entry of a repeated key);
//  - parse_example on two copies of the input succeeds exactly when the single parse does,
//    with dense values that are the single ones twice and sparse/sequence batch shapes.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "tensorhub/data/example.h"

using namespace tensorhub;

namespace {

const ExampleParser& parser() {
  static const ExampleParser p({
      {"a", FixedLenFeature{{2}, FeatureDType::kFloat32, std::vector<float>{0, 0}}},
      {"b", FixedLenFeature{{}, FeatureDType::kInt64, std::vector<std::int64_t>{7}}},
      {"c", FixedLenFeature{{}, FeatureDType::kString, std::vector<std::string>{"z"}}},
      {"d", VarLenFeature{FeatureDType::kFloat32}},
      {"e", VarLenFeature{FeatureDType::kInt64}},
      {"f", VarLenFeature{FeatureDType::kString}},
      {"g", FixedLenSequenceFeature{{2}, FeatureDType::kFloat32, true, {}}},
      {"h", FixedLenSequenceFeature{{}, FeatureDType::kInt64, true, {}}},
      {"i", FixedLenSequenceFeature{{}, FeatureDType::kString, true, std::vector<std::string>{"p"}}},
  });
  return p;
}

using Shape = std::vector<std::int64_t>;

void expect(bool ok, const char* what) {
  if (!ok) fuzz::fail(what);
}

// Dense bytes of a numeric or string value, for comparisons.
std::string bytes_of(const FeatureValue& v) {
  if (const auto* t = std::get_if<Tensor>(&v)) return {reinterpret_cast<const char*>(t->data.data()), t->data.size()};
  const auto& s = std::get<StringTensor>(v);
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) out += std::to_string(s[i].size()) + ":" + std::string(s[i]);
  return out;
}

Shape shape_of(const FeatureValue& v) {
  if (const auto* t = std::get_if<Tensor>(&v)) return t->shape;
  return std::get<StringTensor>(v).shape;
}

void check_read_example(const std::map<std::string, FeatureValues>& features) {
  const std::string again = serialize_example(features);
  const auto back = read_example(again);
  expect(serialize_example(back) == again, "read_example(serialize_example(x)) differs from x");
}

void check_single(const ParsedFeatures& p, const std::map<std::string, FeatureValues>* read) {
  expect(p.size() == 9, "parse_single_example did not give one result per spec");
  expect(shape_of(p.at("a")) == Shape{2} && shape_of(p.at("b")).empty() && shape_of(p.at("c")).empty(),
         "FixedLen shapes");
  expect(std::get<StringTensor>(p.at("c")).size() == 1, "a FixedLen string scalar holds one string");
  for (const char* k : {"d", "e", "f"}) {
    const auto& s = std::get<SparseTensor>(p.at(k));
    const std::int64_t n = s.indices.shape.at(0);
    expect(s.indices.shape == (Shape{n, 1}), "VarLen indices are [N, 1]");
    expect(s.dense_shape.shape == Shape{1} && s.dense_shape.as<std::int64_t>()[0] == n, "VarLen dense_shape is [N]");
    for (std::int64_t i = 0; i < n; ++i) expect(s.indices.as<std::int64_t>()[i] == i, "VarLen indices count up");
  }
  expect(shape_of(p.at("g")).size() == 2 && shape_of(p.at("g"))[1] == 2, "a FixedLenSequence [2] is [rows, 2]");
  if (!read) return;
  // VarLen "e" against read_example's view of the same key.
  const auto& e = std::get<SparseTensor>(p.at("e"));
  const auto& values = std::get<Tensor>(e.values);
  auto it = read->find("e");
  if (it == read->end() || std::holds_alternative<std::monostate>(it->second)) {
    expect(values.numel() == 0, "VarLen 'e' has values read_example does not see");
  } else {
    const auto& want = std::get<std::vector<std::int64_t>>(it->second);  // else parse had thrown
    expect(static_cast<std::size_t>(values.numel()) == want.size() &&
               (want.empty() || std::memcmp(values.data.data(), want.data(), want.size() * 8) == 0),
           "VarLen 'e' values differ from read_example's");
  }
}

void check_batch(const ParsedFeatures& single, const ParsedFeatures& batch) {
  for (const char* k : {"a", "b", "c"}) {
    Shape want{2};
    const auto inner = shape_of(single.at(k));
    want.insert(want.end(), inner.begin(), inner.end());
    expect(shape_of(batch.at(k)) == want, "a batched FixedLen is [2, shape...]");
    expect(bytes_of(batch.at(k)) == bytes_of(single.at(k)) + bytes_of(single.at(k)), "batched FixedLen values");
  }
  for (const char* k : {"d", "e", "f"}) {
    const auto& s = std::get<SparseTensor>(batch.at(k));
    const auto n = std::get<SparseTensor>(single.at(k)).indices.shape.at(0);
    expect(s.indices.shape == (Shape{2 * n, 2}), "batched VarLen indices are [2N, 2]");
    expect(s.dense_shape.as<std::int64_t>()[0] == 2 && s.dense_shape.as<std::int64_t>()[1] == n,
           "batched VarLen dense_shape is [2, N]");
  }
  for (const char* k : {"g", "h", "i"}) {
    Shape want{2};
    const auto inner = shape_of(single.at(k));
    want.insert(want.end(), inner.begin(), inner.end());
    expect(shape_of(batch.at(k)) == want, "a batched FixedLenSequence of equal rows is [2, rows, ...]");
    expect(bytes_of(batch.at(k)) == bytes_of(single.at(k)) + bytes_of(single.at(k)), "batched sequence values");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  std::map<std::string, FeatureValues> read;
  bool read_ok = false;
  fuzz::expect_clean([&] {
    read = read_example(input);
    read_ok = true;
  });
  if (read_ok) check_read_example(read);

  ParsedFeatures single;
  bool single_ok = false;
  fuzz::expect_clean([&] {
    single = parser().parse_single(input);
    single_ok = true;
  });
  if (single_ok) check_single(single, read_ok ? &read : nullptr);

  const std::vector<std::string> two{input, input};
  ParsedFeatures batch;
  bool batch_ok = false;
  fuzz::expect_clean([&] {
    batch = parser().parse(two);
    batch_ok = true;
  });
  expect(batch_ok == single_ok, "parse_example on two copies and parse_single_example disagree on success");
  if (batch_ok) check_batch(single, batch);
  return 0;
}
