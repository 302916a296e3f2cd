// tf.train.Example tests: parsing the TensorFlow-written fixtures (tests/fixtures/tfrecord;
// expected values from toy.csv and the README's encoding), each of TensorFlow's parsing rules
// on hand-built Examples (some built with protobuf's generated tensorhub/tf/example.pb.h, the
// reader being hand-written), errors naming the feature, record and file; the writer (itself
// protobuf's generated classes) checked against bytes TensorFlow wrote and bytes assembled by
// hand from the wire format, and read back by the parser; and decode_raw.
#include "tensorhub/data/example.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tensorhub/core/error.h"
#include "tensorhub/data/tfrecord.h"
#include "tensorhub/tf/example.pb.h"
#include "test_util.h"

namespace tensorhub {
namespace {

using testing::expect_error;

const std::filesystem::path kFixtures = TENSORHUB_TFRECORD_FIXTURES;

template <typename T>
std::vector<T> values_of(const Tensor& t) {
  EXPECT_EQ(dtype_size(t.dtype), sizeof(T));
  return std::vector<T>(t.as<T>(), t.as<T>() + t.numel());
}

const Tensor& tensor(const ParsedFeatures& p, const std::string& name) {
  return std::get<Tensor>(p.at(name));
}
const StringTensor& strings(const ParsedFeatures& p, const std::string& name) {
  return std::get<StringTensor>(p.at(name));
}
const SparseTensor& sparse(const ParsedFeatures& p, const std::string& name) {
  return std::get<SparseTensor>(p.at(name));
}

using Shape = std::vector<std::int64_t>;
using Strs = std::vector<std::string>;

// The four toy records (toy.csv rows 1-4) with their sources.
struct ToyRecords {
  std::vector<std::string> records;
  std::vector<RecordSource> sources;
};

ToyRecords toy_records() {
  ToyRecords t;
  for (const char* name : {"toy.nocompress-tfe-tfrecord-00000-of-00002", "toy.nocompress-tfe-tfrecord-00001-of-00002"}) {
    const auto path = kFixtures / name;
    TFRecordReader reader(path);
    std::int64_t index = 0;
    for (;;) {
      const auto offset = static_cast<std::int64_t>(reader.offset());
      auto r = reader.next();
      if (!r) break;
      t.records.push_back(std::move(*r));
      t.sources.push_back({path.string(), index++, offset});
    }
  }
  EXPECT_EQ(t.records.size(), 4u);
  return t;
}

// --- The TensorFlow-written fixtures ------------------------------------------------------

TEST(ExampleFixtures, ToyFixedLenFeaturesMatchCsv) {
  const auto toy = toy_records();
  const FeatureSpecs specs{
      {"Num_1", FixedLenFeature{{}, FeatureDType::kFloat32, {}}},
      // Rows 1 and 3 are NA (an empty Feature): they take the default.
      {"Num_2", FixedLenFeature{{}, FeatureDType::kFloat32, std::vector<float>{-1.0f}}},
      {"Cat_1", FixedLenFeature{{}, FeatureDType::kString, {}}},
      // Rows 2 and 4 are empty cells (an empty Feature).
      {"Cat_2", FixedLenFeature{{1}, FeatureDType::kString, Strs{"none"}}},
      {"Bool_1", FixedLenFeature{{}, FeatureDType::kInt64, {}}},
      {"Cat_3", FixedLenFeature{{}, FeatureDType::kFloat32, {}}},
  };
  const auto p = parse_example(toy.records, specs, toy.sources);
  ASSERT_EQ(p.size(), specs.size());
  EXPECT_EQ(tensor(p, "Num_1").shape, Shape{4});
  EXPECT_EQ(values_of<float>(tensor(p, "Num_1")), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(values_of<float>(tensor(p, "Num_2")), (std::vector<float>{-1, 2, -1, 4}));
  EXPECT_EQ(strings(p, "Cat_1").shape, Shape{4});
  EXPECT_EQ(strings(p, "Cat_1").to_vector(), (Strs{"A", "B", "A", "C"}));
  EXPECT_EQ(strings(p, "Cat_2").shape, (Shape{4, 1}));
  EXPECT_EQ(strings(p, "Cat_2").to_vector(), (Strs{"A", "none", "B", "none"}));
  EXPECT_EQ(tensor(p, "Bool_1").dtype, DType::kI64);
  EXPECT_EQ(values_of<std::int64_t>(tensor(p, "Bool_1")), (std::vector<std::int64_t>{0, 1, 0, 1}));
  EXPECT_EQ(values_of<float>(tensor(p, "Cat_3")), (std::vector<float>{1, 2, 1, 3}));
}

TEST(ExampleFixtures, ToyVarLenFeaturesAreSparse) {
  const auto toy = toy_records();
  const FeatureSpecs specs{{"Cat_set_1", VarLenFeature{FeatureDType::kString}},
                           {"Cat_set_2", VarLenFeature{FeatureDType::kString}},
                           {"Bool_2", VarLenFeature{FeatureDType::kInt64}}};
  const auto p = parse_example(toy.records, specs, toy.sources);
  // Cat_set_1: X | X Y | Y X Z | X Y Z, lower-cased.
  const auto& s1 = sparse(p, "Cat_set_1");
  EXPECT_EQ(s1.indices.shape, (Shape{9, 2}));
  EXPECT_EQ(values_of<std::int64_t>(s1.indices),
            (std::vector<std::int64_t>{0, 0, 1, 0, 1, 1, 2, 0, 2, 1, 2, 2, 3, 0, 3, 1, 3, 2}));
  EXPECT_EQ(std::get<StringTensor>(s1.values).to_vector(), (Strs{"x", "x", "y", "y", "x", "z", "x", "y", "z"}));
  EXPECT_EQ(values_of<std::int64_t>(s1.dense_shape), (std::vector<std::int64_t>{4, 3}));
  // Cat_set_2: (empty cell) | X | X Y | Z X Y.
  const auto& s2 = sparse(p, "Cat_set_2");
  EXPECT_EQ(values_of<std::int64_t>(s2.indices), (std::vector<std::int64_t>{1, 0, 2, 0, 2, 1, 3, 0, 3, 1, 3, 2}));
  EXPECT_EQ(std::get<StringTensor>(s2.values).to_vector(), (Strs{"x", "x", "y", "z", "x", "y"}));
  EXPECT_EQ(values_of<std::int64_t>(s2.dense_shape), (std::vector<std::int64_t>{4, 3}));
  // Bool_2: 0 | NA | 1 | NA.
  const auto& b2 = sparse(p, "Bool_2");
  EXPECT_EQ(values_of<std::int64_t>(b2.indices), (std::vector<std::int64_t>{0, 0, 2, 0}));
  EXPECT_EQ(values_of<std::int64_t>(std::get<Tensor>(b2.values)), (std::vector<std::int64_t>{0, 1}));
  EXPECT_EQ(values_of<std::int64_t>(b2.dense_shape), (std::vector<std::int64_t>{4, 1}));
}

TEST(ExampleFixtures, ToySequenceFeaturesArePadded) {
  const auto toy = toy_records();
  // Bool_2: 0 | NA | 1 | NA; Cat_set_1 as strings padded with "".
  const FeatureSpecs specs{
      {"Bool_2", FixedLenSequenceFeature{{}, FeatureDType::kInt64, true, std::vector<std::int64_t>{-1}}},
      {"Cat_set_1", FixedLenSequenceFeature{{}, FeatureDType::kString, true, {}}}};
  const auto p = parse_example(toy.records, specs, toy.sources);
  EXPECT_EQ(tensor(p, "Bool_2").shape, (Shape{4, 1}));
  EXPECT_EQ(values_of<std::int64_t>(tensor(p, "Bool_2")), (std::vector<std::int64_t>{0, -1, 1, -1}));
  EXPECT_EQ(strings(p, "Cat_set_1").shape, (Shape{4, 3}));
  EXPECT_EQ(strings(p, "Cat_set_1").to_vector(),
            (Strs{"x", "", "", "x", "y", "", "y", "x", "z", "x", "y", "z"}));
}

TEST(ExampleFixtures, ToySingleExampleShapes) {
  const auto toy = toy_records();
  const FeatureSpecs specs{{"Cat_set_1", VarLenFeature{FeatureDType::kString}},
                           {"Num_1", FixedLenFeature{{1}, FeatureDType::kFloat32, {}}},
                           {"Cat_set_2", FixedLenSequenceFeature{{}, FeatureDType::kString, true, {}}}};
  const auto p = parse_single_example(toy.records[2], specs, toy.sources[2]);  // CSV row 3
  const auto& s = sparse(p, "Cat_set_1");
  EXPECT_EQ(s.indices.shape, (Shape{3, 1}));
  EXPECT_EQ(values_of<std::int64_t>(s.indices), (std::vector<std::int64_t>{0, 1, 2}));
  EXPECT_EQ(std::get<StringTensor>(s.values).to_vector(), (Strs{"y", "x", "z"}));
  EXPECT_EQ(values_of<std::int64_t>(s.dense_shape), (std::vector<std::int64_t>{3}));
  EXPECT_EQ(tensor(p, "Num_1").shape, Shape{1});
  EXPECT_EQ(values_of<float>(tensor(p, "Num_1")), std::vector<float>{3});
  EXPECT_EQ(strings(p, "Cat_set_2").shape, Shape{2});
  EXPECT_EQ(strings(p, "Cat_set_2").to_vector(), (Strs{"x", "y"}));
}

TEST(ExampleFixtures, ToyErrorsNameFeatureRecordAndFile) {
  const auto toy = toy_records();
  // Num_2 is NA in CSV row 1 = record 0 of the first file: required without a default.
  expect_error([&] { parse_example(toy.records, {{"Num_2", FixedLenFeature{{}, FeatureDType::kFloat32, {}}}}, toy.sources); },
               ErrorKind::kInvalidArgument,
               {"feature 'Num_2'", "record 0 of " + toy.sources[0].file, "byte offset 0", "required"});
  // Num_1 holds floats; declared int64 it is a dtype mismatch. Record 0 of the second file.
  expect_error([&] {
    parse_single_example(toy.records[3], {{"Num_1", FixedLenFeature{{}, FeatureDType::kInt64, {}}}}, toy.sources[3]);
  }, ErrorKind::kInvalidArgument,
               {"feature 'Num_1'", "record 0 of " + toy.sources[3].file, "data types don't match", "float_list",
                "declared int64"});
  // A VarLen dtype mismatch too (Cat_1 holds bytes), third record of the first file.
  expect_error([&] {
    parse_single_example(toy.records[2], {{"Cat_1", VarLenFeature{FeatureDType::kFloat32}}}, toy.sources[2]);
  }, ErrorKind::kInvalidArgument, {"feature 'Cat_1'", "record 2 of", "bytes_list", "declared float32"});
  // Cat_set_1 of row 2 holds 2 values: not a FixedLenFeature of shape [].
  expect_error([&] { parse_example(toy.records, {{"Cat_set_1", FixedLenFeature{{}, FeatureDType::kString, {}}}}, toy.sources); },
               ErrorKind::kInvalidArgument, {"feature 'Cat_set_1'", "record 1 of", "needs 1 string values", "holds 2"});
}

TEST(ExampleFixtures, GzipSentences) {
  const auto path = kFixtures / "sentences.tfe-tfrecord";
  const auto records = read_tfrecord_file(path, TFRecordCompression::kGzip);
  ASSERT_EQ(records.size(), 2u);
  const FeatureSpecs specs{{"f1", FixedLenFeature{{}, FeatureDType::kString, {}}}};
  const auto p = parse_example(records, specs);
  EXPECT_EQ(strings(p, "f1").to_vector(), (Strs{"Hello world", "Bonjour le monde"}));
  EXPECT_EQ(strings(parse_single_example(records[1], specs), "f1").shape, Shape{});
  EXPECT_EQ(strings(parse_single_example(records[1], specs), "f1")[0], "Bonjour le monde");
  // read_example: every feature, no specs.
  const auto all = read_example(records[0]);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(std::get<Strs>(all.at("f1")), Strs{"Hello world"});
}

// --- TensorFlow's rules on hand-built Examples ------------------------------------------

std::string example_of(const std::map<std::string, FeatureValues>& f) { return serialize_example(f); }

TEST(ExampleRules, WrongValueCountIsAnError) {
  const FeatureSpecs specs{{"x", FixedLenFeature{{2}, FeatureDType::kFloat32, std::vector<float>{0, 0}}}};
  expect_error([&] { parse_single_example(example_of({{"x", std::vector<float>{1, 2, 3}}}), specs); },
               ErrorKind::kInvalidArgument, {"feature 'x'", "the Example", "shape [2]", "needs 2 float32", "holds 3"});
  // An empty list is a set list with 0 values: an error even with a default.
  expect_error([&] { parse_single_example(example_of({{"x", std::vector<float>{}}}), specs); },
               ErrorKind::kInvalidArgument, {"feature 'x'", "holds 0"});
  // In a batch the record is named by its index.
  const std::vector<std::string> batch{example_of({{"x", std::vector<float>{1, 2}}}),
                                       example_of({{"x", std::vector<float>{1}}})};
  expect_error([&] { parse_example(batch, specs); }, ErrorKind::kInvalidArgument,
               {"feature 'x'", "record 1 of the batch", "holds 1"});
}

TEST(ExampleRules, MissingAndEmptyFeaturesTakeTheDefault) {
  const FeatureSpecs specs{
      {"m", FixedLenFeature{{2, 2}, FeatureDType::kInt64, std::vector<std::int64_t>{1, 2, 3, 4}}},
      {"s", FixedLenFeature{{}, FeatureDType::kString, Strs{"dflt"}}}};
  const std::vector<std::string> batch{
      example_of({{"m", std::vector<std::int64_t>{5, 6, 7, -8}}, {"s", Strs{"here"}}}),
      example_of({}),                                                     // both absent
      example_of({{"m", std::monostate{}}, {"s", std::monostate{}}})};   // both empty Features
  const auto p = parse_example(batch, specs);
  EXPECT_EQ(tensor(p, "m").shape, (Shape{3, 2, 2}));
  EXPECT_EQ(values_of<std::int64_t>(tensor(p, "m")), (std::vector<std::int64_t>{5, 6, 7, -8, 1, 2, 3, 4, 1, 2, 3, 4}));
  EXPECT_EQ(strings(p, "s").to_vector(), (Strs{"here", "dflt", "dflt"}));
  // Without a default, an empty Feature is as missing as an absent one.
  for (const auto& record : {example_of({}), example_of({{"m", std::monostate{}}})}) {
    expect_error([&] { parse_single_example(record, {{"m", FixedLenFeature{{2, 2}, FeatureDType::kInt64, {}}}}); },
                 ErrorKind::kInvalidArgument, {"feature 'm'", "required", "could not be found"});
  }
}

TEST(ExampleRules, DtypeMismatchIsAnErrorButAnEmptyFeatureMatchesAny) {
  const auto floats = example_of({{"x", std::vector<float>{1.5f}}});
  expect_error([&] { parse_single_example(floats, {{"x", FixedLenFeature{{}, FeatureDType::kInt64, {}}}}); },
               ErrorKind::kInvalidArgument, {"feature 'x'", "data types don't match", "float_list", "int64"});
  expect_error([&] { parse_single_example(floats, {{"x", FixedLenFeature{{}, FeatureDType::kString, {}}}}); },
               ErrorKind::kInvalidArgument, {"data types don't match", "declared string"});
  expect_error([&] {
    parse_single_example(floats, {{"x", FixedLenSequenceFeature{{}, FeatureDType::kInt64, true, {}}}});
  }, ErrorKind::kInvalidArgument, {"data types don't match"});
  const auto empty = example_of({{"x", std::monostate{}}});
  const auto p = parse_single_example(empty, {{"x", VarLenFeature{FeatureDType::kInt64}}});
  EXPECT_EQ(sparse(p, "x").indices.shape, (Shape{0, 1}));
  EXPECT_EQ(values_of<std::int64_t>(sparse(p, "x").dense_shape), std::vector<std::int64_t>{0});
}

TEST(ExampleRules, VarLenAcrossABatch) {
  const std::vector<std::string> batch{example_of({{"v", std::vector<float>{1, 2}}}), example_of({}),
                                       example_of({{"v", std::vector<float>{}}}),
                                       example_of({{"v", std::vector<float>{3, 4, 5}}})};
  const auto p = parse_example(batch, {{"v", VarLenFeature{FeatureDType::kFloat32}}});
  const auto& s = sparse(p, "v");
  EXPECT_EQ(values_of<std::int64_t>(s.indices), (std::vector<std::int64_t>{0, 0, 0, 1, 3, 0, 3, 1, 3, 2}));
  EXPECT_EQ(values_of<float>(std::get<Tensor>(s.values)), (std::vector<float>{1, 2, 3, 4, 5}));
  EXPECT_EQ(values_of<std::int64_t>(s.dense_shape), (std::vector<std::int64_t>{4, 3}));
  // A batch where nobody has values: dense_shape [B, 0].
  const auto none = parse_example(std::vector<std::string>{example_of({}), example_of({})},
                                  {{"v", VarLenFeature{FeatureDType::kString}}});
  EXPECT_EQ(sparse(none, "v").indices.shape, (Shape{0, 2}));
  EXPECT_EQ(values_of<std::int64_t>(sparse(none, "v").dense_shape), (std::vector<std::int64_t>{2, 0}));
}

TEST(ExampleRules, FixedLenSequencePadsPerBatch) {
  const FeatureSpecs specs{
      {"f", FixedLenSequenceFeature{{2}, FeatureDType::kFloat32, true, std::vector<float>{9}}},
      {"i", FixedLenSequenceFeature{{}, FeatureDType::kInt64, true, {}}}};
  const std::vector<std::string> batch{
      example_of({{"f", std::vector<float>{1, 2, 3, 4}}, {"i", std::vector<std::int64_t>{7}}}),
      example_of({}),
      example_of({{"f", std::vector<float>{5, 6}}, {"i", std::vector<std::int64_t>{}}})};
  const auto p = parse_example(batch, specs);
  EXPECT_EQ(tensor(p, "f").shape, (Shape{3, 2, 2}));
  EXPECT_EQ(values_of<float>(tensor(p, "f")), (std::vector<float>{1, 2, 3, 4, 9, 9, 9, 9, 5, 6, 9, 9}));
  EXPECT_EQ(tensor(p, "i").shape, (Shape{3, 1}));
  EXPECT_EQ(values_of<std::int64_t>(tensor(p, "i")), (std::vector<std::int64_t>{7, 0, 0}));
  // Single: [rows, shape...], no padding.
  const auto one = parse_single_example(batch[0], specs);
  EXPECT_EQ(tensor(one, "f").shape, (Shape{2, 2}));
  EXPECT_EQ(values_of<float>(tensor(one, "f")), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(tensor(parse_single_example(batch[1], specs), "f").shape, (Shape{0, 2}));
  // 3 values are not whole rows of 2.
  expect_error([&] { parse_single_example(example_of({{"f", std::vector<float>{1, 2, 3}}}), specs); },
               ErrorKind::kInvalidArgument, {"feature 'f'", "multiple of 2", "holds 3"});
}

TEST(ExampleRules, InvalidSpecsAreRefused) {
  expect_error([] { ExampleParser({{"s", FixedLenSequenceFeature{{}, FeatureDType::kInt64, false, {}}}}); },
               ErrorKind::kInvalidArgument, {"feature 's'", "requires allow_missing to be True"});
  expect_error([] { ExampleParser({{"x", FixedLenFeature{{3}, FeatureDType::kFloat32, std::vector<float>{0}}}}); },
               ErrorKind::kInvalidArgument, {"feature 'x'", "1 values", "shape [3] needs 3"});
  expect_error([] { ExampleParser({{"x", FixedLenFeature{{}, FeatureDType::kFloat32, std::vector<std::int64_t>{0}}}}); },
               ErrorKind::kInvalidArgument, {"feature 'x'", "another type", "float32"});
  expect_error([] { ExampleParser({{"x", FixedLenFeature{{-1}, FeatureDType::kFloat32, {}}}}); },
               ErrorKind::kInvalidArgument, {"feature 'x'", "[-1]", "known"});
  expect_error([] {
    ExampleParser({{"s", FixedLenSequenceFeature{{}, FeatureDType::kInt64, true, std::vector<std::int64_t>{1, 2}}}});
  }, ErrorKind::kInvalidArgument, {"feature 's'", "padding value", "exactly one"});
  expect_error([] { ExampleParser({{"", VarLenFeature{}}}); }, ErrorKind::kInvalidArgument, {"empty name"});
}

TEST(ExampleRules, RepeatedKeyLastEntryWins) {
  // Two Examples concatenated are one Example whose map holds "x" twice (protobuf merges
  // concatenated messages); protobuf's map keeps the last entry, and so does TensorFlow.
  const auto first = example_of({{"x", std::vector<std::int64_t>{1}}, {"y", Strs{"a"}}});
  const auto second = example_of({{"x", std::vector<std::int64_t>{2}}});
  tf::Example merged;
  ASSERT_TRUE(merged.ParseFromString(first + second));
  ASSERT_EQ(merged.features().feature().at("x").int64_list().value(0), 2);  // protobuf's rule
  const FeatureSpecs specs{{"x", FixedLenFeature{{}, FeatureDType::kInt64, {}}},
                           {"y", FixedLenFeature{{}, FeatureDType::kString, {}}},
                           {"v", VarLenFeature{FeatureDType::kInt64}}};
  auto p = parse_single_example(first + second, specs);
  EXPECT_EQ(values_of<std::int64_t>(tensor(p, "x")), std::vector<std::int64_t>{2});
  EXPECT_EQ(strings(p, "y")[0], "a");
  EXPECT_EQ(std::get<std::vector<std::int64_t>>(read_example(first + second).at("x")), std::vector<std::int64_t>{2});
  // A later empty Feature: protobuf keeps it, and so does a VarLenFeature (no values); a dense
  // feature skips empty Features before the duplicate check and keeps the earlier value
  // (TensorFlow's fast parser).
  const auto v_first = example_of({{"x", std::vector<std::int64_t>{1}}, {"v", std::vector<std::int64_t>{4, 5}}});
  const auto v_empty = example_of({{"x", std::monostate{}}, {"v", std::monostate{}}, {"y", Strs{"b"}}});
  ASSERT_TRUE(merged.ParseFromString(v_first + v_empty));
  EXPECT_EQ(merged.features().feature().at("x").kind_case(), tf::Feature::KIND_NOT_SET);
  p = parse_single_example(v_first + v_empty, specs);
  EXPECT_EQ(values_of<std::int64_t>(tensor(p, "x")), std::vector<std::int64_t>{1});
  EXPECT_EQ(sparse(p, "v").indices.shape, (Shape{0, 1}));
  EXPECT_TRUE(std::holds_alternative<std::monostate>(read_example(v_first + v_empty).at("x")));
  // With the order reversed, both take the non-empty values.
  p = parse_single_example(v_empty + v_first, specs);
  EXPECT_EQ(values_of<std::int64_t>(tensor(p, "x")), std::vector<std::int64_t>{1});
  EXPECT_EQ(values_of<std::int64_t>(std::get<Tensor>(sparse(p, "v").values)), (std::vector<std::int64_t>{4, 5}));
  // In a batch the rule holds per record.
  const auto b = parse_example(std::vector<std::string>{first + second, second + first}, specs);
  EXPECT_EQ(values_of<std::int64_t>(tensor(b, "x")), (std::vector<std::int64_t>{2, 1}));
}

TEST(ExampleRules, UnknownFeaturesAndFieldsAreIgnored) {
  const auto record = example_of({{"x", std::vector<float>{1}}, {"junk", Strs{"zzz"}}});
  // An unknown field (number 7, varint) after the features, as protobuf skips it.
  const auto p = parse_single_example(record + std::string("\x38\x05", 2),
                                      {{"x", FixedLenFeature{{}, FeatureDType::kFloat32, {}}}});
  EXPECT_EQ(values_of<float>(tensor(p, "x")), std::vector<float>{1});
}

TEST(ExampleRules, UnpackedListsParseAsProtobufDoes) {
  // Feature "i": int64_list with two unpacked varints 5 and 300; "f": float_list with one
  // unpacked fixed32 (1.5) then a packed run (2.5); written by hand.
  auto delimited = [](int field, const std::string& payload) {
    return std::string(1, static_cast<char>((field << 3) | 2)) + std::string(1, static_cast<char>(payload.size())) + payload;
  };
  auto f32 = [](float v) {
    std::string s(4, '\0');
    std::memcpy(s.data(), &v, 4);
    return s;
  };
  const std::string int_list = std::string("\x08\x05\x08\xac\x02", 5);
  const std::string float_list = "\x0d" + f32(1.5f) + delimited(1, f32(2.5f));
  const std::string features = delimited(1, delimited(1, "i") + delimited(2, delimited(3, int_list))) +
                               delimited(1, delimited(1, "f") + delimited(2, delimited(2, float_list)));
  const std::string record = delimited(1, features);
  tf::Example check;
  ASSERT_TRUE(check.ParseFromString(record));
  ASSERT_EQ(check.features().feature().at("i").int64_list().value_size(), 2);
  EXPECT_EQ(check.features().feature().at("i").int64_list().value(1), 300);
  ASSERT_EQ(check.features().feature().at("f").float_list().value_size(), 2);
  const auto p = parse_single_example(record, {{"i", FixedLenFeature{{2}, FeatureDType::kInt64, {}}},
                                               {"f", VarLenFeature{FeatureDType::kFloat32}}});
  EXPECT_EQ(values_of<std::int64_t>(tensor(p, "i")), (std::vector<std::int64_t>{5, 300}));
  EXPECT_EQ(values_of<float>(std::get<Tensor>(sparse(p, "f").values)), (std::vector<float>{1.5f, 2.5f}));
  // An empty packed run (length 0) adds no value (example_fuzzer found it copied from null).
  const std::string empty_run = delimited(1, delimited(1, delimited(1, "f") +
                                                              delimited(2, delimited(2, std::string("\x0a\x00", 2)))));
  ASSERT_TRUE(check.ParseFromString(empty_run));
  EXPECT_EQ(check.features().feature().at("f").float_list().value_size(), 0);
  EXPECT_EQ(sparse(parse_single_example(empty_run, {{"f", VarLenFeature{FeatureDType::kFloat32}}}), "f").indices.shape,
            (Shape{0, 1}));
  EXPECT_EQ(std::get<std::vector<float>>(read_example(empty_run).at("f")), std::vector<float>{});
}

TEST(ExampleRules, CorruptBytesAreDataLoss) {
  const auto record = example_of({{"x", std::vector<float>{1, 2}}});
  const FeatureSpecs specs{{"x", FixedLenFeature{{2}, FeatureDType::kFloat32, {}}}};
  const RecordSource source{"shard-3.tfrecord", 12, 4096};
  expect_error([&] { parse_single_example(record.substr(0, record.size() - 3), specs, source); },
               ErrorKind::kDataLoss, {"record 12 of shard-3.tfrecord (byte offset 4096)", "not a serialized tf.train.Example",
                                      "runs past the end"});
  expect_error([&] { parse_single_example(std::string("\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 11), specs); },
               ErrorKind::kDataLoss, {"the Example", "varint"});
  // A float list whose packed length is not a multiple of 4, inside feature "x".
  std::string bad = record;
  const std::string packed("\x0a\x08", 2);  // FloatList.value, 8 bytes
  const auto at = bad.find(packed);
  ASSERT_NE(at, std::string::npos);
  bad[at + 1] = '\x07';  // the outer lengths still hold: the 8th byte is left over as a stray tag
  expect_error([&] { parse_single_example(bad, specs, source); }, ErrorKind::kDataLoss,
               {"feature 'x'", "record 12 of shard-3.tfrecord", "not a valid tf.train.Feature"});
  expect_error([&] { read_example(record.substr(0, 5), source); }, ErrorKind::kDataLoss,
               {"record 12 of shard-3.tfrecord"});
}

TEST(ExampleRules, ManySpecsUseTheIndex) {
  FeatureSpecs specs;
  std::map<std::string, FeatureValues> values;
  for (int i = 0; i < 20; ++i) {
    specs[std::string("f").append(std::to_string(i))] = FixedLenFeature{{}, FeatureDType::kInt64, {}};
    values[std::string("f").append(std::to_string(i))] = std::vector<std::int64_t>{i * 10};
  }
  values["other"] = Strs{"x"};
  const auto p = parse_single_example(serialize_example(values), specs);
  ASSERT_EQ(p.size(), 20u);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(values_of<std::int64_t>(tensor(p, std::string("f").append(std::to_string(i)))), std::vector<std::int64_t>{i * 10});
  }
}

TEST(ExampleRules, OneParserFromManyThreads) {
  // ExampleParser is immutable: threads share one and get the same results.
  const ExampleParser parser({{"x", FixedLenFeature{{}, FeatureDType::kInt64, {}}},
                              {"s", VarLenFeature{FeatureDType::kString}}});
  std::vector<std::string> records;
  for (std::int64_t i = 0; i < 64; ++i) {
    records.push_back(example_of({{"x", std::vector<std::int64_t>{i}}, {"s", Strs(static_cast<std::size_t>(i % 3), "v")}}));
  }
  std::vector<std::int64_t> sums(4, 0);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < sums.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 50; ++round) {
        const auto p = parser.parse(records);
        for (auto v : values_of<std::int64_t>(tensor(p, "x"))) sums[t] += v;
        sums[t] += sparse(p, "s").indices.shape[0];
      }
    });
  }
  for (auto& th : threads) th.join();
  // Each round: x sums to 0 + 1 + ... + 63 = 2016; i % 3 is 1 for 21 records and 2 for 21: 63 strings.
  for (auto s : sums) EXPECT_EQ(s, 50 * (2016 + 63));
}

// --- Writing --------------------------------------------------------------------------------

// The map entries of a serialized Example (each "key = 1, value = 2" message, with its tag and
// length), walked by hand per the protobuf encoding guide: Example { Features features = 1 },
// Features { repeated entry feature = 1 }, every length a varint. Fails the test on anything else.
std::vector<std::string> map_entries(std::string_view example) {
  std::size_t at = 0;
  auto varint = [&] {
    std::uint64_t v = 0;
    for (int shift = 0; at < example.size(); shift += 7) {
      const auto b = static_cast<std::uint8_t>(example[at++]);
      v |= std::uint64_t{b & 0x7fu} << shift;
      if (b < 0x80) return v;
    }
    ADD_FAILURE() << "varint runs past the end";
    return v;
  };
  std::vector<std::string> entries;
  if (example.empty() || example[at++] != '\x0a') return ADD_FAILURE() << "no Example.features", entries;
  const std::uint64_t features_size = varint();
  EXPECT_EQ(features_size, example.size() - at) << "Example.features must be the whole record";
  while (at < example.size()) {
    const std::size_t begin = at;
    if (example[at++] != '\x0a') return ADD_FAILURE() << "not a Features.feature entry at " << begin, entries;
    at += varint();
    entries.emplace_back(example.substr(begin, at - begin));
  }
  return entries;
}

// The key of a map entry as map_entries returns it (its key field comes first, as every
// protobuf serializer writes it; keys here are shorter than 128 bytes).
std::string entry_key(const std::string& entry) {
  std::size_t at = 1;
  while (static_cast<std::uint8_t>(entry[at]) >= 0x80) ++at;  // the entry's length
  ++at;
  EXPECT_EQ(entry[at], '\x0a') << "the entry's first field is not its key";
  return entry.substr(at + 2, static_cast<std::uint8_t>(entry[at + 1]));
}

// A toy.csv row as the README says TensorFlow encoded it: NA or empty: an empty Feature;
// Num_*, Cat_3 float_list; Bool_* int64_list; Cat_1, Cat_2 one bytes value; Cat_set_* split
// on spaces and lower-cased.
std::map<std::string, FeatureValues> toy_row(const std::vector<std::string>& header, const std::string& line) {
  std::vector<std::string> cells;
  std::stringstream in(line);
  for (std::string cell; std::getline(in, cell, ',');) cells.push_back(cell);
  if (line.back() == ',') cells.emplace_back();
  EXPECT_EQ(cells.size(), header.size()) << line;
  std::map<std::string, FeatureValues> row;
  for (std::size_t i = 0; i < header.size() && i < cells.size(); ++i) {
    const std::string& name = header[i];
    const std::string& cell = cells[i];
    if (cell.empty() || cell == "NA") {
      row[name] = std::monostate{};
    } else if (name.starts_with("Num_") || name == "Cat_3") {
      row[name] = std::vector<float>{std::stof(cell)};
    } else if (name.starts_with("Bool_")) {
      row[name] = std::vector<std::int64_t>{std::stoll(cell)};
    } else if (name.starts_with("Cat_set_")) {
      Strs tokens;
      std::stringstream words(cell);
      for (std::string w; words >> w;) {
        for (char& c : w) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        tokens.push_back(w);
      }
      row[name] = tokens;
    } else {
      row[name] = Strs{cell};
    }
  }
  return row;
}

// The reference is TensorFlow's own writer: the GZIP sentences file (one feature, so one byte
// order) must come out byte for byte; the toy records' map entries come in TensorFlow's hash
// order, which protobuf does not fix, so there each entry must be TensorFlow's, byte for byte,
// and ours must be in key order.
TEST(ExampleWriter, BytesEqualTensorFlowWrittenRecords) {
  const auto sentences = read_tfrecord_file(kFixtures / "sentences.tfe-tfrecord", TFRecordCompression::kGzip);
  ASSERT_EQ(sentences.size(), 2u);
  EXPECT_EQ(serialize_example({{"f1", Strs{"Hello world"}}}), sentences[0]);
  EXPECT_EQ(serialize_example({{"f1", Strs{"Bonjour le monde"}}}), sentences[1]);

  std::ifstream csv(kFixtures / "toy.csv");
  std::string line;
  ASSERT_TRUE(std::getline(csv, line));
  std::vector<std::string> header;
  std::stringstream names(line);
  for (std::string name; std::getline(names, name, ',');) header.push_back(name);
  const auto toy = toy_records();
  for (std::size_t r = 0; r < toy.records.size(); ++r) {
    ASSERT_TRUE(std::getline(csv, line));
    const std::string ours = serialize_example(toy_row(header, line));
    auto theirs = map_entries(toy.records[r]);
    std::sort(theirs.begin(), theirs.end(),
              [](const std::string& a, const std::string& b) { return entry_key(a) < entry_key(b); });
    EXPECT_EQ(map_entries(ours), theirs) << "toy.csv row " << r + 1;
    EXPECT_EQ(ours.size(), toy.records[r].size()) << "toy.csv row " << r + 1;
  }
}

// Bytes assembled by hand from the protobuf encoding guide (tag = field << 3 | wire type; LEN
// = 2; varints little-endian base 128; int64 -1 takes ten bytes; floats little-endian IEEE;
// proto3 packs repeated scalars) and TensorFlow's field numbers (feature.proto).
TEST(ExampleWriter, BytesEqualTheWireFormatByHand) {
  const std::map<std::string, FeatureValues> values{
      {"x", std::vector<float>{1.5f}},
      {"label", std::vector<std::int64_t>{-1, 300}},
      {"b", Strs{std::string("\x00\xff", 2), ""}},
      {"e", std::vector<float>{}},
      {"n", std::monostate{}}};
  using namespace std::string_literals;
  const std::string expected =
      "\x0a\x49"s                                            // Example.features, 73 bytes
      "\x0a\x0d" "\x0a\x01" "b" "\x12\x08"                   // entry "b": Feature of 8 bytes
      "\x0a\x06" "\x0a\x02\x00\xff" "\x0a\x00"s              //   bytes_list: "\0\xff", ""
      "\x0a\x07" "\x0a\x01" "e" "\x12\x02" "\x12\x00"s       // entry "e": an empty float_list
      "\x0a\x19" "\x0a\x05" "label" "\x12\x10"               // entry "label": Feature of 16 bytes
      "\x1a\x0e" "\x0a\x0c"                                  //   int64_list, packed, 12 bytes:
      "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01" "\xac\x02"  //   -1 (ten bytes), 300
      "\x0a\x05" "\x0a\x01" "n" "\x12\x00"s                  // entry "n": an empty Feature
      "\x0a\x0d" "\x0a\x01" "x" "\x12\x08"                   // entry "x": Feature of 8 bytes
      "\x12\x06" "\x0a\x04" "\x00\x00\xc0\x3f"s;             //   float_list, packed: 1.5f
  ASSERT_EQ(expected.size(), 75u);
  EXPECT_EQ(serialize_example(values), expected);
  EXPECT_EQ(read_example(expected), values);
}

TEST(ExampleWriter, RoundTripThroughTheParser) {
  ExampleBuilder b;
  const std::string image(784, '\x7f');
  const float xy[] = {0.25f, 4.0f};
  const std::int64_t label[] = {9};
  b.add_bytes("image", image).add_floats("xy", xy).add_int64s("label", label).add_empty("note");
  b.add_int64s("label", std::vector<std::int64_t>{3});  // replaces
  const std::vector<std::string> batch{b.serialize(), b.serialize()};
  const auto p = parse_example(batch, {{"image", FixedLenFeature{{}, FeatureDType::kString, {}}},
                                       {"xy", FixedLenFeature{{2}, FeatureDType::kFloat32, {}}},
                                       {"label", FixedLenFeature{{}, FeatureDType::kInt64, {}}},
                                       {"note", VarLenFeature{FeatureDType::kString}}});
  EXPECT_EQ(strings(p, "image").to_vector(), (Strs{image, image}));
  EXPECT_EQ(values_of<float>(tensor(p, "xy")), (std::vector<float>{0.25f, 4, 0.25f, 4}));
  EXPECT_EQ(values_of<std::int64_t>(tensor(p, "label")), (std::vector<std::int64_t>{3, 3}));
  // The string_view overload reads the same records.
  const std::vector<std::string_view> views(batch.begin(), batch.end());
  const auto pv = ExampleParser({{"label", FixedLenFeature{{}, FeatureDType::kInt64, {}}}})
                      .parse(std::span<const std::string_view>(views));
  EXPECT_EQ(values_of<std::int64_t>(tensor(pv, "label")), (std::vector<std::int64_t>{3, 3}));
  const auto pixels = decode_raw(strings(p, "image"), DType::kU8);
  EXPECT_EQ(pixels.shape, (Shape{2, 784}));
  EXPECT_EQ(values_of<std::uint8_t>(pixels), std::vector<std::uint8_t>(2 * 784, 0x7f));
  std::string reused = "old content";
  b.serialize_to(reused);
  EXPECT_EQ(reused, batch[0]);
  const ExampleBuilder copy = b;  // copies the features: clearing b leaves it whole
  b.clear();
  EXPECT_EQ(copy.serialize(), batch[0]);
  EXPECT_EQ(b.serialize(), std::string("\x0a\x00", 2));  // an Example with empty features
}

TEST(ExampleWriter, DecodeRawChecksLengths) {
  const auto t = StringTensor::from({2}, {std::string("\x01\x00\x00\x00\x02\x00\x00\x00", 8), std::string(8, '\0')});
  const auto i32 = decode_raw(t, DType::kI32);
  EXPECT_EQ(i32.shape, (Shape{2, 2}));
  EXPECT_EQ(values_of<std::int32_t>(i32), (std::vector<std::int32_t>{1, 2, 0, 0}));
  expect_error([] { decode_raw(StringTensor::from({2}, {"abcd", "abc"}), DType::kU8); }, ErrorKind::kInvalidArgument,
               {"same length", "element 1 has 3 bytes"});
  expect_error([] { decode_raw(StringTensor::from({1}, {"abc"}), DType::kF32); }, ErrorKind::kInvalidArgument,
               {"3 bytes", "F32"});
  expect_error([] { StringTensor::from({3}, {"a"}); }, ErrorKind::kInvalidArgument, {"1 strings", "[3]"});
}

}  // namespace
}  // namespace tensorhub
