// Dataset pipeline tests. Expected sequences come from TensorFlow's own documentation: the
// docstrings of tensorflow/python/data/ops/dataset_ops.py (TF 2.x, "tf.data.Dataset.<method>"
// in the API reference) and the tf.data guide (tensorflow.org/guide/data, "Processing multiple
// epochs", "Randomly shuffling input data"). Each test quotes the example it reproduces.
#include "tensorhub/data/dataset.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <numeric>
#include <set>
#include <thread>

#include "tensorhub/core/error.h"
#include "tensorhub/data/tfrecord.h"
#include "../src/data/dataset_internal.h"
#include "tensorhub/tf/example.pb.h"
#include "test_util.h"

namespace tensorhub {
namespace {

using testing::expect_error;
using I64s = std::vector<std::int64_t>;

const std::filesystem::path kFixtures = TENSORHUB_TFRECORD_FIXTURES;

Tensor i64(I64s values, std::vector<std::int64_t> shape) {
  return Tensor::from<std::int64_t>(DType::kI64, std::move(shape), values);
}
Tensor i64_vector(const I64s& values) { return i64(values, {static_cast<std::int64_t>(values.size())}); }
I64s i64_values(const Tensor& t) {
  EXPECT_EQ(t.dtype, DType::kI64);
  return I64s(t.as<std::int64_t>(), t.as<std::int64_t>() + t.numel());
}
std::int64_t scalar(const NamedTensors& e, const std::string& key = "value") {
  const Tensor& t = e.at(key);
  EXPECT_TRUE(t.shape.empty()) << key;
  return i64_values(t).at(0);
}

// Every element's scalar `key`, one pass.
I64s scalars(const Dataset& ds, const std::string& key = "value") {
  I64s out;
  for (const NamedTensors& e : ds) out.push_back(scalar(e, key));
  return out;
}
// Every element's `key` as a flat list (batches), one pass.
std::vector<I64s> rows(const Dataset& ds, const std::string& key = "value") {
  std::vector<I64s> out;
  for (const NamedTensors& e : ds) out.push_back(i64_values(e.at(key)));
  return out;
}
// Renames the single tensor "value" to `name` (tf.data's tuples become names here).
Dataset::MapFn rename(const std::string& name) {
  return [name](NamedTensors e) { return NamedTensors{{name, e.at("value")}}; };
}
// range(1, 5).map(lambda x: tf.fill([x], x)) of the padded_batch docstring.
Dataset filled_ranges() {
  return Dataset::range(1, 5).map([](NamedTensors e) {
    const std::int64_t x = scalar(e);
    return NamedTensors{{"value", i64_vector(I64s(static_cast<std::size_t>(x), x))}};
  });
}
// A slice source of the given values.
Dataset slices(const I64s& values) { return Dataset::from_tensor_slices({{"value", i64_vector(values)}}); }

// --- Sources ---------------------------------------------------------------------------------

// tf.data.Dataset.range docstring:
//   list(Dataset.range(5)) == [0, 1, 2, 3, 4]; range(2, 5) == [2, 3, 4]; range(1, 5, 2) ==
//   [1, 3]; range(1, 5, -2) == []; range(5, 1) == []; range(5, 1, -2) == [5, 3]
TEST(DatasetSources, RangeDocstring) {
  EXPECT_EQ(scalars(Dataset::range(5)), (I64s{0, 1, 2, 3, 4}));
  EXPECT_EQ(scalars(Dataset::range(2, 5)), (I64s{2, 3, 4}));
  EXPECT_EQ(scalars(Dataset::range(1, 5, 2)), (I64s{1, 3}));
  EXPECT_EQ(scalars(Dataset::range(1, 5, -2)), (I64s{}));
  EXPECT_EQ(scalars(Dataset::range(5, 1)), (I64s{}));
  EXPECT_EQ(scalars(Dataset::range(5, 1, -2)), (I64s{5, 3}));
  expect_error([] { Dataset::range(0, 5, 0); }, ErrorKind::kInvalidArgument, {"step is 0"});
}

TEST(DatasetSources, FromTensorSlicesSlicesTheFirstDimension) {
  NamedTensors t{{"x", Tensor::from<float>(DType::kF32, {3, 2}, {1, 2, 3, 4, 5, 6})},
                 {"y", i64_vector({7, 8, 9})}};
  std::vector<NamedTensors> got;
  for (NamedTensors& e : Dataset::from_tensor_slices(t)) got.push_back(std::move(e));
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[1].at("x").shape, (std::vector<std::int64_t>{2}));
  EXPECT_EQ(got[1].at("x").as<float>()[0], 3.f);
  EXPECT_EQ(got[1].at("x").as<float>()[1], 4.f);
  EXPECT_EQ(scalar(got[2], "y"), 9);
  t["y"] = i64_vector({1, 2});
  expect_error([&] { Dataset::from_tensor_slices(t); }, ErrorKind::kInvalidArgument,
               {"'y'", "[2]", "[3, 2]", "first dimension"});
  expect_error([] { Dataset::from_tensor_slices({{"s", i64({1}, {})}}); },
               ErrorKind::kInvalidArgument, {"'s'", "scalar"});
}

// tf.data.Dataset.from_generator: the generator is made anew for each pass and repetition;
// its errors name the element and keep their kind.
TEST(DatasetSources, FromGenerator) {
  auto made = std::make_shared<std::atomic<int>>(0);
  const auto ds = Dataset::from_generator([made] {
    ++*made;
    return [n = std::int64_t{0}]() mutable -> std::optional<NamedTensors> {
      if (n == 3) return std::nullopt;
      return NamedTensors{{"value", i64({n++}, {})}};
    };
  });
  EXPECT_EQ(scalars(ds.repeat(2).prefetch(1)), (I64s{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(made->load(), 2);
  const auto failing = Dataset::from_generator([] {
    return [n = 0]() mutable -> std::optional<NamedTensors> {
      if (n++ == 1) throw DataLoss("shard 7 is corrupt");
      if (n > 3) return std::nullopt;
      return NamedTensors{{"value", i64({n}, {})}};
    };
  });
  auto it = failing.iterator();
  it.next();
  expect_error([&] { it.next(); }, ErrorKind::kDataLoss,
               {"from_generator: element 1", "shard 7 is corrupt"});
  EXPECT_EQ(scalars(failing.ignore_errors()), (I64s{1, 3}));
}

// Each loop over a Dataset is a new pass from the top (a Python `for` over tf.data.Dataset).
TEST(DatasetSources, EveryPassStartsFromTheTop) {
  const auto ds = Dataset::range(3).map([](NamedTensors e) { return e; }, 2);
  EXPECT_EQ(scalars(ds), (I64s{0, 1, 2}));
  EXPECT_EQ(scalars(ds), (I64s{0, 1, 2}));
  auto it = ds.iterator();
  EXPECT_EQ(scalar(*it.next()), 0);
  EXPECT_EQ(scalars(ds), (I64s{0, 1, 2}));  // a second pass meanwhile does not disturb `it`
  EXPECT_EQ(scalar(*it.next()), 1);
  EXPECT_EQ(scalar(*it.next()), 2);
  EXPECT_FALSE(it.next().has_value());
  EXPECT_FALSE(it.next().has_value());
  auto rest = ds.iterator();
  rest.next();
  I64s tail;
  for (NamedTensors& e : rest) tail.push_back(scalar(e));  // a range-for over an iterator
  EXPECT_EQ(tail, (I64s{1, 2}));
}

// tf.data.Dataset.list_files docstring: with /path/to/dir/{a.txt, b.py, c.py}, the pattern
// "/path/to/dir/*.py" produces b.py and c.py; shuffled by default, in a fixed order with a seed
// or shuffle=False; "No files matched pattern" when nothing matches.
TEST(DatasetSources, ListFilesDocstring) {
  testing::TempDir dir;
  for (const char* f : {"a.txt", "b.py", "c.py"}) std::ofstream(dir / f) << "x";
  auto names = [](const Dataset& ds) {
    std::vector<std::string> out;
    for (const NamedTensors& e : ds) out.push_back(tensor_bytes(e.at("filename")));
    return out;
  };
  const std::string pattern = (dir.path() / "*.py").string();
  const std::vector<std::string> sorted{(dir / "b.py").string(), (dir / "c.py").string()};
  EXPECT_EQ(names(Dataset::list_files(pattern, false)), sorted);
  auto shuffled = names(Dataset::list_files(pattern, true, 7));
  EXPECT_EQ(names(Dataset::list_files(pattern, true, 7)), shuffled);  // same seed, same passes
  std::sort(shuffled.begin(), shuffled.end());
  EXPECT_EQ(shuffled, sorted);
  expect_error([&] { Dataset::list_files((dir.path() / "*.csv").string()); },
               ErrorKind::kInvalidArgument, {"No files matched pattern", "*.csv"});
  // Several patterns: each one's matches in turn.
  const std::vector<std::string> patterns{pattern, (dir.path() / "*.txt").string()};
  EXPECT_EQ(names(Dataset::list_files(patterns, false)),
            (std::vector<std::string>{sorted[0], sorted[1], (dir / "a.txt").string()}));
  expect_error([&] { Dataset::list_files(std::vector<std::string>{"/nonexistent/*", "/none/*"}); },
               ErrorKind::kInvalidArgument, {"No files matched pattern: /nonexistent/*, /none/*"});
}

// tf.data.Dataset.zip docstring: a = range(1, 4), b = range(4, 7): zip((a, b)) ==
// [(1, 4), (2, 5), (3, 6)]; with d = range(13, 15), zip((a, d)) == [(1, 13), (2, 14)]
// (as long as the shortest). Tuples become names here.
TEST(DatasetSources, ZipDocstring) {
  const auto a = Dataset::range(1, 4).map(rename("a"));
  const auto b = Dataset::range(4, 7).map(rename("b"));
  const auto d = Dataset::range(13, 15).map(rename("d"));
  EXPECT_EQ(scalars(Dataset::zip({a, b}), "a"), (I64s{1, 2, 3}));
  EXPECT_EQ(scalars(Dataset::zip({a, b}), "b"), (I64s{4, 5, 6}));
  EXPECT_EQ(scalars(Dataset::zip({a, d}), "d"), (I64s{13, 14}));
  EXPECT_EQ(scalars(Dataset::zip({a, d}), "a"), (I64s{1, 2}));
  auto it = Dataset::zip({a, a}).iterator();
  expect_error([&] { it.next(); }, ErrorKind::kInvalidArgument, {"'a'", "rename"});
}

// --- Element-wise transformations --------------------------------------------------------------

// tf.data.Dataset.map docstring: Dataset.range(1, 6).map(lambda x: x + 1) == [2, 3, 4, 5, 6];
// with num_parallel_calls (and deterministic=False) the same elements.
TEST(DatasetTransforms, MapDocstring) {
  auto plus_one = [](NamedTensors e) {
    return NamedTensors{{"value", i64({scalar(e) + 1}, {})}};
  };
  const auto ds = Dataset::range(1, 6);
  EXPECT_EQ(scalars(ds.map(plus_one)), (I64s{2, 3, 4, 5, 6}));
  EXPECT_EQ(scalars(ds.map(plus_one, 3)), (I64s{2, 3, 4, 5, 6}));
  EXPECT_EQ(scalars(ds.map(plus_one, Dataset::kAutotune)), (I64s{2, 3, 4, 5, 6}));
  auto unordered = scalars(ds.map(plus_one, Dataset::kAutotune, false));
  std::sort(unordered.begin(), unordered.end());
  EXPECT_EQ(unordered, (I64s{2, 3, 4, 5, 6}));
}

// tf.data.Dataset.filter docstring: from_tensor_slices([1, 2, 3]).filter(lambda x: x < 3)
// == [1, 2]; filtered again with x == 1: [1].
TEST(DatasetTransforms, FilterDocstring) {
  auto ds = slices({1, 2, 3}).filter([](const NamedTensors& e) { return scalar(e) < 3; });
  EXPECT_EQ(scalars(ds), (I64s{1, 2}));
  EXPECT_EQ(scalars(ds.filter([](const NamedTensors& e) { return scalar(e) == 1; })), (I64s{1}));
}

// tf.data.Dataset.enumerate docstring: from_tensor_slices([1, 2, 3]).enumerate(start=5)
// yields (5, 1), (6, 2), (7, 3).
TEST(DatasetTransforms, EnumerateDocstring) {
  const auto ds = slices({1, 2, 3}).enumerate(5);
  EXPECT_EQ(scalars(ds, "index"), (I64s{5, 6, 7}));
  EXPECT_EQ(scalars(ds, "value"), (I64s{1, 2, 3}));
  EXPECT_EQ(scalars(slices({7, 8}).enumerate(), "index"), (I64s{0, 1}));
  auto it = slices({1}).enumerate(0, "value").iterator();
  expect_error([&] { it.next(); }, ErrorKind::kInvalidArgument, {"'value'", "enumerate"});
}

// tf.data.Dataset.take / skip docstrings: range(10).take(3) == [0, 1, 2];
// range(10).skip(7) == [7, 8, 9]; take(-1) is everything, skip(-1) skips everything.
TEST(DatasetTransforms, TakeSkipDocstring) {
  EXPECT_EQ(scalars(Dataset::range(10).take(3)), (I64s{0, 1, 2}));
  EXPECT_EQ(scalars(Dataset::range(10).skip(7)), (I64s{7, 8, 9}));
  EXPECT_EQ(scalars(Dataset::range(3).take(-1)), (I64s{0, 1, 2}));
  EXPECT_EQ(scalars(Dataset::range(3).skip(-1)), (I64s{}));
  EXPECT_EQ(scalars(Dataset::range(3).skip(5)), (I64s{}));
}

// tf.data.Dataset.shard docstring: A = range(10); A.shard(num_shards=3, index=0) ==
// [0, 3, 6, 9]; index=1: [1, 4, 7]; index=2: [2, 5, 8].
TEST(DatasetTransforms, ShardDocstring) {
  const auto a = Dataset::range(10);
  EXPECT_EQ(scalars(a.shard(3, 0)), (I64s{0, 3, 6, 9}));
  EXPECT_EQ(scalars(a.shard(3, 1)), (I64s{1, 4, 7}));
  EXPECT_EQ(scalars(a.shard(3, 2)), (I64s{2, 5, 8}));
  expect_error([&] { a.shard(3, 3); }, ErrorKind::kInvalidArgument, {"index 3", "[0, 3)"});
  expect_error([&] { a.shard(0, 0); }, ErrorKind::kInvalidArgument, {"num_shards 0"});
}

// tf.data.Dataset.prefetch docstring: range(3).prefetch(2) == [0, 1, 2].
TEST(DatasetTransforms, PrefetchDocstring) {
  EXPECT_EQ(scalars(Dataset::range(3).prefetch(2)), (I64s{0, 1, 2}));
  EXPECT_EQ(scalars(Dataset::range(3).prefetch(Dataset::kAutotune)), (I64s{0, 1, 2}));
  EXPECT_EQ(scalars(Dataset::range(3).prefetch(0)), (I64s{0, 1, 2}));
  EXPECT_EQ(dataset_background_threads(), 0u);  // each pass ended and joined its thread
}

// --- Batching ----------------------------------------------------------------------------------

// tf.data.Dataset.batch docstring: range(8).batch(3) == [[0, 1, 2], [3, 4, 5], [6, 7]];
// with drop_remainder=True: [[0, 1, 2], [3, 4, 5]].
TEST(DatasetBatch, BatchDocstring) {
  EXPECT_EQ(rows(Dataset::range(8).batch(3)), (std::vector<I64s>{{0, 1, 2}, {3, 4, 5}, {6, 7}}));
  EXPECT_EQ(rows(Dataset::range(8).batch(3, true)), (std::vector<I64s>{{0, 1, 2}, {3, 4, 5}}));
  auto it = Dataset::range(8).batch(3).iterator();
  EXPECT_EQ(it.next()->at("value").shape, (std::vector<std::int64_t>{3}));
}

TEST(DatasetBatch, BatchStacksTensorsAndRefusesUnequalShapes) {
  NamedTensors t{{"x", Tensor::from<float>(DType::kF32, {4, 2}, {0, 1, 2, 3, 4, 5, 6, 7})},
                 {"y", i64_vector({0, 1, 2, 3})}};
  auto it = Dataset::from_tensor_slices(t).batch(3).iterator();
  const auto b = *it.next();
  EXPECT_EQ(b.at("x").shape, (std::vector<std::int64_t>{3, 2}));
  EXPECT_EQ(b.at("x").as<float>()[5], 5.f);
  EXPECT_EQ(i64_values(b.at("y")), (I64s{0, 1, 2}));
  EXPECT_EQ(it.next()->at("x").shape, (std::vector<std::int64_t>{1, 2}));
  auto ragged = filled_ranges().batch(2).iterator();
  expect_error([&] { ragged.next(); }, ErrorKind::kInvalidArgument,
               {"'value'", "[2]", "[1]", "padded_batch"});
}

// tf.data.Dataset.padded_batch docstring, A = range(1, 5).map(lambda x: tf.fill([x], x)):
//   A.padded_batch(2)                    -> [[1 0] [2 2]], [[3 3 3 0] [4 4 4 4]]
//   A.padded_batch(2, padded_shapes=5)   -> [[1 0 0 0 0] [2 2 0 0 0]], [[3 3 3 0 0] [4 4 4 4 0]]
//   ... padding_values=-1                -> [[1 -1 -1 -1 -1] [2 2 -1 -1 -1]], ...
//   zip((A, A)).padded_batch(2, padding_values=-1) -> both ([[1 -1] [2 2]], [[3 3 3 -1] [4 4 4 4]])
TEST(DatasetBatch, PaddedBatchDocstring) {
  const auto a = filled_ranges();
  EXPECT_EQ(rows(a.padded_batch(2)), (std::vector<I64s>{{1, 0, 2, 2}, {3, 3, 3, 0, 4, 4, 4, 4}}));
  auto it = a.padded_batch(2).iterator();
  EXPECT_EQ(it.next()->at("value").shape, (std::vector<std::int64_t>{2, 2}));
  EXPECT_EQ(it.next()->at("value").shape, (std::vector<std::int64_t>{2, 4}));
  EXPECT_EQ(rows(a.padded_batch(2, {{"value", {5}}})),
            (std::vector<I64s>{{1, 0, 0, 0, 0, 2, 2, 0, 0, 0}, {3, 3, 3, 0, 0, 4, 4, 4, 4, 0}}));
  EXPECT_EQ(rows(a.padded_batch(2, {{"value", {5}}}, {{"value", -1}})),
            (std::vector<I64s>{{1, -1, -1, -1, -1, 2, 2, -1, -1, -1},
                               {3, 3, 3, -1, -1, 4, 4, 4, 4, -1}}));
  // E = tf.data.Dataset.zip((A, A)).padded_batch(2, padding_values=-1): one value for all.
  const auto e = Dataset::zip({a.map(rename("first")), a.map(rename("second"))})
                     .padded_batch(2, {}, {{"", -1}});
  for (const char* name : {"first", "second"})
    EXPECT_EQ(rows(e, name), (std::vector<I64s>{{1, -1, 2, 2}, {3, 3, 3, -1, 4, 4, 4, 4}})) << name;
  auto small = a.padded_batch(2, {{"value", {3}}}).iterator();
  small.next();
  expect_error([&] { small.next(); }, ErrorKind::kInvalidArgument,
               {"'value'", "size 4", "[3]"});
}

// Padding a rank-2 tensor in both dimensions (the copy of each row lands in the right place).
TEST(DatasetBatch, PaddedBatchRank2) {
  auto ds = Dataset::range(1, 3).map([](NamedTensors e) {
    const std::int64_t x = scalar(e);  // x = 1: [[1]], x = 2: [[2, 2], [2, 2]]
    return NamedTensors{{"m", i64(I64s(static_cast<std::size_t>(x * x), x), {x, x})}};
  });
  EXPECT_EQ(rows(ds.padded_batch(2, {}, {{"m", 9}}), "m"),
            (std::vector<I64s>{{1, 9, 9, 9, 2, 2, 2, 2}}));
}

// tf.data.Dataset.unbatch docstring: elements [1, 2, 3], [1, 2], [1, 2, 3, 4] unbatch to
// [1, 2, 3, 1, 2, 1, 2, 3, 4]; and range(8).batch(3).unbatch() is range(8) again.
TEST(DatasetBatch, UnbatchDocstring) {
  // dataset = tf.data.Dataset.from_generator(lambda: elements, tf.int64)
  auto ds = Dataset::from_generator([] {
    auto elements = std::make_shared<std::vector<I64s>>(std::vector<I64s>{{1, 2, 3}, {1, 2}, {1, 2, 3, 4}});
    return [elements, i = std::size_t{0}]() mutable -> std::optional<NamedTensors> {
      if (i == elements->size()) return std::nullopt;
      return NamedTensors{{"value", i64_vector((*elements)[i++])}};
    };
  });
  EXPECT_EQ(scalars(ds.unbatch()), (I64s{1, 2, 3, 1, 2, 1, 2, 3, 4}));
  EXPECT_EQ(scalars(ds.unbatch()), (I64s{1, 2, 3, 1, 2, 1, 2, 3, 4}));  // a fresh generator
  EXPECT_EQ(scalars(Dataset::range(8).batch(3).unbatch()), (I64s{0, 1, 2, 3, 4, 5, 6, 7}));
  auto it = Dataset::range(2).unbatch().iterator();
  expect_error([&] { it.next(); }, ErrorKind::kInvalidArgument, {"'value'", "scalar"});
}

// --- Epochs: repeat, and where batch and shuffle sit relative to it -------------------------------

// tf.data.Dataset.repeat docstring: from_tensor_slices([1, 2, 3]).repeat(3) ==
// [1, 2, 3, 1, 2, 3, 1, 2, 3]; no count (or -1) repeats forever.
TEST(DatasetEpochs, RepeatDocstring) {
  EXPECT_EQ(scalars(slices({1, 2, 3}).repeat(3)), (I64s{1, 2, 3, 1, 2, 3, 1, 2, 3}));
  EXPECT_EQ(scalars(slices({1, 2, 3}).repeat().take(7)), (I64s{1, 2, 3, 1, 2, 3, 1}));
  EXPECT_EQ(scalars(slices({1, 2, 3}).repeat(0)), (I64s{}));
  EXPECT_EQ(scalars(Dataset::range(0).repeat()), (I64s{}));  // an empty input ends, no spin
}

// tf.data guide, "Processing multiple epochs": repeat then batch yields batches that straddle
// epoch boundaries; batch then repeat keeps them apart (the last batch of each epoch short).
TEST(DatasetEpochs, BatchThenRepeatVersusRepeatThenBatch) {
  EXPECT_EQ(rows(Dataset::range(5).batch(2).repeat(2)),
            (std::vector<I64s>{{0, 1}, {2, 3}, {4}, {0, 1}, {2, 3}, {4}}));
  EXPECT_EQ(rows(Dataset::range(5).repeat(2).batch(2)),
            (std::vector<I64s>{{0, 1}, {2, 3}, {4, 0}, {1, 2}, {3, 4}}));
}

bool is_permutation_of_range(I64s v, std::int64_t n) {
  std::sort(v.begin(), v.end());
  I64s want(static_cast<std::size_t>(n));
  std::iota(want.begin(), want.end(), 0);
  return v == want;
}

// tf.data guide, "Randomly shuffling input data": "Dataset.shuffle doesn't signal the end of
// an epoch until the shuffle buffer is empty. So a shuffle placed before a repeat will show
// every element of one epoch before moving to the next"; "a repeat before a shuffle mixes the
// epoch boundaries together".
TEST(DatasetEpochs, ShuffleThenRepeatKeepsEpochsRepeatThenShuffleMixesThem) {
  for (std::uint64_t seed : {1u, 2u, 3u, 4u, 5u}) {
    const auto kept = scalars(Dataset::range(10).shuffle(10, seed).repeat(2));
    ASSERT_EQ(kept.size(), 20u);
    EXPECT_TRUE(is_permutation_of_range(I64s(kept.begin(), kept.begin() + 10), 10)) << seed;
    EXPECT_TRUE(is_permutation_of_range(I64s(kept.begin() + 10, kept.end()), 10)) << seed;
    const auto mixed = scalars(Dataset::range(10).repeat(2).shuffle(10, seed));
    ASSERT_EQ(mixed.size(), 20u);
    // An element of the second epoch shows up among the first ten (a value twice).
    EXPECT_FALSE(is_permutation_of_range(I64s(mixed.begin(), mixed.begin() + 10), 10)) << seed;
  }
}

// tf.data.Dataset.shuffle docstring: range(3).shuffle(3, reshuffle_each_iteration=True)
// .repeat(2) gives e.g. [1, 0, 2, 1, 2, 0] (each epoch a new order); with False [1, 0, 2, 1, 0,
// 2] (the same order); and in TF 2 each Python pass over the dataset likewise.
TEST(DatasetEpochs, ShuffleDocstringReshuffleEachIteration) {
  const auto same = scalars(Dataset::range(3).shuffle(3, 11, false).repeat(2));
  EXPECT_TRUE(is_permutation_of_range(I64s(same.begin(), same.begin() + 3), 3));
  EXPECT_EQ(I64s(same.begin(), same.begin() + 3), I64s(same.begin() + 3, same.end()));

  const auto fixed = Dataset::range(20).shuffle(20, 11, false);
  EXPECT_EQ(scalars(fixed), scalars(fixed));

  const auto reshuffled = Dataset::range(20).shuffle(20, 11);
  const auto pass1 = scalars(reshuffled), pass2 = scalars(reshuffled);
  EXPECT_TRUE(is_permutation_of_range(pass1, 20));
  EXPECT_TRUE(is_permutation_of_range(pass2, 20));
  EXPECT_NE(pass1, pass2);
  // Still reproducible: the same pipeline built again gives the same sequence of passes.
  const auto again = Dataset::range(20).shuffle(20, 11);
  EXPECT_EQ(scalars(again), pass1);
  EXPECT_EQ(scalars(again), pass2);
  const auto epochs = scalars(Dataset::range(20).shuffle(20, 11).repeat(2));
  EXPECT_EQ(I64s(epochs.begin(), epochs.begin() + 20), pass1);
  EXPECT_EQ(I64s(epochs.begin() + 20, epochs.end()), pass2);
}

// A small buffer only draws from the elements it has seen: shuffle(1) is the identity, and with
// buffer_size 3 the first output is one of the first three inputs (the docstring's 1,000 of
// 10,000 example, scaled down).
TEST(DatasetEpochs, ShuffleBufferBoundsTheDraw) {
  EXPECT_EQ(scalars(Dataset::range(6).shuffle(1, 3)), (I64s{0, 1, 2, 3, 4, 5}));
  for (std::uint64_t seed = 0; seed < 20; ++seed)
    EXPECT_LT(scalars(Dataset::range(100).shuffle(3, seed)).front(), 3) << seed;
}

// A seed makes a pass reproducible whatever the thread count.
TEST(DatasetEpochs, SeededPipelineIsTheSameForAnyThreadCount) {
  auto slow_square = [](NamedTensors e) {
    const std::int64_t x = scalar(e);
    std::this_thread::sleep_for(std::chrono::microseconds((x * 37) % 200));  // finish out of order
    return NamedTensors{{"value", i64({x * x}, {})}};
  };
  auto build = [&](std::size_t threads) {
    return Dataset::range(60)
        .map(slow_square, Dataset::kAutotune)
        .shuffle(16, 42)
        .batch(7)
        .prefetch(2)
        .with_options({.private_threadpool_size = threads});
  };
  const auto one = rows(build(1));
  EXPECT_EQ(one.size(), 9u);
  EXPECT_EQ(rows(build(2)), one);
  EXPECT_EQ(rows(build(8)), one);
}

// --- interleave --------------------------------------------------------------------------------

// tf.data.Dataset.interleave docstring: Dataset.range(1, 6).interleave(lambda x:
// Dataset.from_tensors(x).repeat(6), cycle_length=2, block_length=4) ==
// [1,1,1,1, 2,2,2,2, 1,1, 2,2, 3,3,3,3, 4,4,4,4, 3,3, 4,4, 5,5,5,5, 5,5]
TEST(DatasetInterleave, InterleaveDocstring) {
  const I64s want{1, 1, 1, 1, 2, 2, 2, 2, 1, 1, 2, 2, 3, 3, 3, 3,
                  4, 4, 4, 4, 3, 3, 4, 4, 5, 5, 5, 5, 5, 5};
  auto six_times = [](const NamedTensors& e) { return slices({scalar(e)}).repeat(6); };
  const auto ds = Dataset::range(1, 6);
  EXPECT_EQ(scalars(ds.interleave(six_times, 2, 4)), want);
  for (std::size_t threads : {1u, 2u, 4u}) {
    const auto parallel = ds.interleave(six_times, 2, 4, Dataset::kAutotune)
                              .with_options({.private_threadpool_size = threads});
    EXPECT_EQ(scalars(parallel), want) << threads << " threads";
  }
  // cycle_length=1 is flat_map (tf.data.Dataset.flat_map docstring: [[1,2,3],[4,5,6],[7,8,9]]
  // flattened is [1, ..., 9]).
  auto row = [](const NamedTensors& e) {
    const std::int64_t r = scalar(e);
    return slices({3 * r + 1, 3 * r + 2, 3 * r + 3});
  };
  EXPECT_EQ(scalars(Dataset::range(3).interleave(row, 1)), (I64s{1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

// Parallel stages nested in a parallel interleave, prefetching, on a pool of one thread: the
// waiting threads run their own queued tasks, so the pass completes (no deadlock) in order.
TEST(DatasetInterleave, NestedParallelStagesOnOneThread) {
  auto inner = [](const NamedTensors& e) {
    const std::int64_t base = 100 * scalar(e);
    return Dataset::range(base, base + 5)
        .map([](NamedTensors x) { return x; }, 2)
        .prefetch(1)
        .batch(2)
        .unbatch();
  };
  for (std::size_t threads : {1u, 3u}) {
    const auto ds = Dataset::range(4)
                        .interleave(inner, 3, 2, Dataset::kAutotune)
                        .map([](NamedTensors x) { return x; }, 4)
                        .prefetch(2)
                        .with_options({.private_threadpool_size = threads});
    EXPECT_EQ(scalars(ds), (I64s{0, 1, 100, 101, 200, 201, 2, 3, 102, 103, 202, 203, 4, 104, 204,
                                 300, 301, 302, 303, 304}))
        << threads << " threads";
  }
}

// --- cache -------------------------------------------------------------------------------------

// tf.data.Dataset.cache docstring: range(5).map(lambda x: x**2).cache(): the first pass
// computes [0, 1, 4, 9, 16] with range and map, later passes read the cache.
TEST(DatasetCache, MemoryCacheDocstring) {
  auto calls = std::make_shared<std::atomic<int>>(0);
  auto square = [calls](NamedTensors e) {
    ++*calls;
    return NamedTensors{{"value", i64({scalar(e) * scalar(e)}, {})}};
  };
  const auto ds = Dataset::range(5).map(square).cache();
  EXPECT_EQ(scalars(ds), (I64s{0, 1, 4, 9, 16}));
  EXPECT_EQ(scalars(ds), (I64s{0, 1, 4, 9, 16}));
  EXPECT_EQ(calls->load(), 5);
}

// tf.data.Dataset.cache docstring: "For the cache to be finalized, the input dataset must be
// iterated through in its entirety. Otherwise, subsequent iterations will not use cached data."
TEST(DatasetCache, PartialPassIsNeverUsedAsTheCache) {
  auto calls = std::make_shared<std::atomic<int>>(0);
  auto count = [calls](NamedTensors e) {
    ++*calls;
    return e;
  };
  const auto ds = Dataset::range(5).map(count).cache();
  EXPECT_EQ(scalars(ds.take(2)), (I64s{0, 1}));  // take stops the cache's pass early
  EXPECT_EQ(scalars(ds), (I64s{0, 1, 2, 3, 4}));
  EXPECT_EQ(calls->load(), 2 + 5);
  EXPECT_EQ(scalars(ds), (I64s{0, 1, 2, 3, 4}));
  EXPECT_EQ(calls->load(), 7);

  // A pass that met an error (skipped by ignore_errors downstream) is not cached either.
  auto fail_once = std::make_shared<std::atomic<bool>>(true);
  auto flaky = [fail_once](NamedTensors e) {
    if (scalar(e) == 2 && fail_once->exchange(false)) throw DataLoss("flaky read");
    return e;
  };
  const auto cached = Dataset::range(4).map(flaky).cache().ignore_errors();
  EXPECT_EQ(scalars(cached), (I64s{0, 1, 3}));
  EXPECT_EQ(scalars(cached), (I64s{0, 1, 2, 3}));
}

// tf.data.Dataset.cache docstring: range(5).cache("/path/to/file") == [0, 1, 2, 3, 4]; then
// range(10).cache("/path/to/file") (same file!) == [0, 1, 2, 3, 4]: "Even the first iteration
// through the data will read from the cache file."
TEST(DatasetCache, FileCacheDocstring) {
  testing::TempDir dir;
  const std::string file = (dir / "cache").string();
  const auto five = Dataset::range(5).cache(file);
  {
    auto it = five.iterator();
    it.next();
  }  // an abandoned pass leaves neither the cache nor its temporary file
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()),
                          std::filesystem::directory_iterator()),
            0);
  // What a killed writer leaves (a temporary file) is never read as the cache.
  write_tfrecord_file(file + ".cache.tfrecord.tmp-1-0", {"not an element"});
  EXPECT_EQ(scalars(five), (I64s{0, 1, 2, 3, 4}));
  EXPECT_TRUE(std::filesystem::exists(file + ".cache.tfrecord"));
  EXPECT_EQ(scalars(Dataset::range(10).cache(file)), (I64s{0, 1, 2, 3, 4}));

  // A damaged cache file is DataLoss naming it.
  std::filesystem::resize_file(file + ".cache.tfrecord", 30);
  auto broken = Dataset::range(10).cache(file).iterator();
  expect_error([&] { while (broken.next()) {} }, ErrorKind::kDataLoss, {"cache.tfrecord"});
}

// --- Errors, ignore_errors, and stopping mid-pass -----------------------------------------------

// An exception in map reaches the consumer naming the element's index; the iterator is closed.
TEST(DatasetErrors, MapErrorNamesTheElementAndClosesThePass) {
  auto fail_at_5 = [](NamedTensors e) {
    if (scalar(e) == 5) throw InvalidArgument("cannot parse record");
    return e;
  };
  for (std::int64_t parallel : {std::int64_t{0}, std::int64_t{3}}) {
    auto it = Dataset::range(10).map(fail_at_5, parallel).prefetch(2).iterator();
    for (std::int64_t i = 0; i < 5; ++i) EXPECT_EQ(scalar(*it.next()), i);
    expect_error([&] { it.next(); }, ErrorKind::kInvalidArgument,
                 {"map", "element 5", "cannot parse record"});
    expect_error([&] { it.next(); }, ErrorKind::kFailedPrecondition,
                 {"closed by an earlier error", "element 5"});
  }
  auto std_error = Dataset::range(3).map([](NamedTensors) -> NamedTensors {
    throw std::runtime_error("boom");
  }, 2).iterator();
  expect_error([&] { std_error.next(); }, ErrorKind::kInternal, {"element 0", "boom"});
}

TEST(DatasetErrors, FilterErrorNamesThePredicateAndTheElement) {
  auto it = Dataset::range(10)
                .filter([](const NamedTensors& e) {
                  if (scalar(e) == 3) throw InvalidArgument("bad value");
                  return scalar(e) % 2 == 0;
                })
                .iterator();
  EXPECT_EQ(scalar(*it.next()), 0);
  EXPECT_EQ(scalar(*it.next()), 2);
  expect_error([&] { it.next(); }, ErrorKind::kInvalidArgument,
               {"filter: the predicate failed on element 3 of this pass: bad value"});
}

// tf.data.Dataset.ignore_errors docstring: from_tensor_slices([1., 2., 0., 4.]).map(lambda x:
// tf.debugging.check_numerics(1. / x, "error")).ignore_errors() ==> [1., 0.5, 0.25]
TEST(DatasetErrors, IgnoreErrorsDocstring) {
  const auto inputs = Dataset::from_tensor_slices(
      {{"x", Tensor::from<float>(DType::kF32, {4}, {1.f, 2.f, 0.f, 4.f})}});
  auto reciprocal = [](NamedTensors e) {
    const float x = e.at("x").as<float>()[0];
    if (x == 0.f) throw InvalidArgument("check_numerics: 1/x is Inf");
    return NamedTensors{{"x", Tensor::from<float>(DType::kF32, {}, {1.f / x})}};
  };
  for (std::int64_t parallel : {std::int64_t{0}, std::int64_t{2}}) {
    const auto ds = inputs.map(reciprocal, parallel).ignore_errors();
    auto it = ds.iterator();
    std::vector<float> got;
    while (auto e = it.next()) got.push_back(e->at("x").as<float>()[0]);
    EXPECT_EQ(got, (std::vector<float>{1.f, 0.5f, 0.25f}));
    EXPECT_EQ(it.ignored_errors(), 1);
    EXPECT_EQ(ds.ignored_errors(), 1);
  }
  // Errors that are not data errors still reach the consumer.
  auto it = inputs.map([](NamedTensors) -> NamedTensors { throw Unavailable("disk gone"); })
                .ignore_errors()
                .iterator();
  expect_error([&] { it.next(); }, ErrorKind::kUnavailable, {"disk gone"});
}

// Destroying an iterator mid-pass stops its prefetch thread and its parallel map: no hang,
// no thread or function call left behind.
TEST(DatasetErrors, DestroyedMidPassStopsAndJoins) {
  auto calls = std::make_shared<std::atomic<int>>(0);
  {
    auto slow = [calls](NamedTensors e) {
      ++*calls;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      return e;
    };
    const auto ds = Dataset::range(1'000'000).map(slow, 4).prefetch(8).batch(2).prefetch(2);
    auto it = ds.iterator();
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(it.next().has_value());
    EXPECT_GE(dataset_background_threads(), 1u);
  }  // the iterator, the dataset and the function go here
  EXPECT_EQ(dataset_background_threads(), 0u);
  const int after = calls->load();
  EXPECT_LT(after, 1000);  // bounded by the buffers, not the million inputs
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(calls->load(), after);      // nothing still running
  EXPECT_EQ(calls.use_count(), 1);      // the pipeline released the function
}

// The same guarantees through a parallel interleave: an error inside an interleaved input
// closes the pass, and a pass destroyed mid-way waits for its block reads.
TEST(DatasetErrors, ParallelInterleaveErrorsAndEarlyDestruction) {
  auto inner = [](const NamedTensors& e) {
    const std::int64_t base = 10 * scalar(e);
    return Dataset::range(base, base + 3).map([](NamedTensors x) {
      if (scalar(x) == 21) throw DataLoss("bad record 21");
      return x;
    }, 2);
  };
  const auto ds = Dataset::range(4).interleave(inner, 2, 1, 2).prefetch(3);
  auto it = ds.iterator();
  I64s got;
  try {
    while (auto e = it.next()) got.push_back(scalar(*e));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kDataLoss);
    EXPECT_NE(e.message().find("bad record 21"), std::string::npos) << e.what();
  }
  EXPECT_EQ(got, (I64s{0, 10, 1, 11, 2, 12, 20, 30}));
  expect_error([&] { it.next(); }, ErrorKind::kFailedPrecondition, {"bad record 21"});
  // Under ignore_errors the pass goes on past it (the prefetch thread keeps producing).
  EXPECT_EQ(scalars(ds.ignore_errors()), (I64s{0, 10, 1, 11, 2, 12, 20, 30, 31, 22, 32}));
  {
    auto early = Dataset::range(1000).interleave(inner, 4, 2, 4).prefetch(4).iterator();
    early.next();
  }
  EXPECT_EQ(dataset_background_threads(), 0u);
}

TEST(DatasetErrors, SharedPoolSizeIsSetBeforeFirstUse) {
  detail::shared_pool();
  expect_error([] { detail::set_shared_pool_threads(4); }, ErrorKind::kFailedPrecondition,
               {"exists already", "private_threadpool_size"});
  expect_error([] { detail::set_shared_pool_threads(0); }, ErrorKind::kInvalidArgument, {"0 threads"});
}

// --- TFRecordDataset ---------------------------------------------------------------------------

std::vector<std::string> records_of(const Dataset& ds) {
  std::vector<std::string> out;
  for (const NamedTensors& e : ds) out.push_back(tensor_bytes(e.at("record")));
  return out;
}

// TensorFlow-written fixtures (tests/fixtures/tfrecord): the same records as the reader reads,
// in file order; with num_parallel_reads=2 one record from each file in turn (TensorFlow's
// readers.py: interleave with cycle_length=num_parallel_reads, block_length=1).
TEST(DatasetTFRecord, ReadsTensorFlowFixtures) {
  const auto f0 = kFixtures / "toy.nocompress-tfe-tfrecord-00000-of-00002";
  const auto f1 = kFixtures / "toy.nocompress-tfe-tfrecord-00001-of-00002";
  const auto r0 = read_tfrecord_file(f0), r1 = read_tfrecord_file(f1);
  ASSERT_EQ(r0.size(), 3u);
  ASSERT_EQ(r1.size(), 1u);
  EXPECT_EQ(records_of(TFRecordDataset({f0, f1})),
            (std::vector<std::string>{r0[0], r0[1], r0[2], r1[0]}));
  EXPECT_EQ(records_of(TFRecordDataset({f0, f1}, "", -1, 2)),
            (std::vector<std::string>{r0[0], r1[0], r0[1], r0[2]}));

  const auto sentences = records_of(TFRecordDataset({kFixtures / "sentences.tfe-tfrecord"}, "GZIP"));
  ASSERT_EQ(sentences.size(), 2u);
  tf::Example example;
  ASSERT_TRUE(example.ParseFromString(sentences[1]));
  EXPECT_EQ(example.features().feature().at("f1").bytes_list().value(0), "Bonjour le monde");
  expect_error([] { TFRecordDataset({"x"}, "LZ4"); }, ErrorKind::kInvalidArgument, {"LZ4"});
}

// TFRecordDataset -> map(parse_example_fn) -> batch over the TensorFlow-written toy files
// (values: tests/fixtures/tfrecord/toy.csv; NA is an empty Feature, so the default applies).
TEST(DatasetTFRecord, ParseExamplesThenBatch) {
  const std::vector<std::filesystem::path> files{kFixtures / "toy.nocompress-tfe-tfrecord-00000-of-00002",
                                                 kFixtures / "toy.nocompress-tfe-tfrecord-00001-of-00002"};
  FeatureSpecs specs{
      {"Num_1", FixedLenFeature{{}, FeatureDType::kFloat32, {}}},
      {"Bool_2", FixedLenFeature{{}, FeatureDType::kInt64, std::vector<std::int64_t>{-1}}},
      {"Cat_1", FixedLenFeature{{}, FeatureDType::kString, {}}},
  };
  auto it = TFRecordDataset(files).map(parse_example_fn(specs), 2).batch(4).iterator();
  const auto batch = *it.next();
  EXPECT_FALSE(it.next().has_value());
  const Tensor& num = batch.at("Num_1");
  EXPECT_EQ(num.shape, (std::vector<std::int64_t>{4}));
  EXPECT_EQ(std::vector<float>(num.as<float>(), num.as<float>() + 4), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(i64_values(batch.at("Bool_2")), (I64s{0, -1, 1, -1}));
  EXPECT_EQ(batch.at("Cat_1").shape, (std::vector<std::int64_t>{4, 1}));  // bytes "A" "B" "A" "C"
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(batch.at("Cat_1").data.data()), 4), "ABAC");

  // VarLen numeric features become tf.SparseTensor's three components.
  auto sparse = TFRecordDataset(files).map(
      parse_example_fn({{"Num_2", VarLenFeature{FeatureDType::kFloat32}}})).skip(1).iterator();
  const auto row2 = *sparse.next();  // toy.csv row 2: Num_2 = 2
  EXPECT_EQ(i64_values(row2.at("Num_2/dense_shape")), (I64s{1}));
  EXPECT_EQ(row2.at("Num_2/values").as<float>()[0], 2.f);

  // A dtype that does not match reaches the consumer naming the map and the element.
  auto wrong = TFRecordDataset(files)
                   .map(parse_example_fn({{"Num_1", FixedLenFeature{{}, FeatureDType::kInt64, {}}}}))
                   .iterator();
  expect_error([&] { wrong.next(); }, ErrorKind::kInvalidArgument, {"map", "element 0", "Num_1"});
}

// A corrupt record: DataLoss naming the file and offset; under ignore_errors the rest of that
// file is skipped, counted once, and the next file is read.
TEST(DatasetTFRecord, CorruptRecordDataLossOrSkipped) {
  testing::TempDir dir;
  write_tfrecord_file(dir / "a.tfrecord", {"a0", "a1", "a2"});
  write_tfrecord_file(dir / "b.tfrecord", {"b0", "b1"});
  write_tfrecord_file(dir / "c.tfrecord", {"c0"});
  std::filesystem::resize_file(dir / "b.tfrecord", 18 + 5);  // b0 whole, b1 cut short
  const std::vector<std::filesystem::path> files{dir / "a.tfrecord", dir / "b.tfrecord",
                                                 dir / "c.tfrecord"};
  auto it = TFRecordDataset(files).iterator();
  for (int i = 0; i < 4; ++i) it.next();
  expect_error([&] { it.next(); }, ErrorKind::kDataLoss, {"b.tfrecord", "offset 18"});

  const auto skipping = TFRecordDataset(files).ignore_errors();
  EXPECT_EQ(records_of(skipping), (std::vector<std::string>{"a0", "a1", "a2", "b0", "c0"}));
  EXPECT_EQ(skipping.ignored_errors(), 1);
  auto missing = TFRecordDataset({dir / "none.tfrecord"}).iterator();
  expect_error([&] { missing.next(); }, ErrorKind::kNotFound, {"none.tfrecord"});
}

// tf.data.Dataset.shard docstring, the efficient sharding pipeline: list_files, shard by
// worker, interleave TFRecordDataset over the files. Worker 0 of 2 reads files 0 and 2.
TEST(DatasetTFRecord, ShardFilesThenInterleaveReaders) {
  testing::TempDir dir;
  for (int f = 0; f < 4; ++f) {
    std::vector<std::string> records;
    const std::string file = std::to_string(f);
    records = {"f" + file + "r0", "f" + file + "r1"};
    write_tfrecord_file(dir / ("part-" + file + ".tfrecord"), records);
  }
  const auto worker0 =
      Dataset::list_files((dir.path() / "part-*.tfrecord").string(), false)
          .shard(2, 0)
          .interleave([](const NamedTensors& e) {
            return TFRecordDataset({tensor_bytes(e.at("filename"))});
          }, 2, 1, Dataset::kAutotune);
  EXPECT_EQ(records_of(worker0), (std::vector<std::string>{"f0r0", "f2r0", "f0r1", "f2r1"}));
}

// --- cardinality -----------------------------------------------------------------------------

constexpr std::int64_t kInfinite = Dataset::kInfiniteCardinality;
constexpr std::int64_t kUnknown = Dataset::kUnknownCardinality;

// The number of elements one pass really yields, to check a finite cardinality against.
std::int64_t counted(const Dataset& ds) {
  std::int64_t n = 0;
  for (const NamedTensors& e : ds) (void)e, ++n;
  return n;
}

// tf.data.Dataset.cardinality docstring: range(42).cardinality() == 42;
// range(42).repeat().cardinality() == INFINITE_CARDINALITY (-1);
// range(42).repeat().filter(lambda x: True).cardinality() == UNKNOWN_CARDINALITY (-2).
TEST(DatasetCardinality, Docstring) {
  EXPECT_EQ(kInfinite, -1);
  EXPECT_EQ(kUnknown, -2);
  const Dataset ds = Dataset::range(42);
  EXPECT_EQ(ds.cardinality(), 42);
  EXPECT_EQ(ds.repeat().cardinality(), kInfinite);
  EXPECT_EQ(ds.repeat().filter([](const NamedTensors&) { return true; }).cardinality(), kUnknown);
}

// Finite cases: each equals the length of a real pass, and the documented lengths of the
// sequences the docstrings list (range(1, 5, 2) == [1, 3]; range(8).batch(3) ==
// [[0,1,2],[3,4,5],[6,7]], with drop_remainder the last one goes; range(10).shard(3, 0) ==
// [0, 3, 6, 9] and shard(3, 1) == [1, 4, 7]; zip of range(1, 4) and range(4, 7) has 3).
TEST(DatasetCardinality, FiniteCountsEqualAPass) {
  const std::vector<std::pair<Dataset, std::int64_t>> cases = {
      {Dataset::range(1, 5, 2), 2},
      {Dataset::range(1, 5, -2), 0},
      {Dataset::range(5, 1, -2), 2},
      {Dataset::range(0, 10, 3), 4},
      {slices({4, 5, 6}), 3},
      {Dataset::range(8).batch(3), 3},
      {Dataset::range(8).batch(3, /*drop_remainder=*/true), 2},
      {Dataset::range(10).shard(3, 0), 4},
      {Dataset::range(10).shard(3, 1), 3},
      {Dataset::zip({Dataset::range(1, 4), Dataset::range(4, 7).map(rename("b"))}), 3},
      {Dataset::range(10).take(3), 3},
      {Dataset::range(2).take(3), 2},
      {Dataset::range(10).skip(7), 3},
      {Dataset::range(10).skip(12), 0},
      {Dataset::range(10).skip(-1), 0},
      {Dataset::range(3).repeat(4), 12},
      {Dataset::range(0).repeat(), 0},
      {Dataset::range(5).map(rename("x")).shuffle(4, 1).prefetch(2).cache(), 5},
      {Dataset::range(5).enumerate(), 5},
      {Dataset::range(5).map(rename("x"), 2), 5},
      {Dataset::range(10).repeat().take(7), 7},
      {Dataset::range(3).repeat().batch(2).take(5), 5},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& [ds, expected] = cases[i];
    EXPECT_EQ(ds.cardinality(), expected) << "case " << i;
    EXPECT_EQ(counted(ds), expected) << "case " << i;
  }
}

TEST(DatasetCardinality, InfiniteAndUnknownFollowTfData) {
  const Dataset forever = Dataset::range(3).repeat();
  EXPECT_EQ(forever.batch(2).cardinality(), kInfinite);
  EXPECT_EQ(forever.map(rename("x")).prefetch(1).cardinality(), kInfinite);
  EXPECT_EQ(forever.skip(5).cardinality(), kInfinite);
  EXPECT_EQ(forever.shard(2, 0).cardinality(), kInfinite);
  // zip ends with its shortest input: infinite only if every input is.
  EXPECT_EQ(Dataset::zip({forever, Dataset::range(4).map(rename("b"))}).cardinality(), 4);
  EXPECT_EQ(Dataset::zip({forever, forever.map(rename("b"))}).cardinality(), kInfinite);
  // Unknown: what a pass must read to know.
  const Dataset unknown = Dataset::range(5).ignore_errors();
  EXPECT_EQ(unknown.cardinality(), kUnknown);
  EXPECT_EQ(Dataset::range(4).batch(2).unbatch().cardinality(), kUnknown);
  EXPECT_EQ(Dataset::zip({unknown, Dataset::range(4).map(rename("b"))}).cardinality(), kUnknown);
  EXPECT_EQ(unknown.batch(2).cardinality(), kUnknown);
  EXPECT_EQ(unknown.take(3).cardinality(), kUnknown);
  EXPECT_EQ(unknown.repeat().cardinality(), kInfinite);  // repeat() of anything non-empty
  EXPECT_EQ(unknown.repeat(2).cardinality(), kUnknown);
  EXPECT_EQ(Dataset::from_generator([] { return [] { return std::optional<NamedTensors>(); }; }).cardinality(),
            kUnknown);
  EXPECT_EQ(TFRecordDataset({kFixtures / "toy.nocompress-tfe-tfrecord-00000-of-00002"}).cardinality(), kUnknown);
}

}  // namespace
}  // namespace tensorhub
