// Tests of Model::fit and Model::evaluate over a Dataset: the same training as from tensors,
// Keras's steps_per_epoch / validation_steps rules (which batches each epoch takes), dtype
// conversions, and the errors naming the batch.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensorhub/core/error.h"
#include "tensorhub/data/dataset.h"
#include "tensorhub/train/callbacks.h"
#include "tensorhub/train/model.h"
#include "test_util.h"
#include "train_test_data.h"

namespace tensorhub {
namespace {

using nlohmann::json;
using testing::expect_error;
using testing::f32;
using testing::i64;

// A small classifier with dropout, so that the dropout seeding is compared too.
json classifier() {
  return {{"input_shape", {4}},
          {"seed", 3},
          {"layers",
           {{{"type", "Dropout"}, {"rate", 0.2}},
            {{"type", "Dense"}, {"units", 8}, {"activation", "relu"}},
            {{"type", "Dense"}, {"units", 2}}}},
          {"optimizer", {{"type", "Adam"}, {"learning_rate", 0.01}}}};
}

std::vector<float> floats(const Tensor& t) { return std::vector<float>(t.as<float>(), t.as<float>() + t.numel()); }

// Elements {x: F32 [4], y: I64, i: I64} for i = 0..n-1 (x all i / 10, y = i % 2).
Dataset indexed(std::int64_t n) {
  std::vector<float> xs;
  std::vector<std::int64_t> ys, is;
  for (std::int64_t i = 0; i < n; ++i) {
    for (int j = 0; j < 4; ++j) xs.push_back(static_cast<float>(i) / 10);
    ys.push_back(i % 2);
    is.push_back(i);
  }
  return Dataset::from_tensor_slices({{"x", f32({n, 4}, xs)}, {"y", i64(ys)}, {"i", i64(is)}});
}

// Records the first "i" of every batch the pipeline hands out (the map runs in the consumer's
// thread: no read-ahead, so this is what fit consumed).
Dataset recording(const Dataset& batched, std::shared_ptr<std::vector<std::int64_t>> firsts) {
  return batched.map([firsts](NamedTensors e) {
    firsts->push_back(e.at("i").as<std::int64_t>()[0]);
    return e;
  });
}

FitOptions quiet(int epochs) {
  FitOptions o;
  o.epochs = epochs;
  o.verbose = 0;
  o.seed = 7;
  return o;
}

TEST(FitDataset, SameTrainingAsFromTensorsInTheSameOrder) {
  Tensor x, y;
  testing::separable(200, 11, x, y);
  FitOptions o = quiet(3);
  o.batch_size = 32;
  o.shuffle = false;  // the tensor fit then takes the batches in the dataset's order
  Model from_tensors = Model::from_config(classifier());
  const History h1 = from_tensors.fit(x, y, o);
  Model from_dataset = Model::from_config(classifier());
  const History h2 = from_dataset.fit(Dataset::from_tensor_slices({{"x", x}, {"y", y}}).batch(32), o);
  ASSERT_EQ(h1.epochs.size(), 3u);
  ASSERT_EQ(h2.epochs.size(), 3u);
  for (std::size_t e = 0; e < 3; ++e) {
    EXPECT_EQ(h1.epochs[e].at("loss"), h2.epochs[e].at("loss")) << "epoch " << e;
    EXPECT_EQ(h1.epochs[e].at("accuracy"), h2.epochs[e].at("accuracy")) << "epoch " << e;
  }
  EXPECT_EQ(floats(from_tensors.weights().at("dense.weight")), floats(from_dataset.weights().at("dense.weight")));
  EXPECT_EQ(from_dataset.epochs_done(), 3);
  EXPECT_EQ(from_dataset.steps_done(), 3 * 7);  // ceil(200 / 32) batches per epoch

  const Evaluation e1 = from_tensors.evaluate(x, y, 64);
  const Evaluation e2 = from_dataset.evaluate(Dataset::from_tensor_slices({{"x", x}, {"y", y}}).batch(64));
  EXPECT_EQ(e1.loss, e2.loss);
  EXPECT_EQ(e1.accuracy, e2.accuracy);
  EXPECT_GT(e2.accuracy, 0.9);  // separable data: it learned
}

TEST(FitDataset, WithoutStepsPerEpochEveryEpochIsAWholeNewPass) {
  auto firsts = std::make_shared<std::vector<std::int64_t>>();
  Model m = Model::from_config(classifier());
  struct StepsAtEpochBegin : Callback {
    std::vector<std::int64_t> steps;
    void on_epoch_begin(int, const Logs&) override { steps.push_back(params().steps); }
  };
  auto cb = std::make_shared<StepsAtEpochBegin>();
  FitOptions o = quiet(2);
  o.callbacks = {cb};
  const History h = m.fit(recording(indexed(10).batch(4), firsts), o);
  EXPECT_EQ(*firsts, (std::vector<std::int64_t>{0, 4, 8, 0, 4, 8}));
  EXPECT_EQ(h.epochs.size(), 2u);
  // The dataset knows its length (cardinality 3): known from the start, as Keras's DataHandler
  // infers steps from a known cardinality.
  EXPECT_EQ(cb->steps, (std::vector<std::int64_t>{3, 3}));
  // A filter makes the length unknown: 0 (unknown) in the first epoch, as Keras's progress
  // bar, then the first pass's length.
  cb->steps.clear();
  const Dataset filtered = indexed(10).filter([](const NamedTensors&) { return true; }).batch(4);
  ASSERT_EQ(filtered.cardinality(), Dataset::kUnknownCardinality);
  m.fit(filtered, o);
  EXPECT_EQ(cb->steps, (std::vector<std::int64_t>{0, 3}));
}

TEST(FitDataset, StepsPerEpochContinuesOneRepeatedPassAcrossEpochs) {
  auto firsts = std::make_shared<std::vector<std::int64_t>>();
  Model m = Model::from_config(classifier());
  FitOptions o = quiet(3);
  o.steps_per_epoch = 3;
  const History h = m.fit(recording(indexed(10).batch(2).repeat(), firsts), o);
  // Five batches per pass of the repeated dataset; nine taken in all, in one pass.
  EXPECT_EQ(*firsts, (std::vector<std::int64_t>{0, 2, 4, 6, 8, 0, 2, 4, 6}));
  EXPECT_EQ(h.epochs.size(), 3u);
  EXPECT_EQ(m.steps_done(), 9);
}

TEST(FitDataset, StepsPerEpochEqualToThePassRestartsItEveryEpoch) {
  auto firsts = std::make_shared<std::vector<std::int64_t>>();
  Model m = Model::from_config(classifier());
  FitOptions o = quiet(3);
  o.steps_per_epoch = 5;  // the dataset's cardinality: Keras recreates the iterator each epoch
  const History h = m.fit(recording(indexed(10).batch(2), firsts), o);
  EXPECT_EQ(*firsts, (std::vector<std::int64_t>{0, 2, 4, 6, 8, 0, 2, 4, 6, 8, 0, 2, 4, 6, 8}));
  EXPECT_EQ(h.epochs.size(), 3u);
}

TEST(FitDataset, DataRunningOutEndsTrainingAfterThatEpoch) {
  auto firsts = std::make_shared<std::vector<std::int64_t>>();
  Model m = Model::from_config(classifier());
  FitOptions o = quiet(4);
  o.steps_per_epoch = 3;  // 5 batches: epoch 1 takes 3, epoch 2 the last 2, then out of data
  const History h = m.fit(recording(indexed(10).batch(2), firsts), o);
  EXPECT_EQ(*firsts, (std::vector<std::int64_t>{0, 2, 4, 6, 8}));
  ASSERT_EQ(h.epochs.size(), 2u);
  EXPECT_EQ(m.epochs_done(), 2);
  EXPECT_EQ(m.steps_done(), 5);
}

// tf.keras refuses an infinite dataset without steps ("When providing an infinite dataset, you
// must specify the number of steps to run"): an epoch would never end. Nothing is trained.
TEST(FitDataset, AnInfiniteDatasetNeedsStepsPerEpoch) {
  Model m = Model::from_config(classifier());
  const Dataset forever = indexed(10).batch(2).repeat();
  expect_error([&] { m.fit(forever, quiet(1)); }, ErrorKind::kInvalidArgument,
               {"fit: the dataset is infinite", "set steps_per_epoch"});
  const Dataset finite = indexed(10).batch(2);
  expect_error([&] { m.fit(finite, quiet(1), &forever); }, ErrorKind::kInvalidArgument,
               {"validation_data is infinite", "validation_steps"});
  expect_error([&] { m.evaluate(forever); }, ErrorKind::kInvalidArgument, {"evaluate: the dataset is infinite", "steps"});
  EXPECT_EQ(m.steps_done(), 0);
  // With steps it trains: 2 epochs of 3 batches.
  FitOptions o = quiet(2);
  o.steps_per_epoch = 3;
  o.validation_steps = 1;
  EXPECT_EQ(m.fit(forever, o, &forever).epochs.size(), 2u);
  EXPECT_EQ(m.steps_done(), 6);
  EvaluateOptions e;
  e.steps = 2;
  EXPECT_NO_THROW(m.evaluate(forever, e));
}

TEST(FitDataset, ValidationStepsTakeThatManyBatchesOfANewPassEachEpoch) {
  auto firsts = std::make_shared<std::vector<std::int64_t>>();
  Tensor x, y;
  testing::separable(40, 5, x, y);
  Model m = Model::from_config(classifier());
  std::int64_t test_batches = 0;
  struct CountTests : Callback {
    std::int64_t* n;
    explicit CountTests(std::int64_t* n) : n(n) {}
    void on_test_batch_end(std::int64_t, const Logs&) override { ++*n; }
  };
  FitOptions o = quiet(2);
  o.validation_steps = 2;
  o.callbacks = {std::make_shared<CountTests>(&test_batches)};
  const Dataset validation = recording(indexed(10).batch(3), firsts);  // 4 batches
  const History h = m.fit(Dataset::from_tensor_slices({{"x", x}, {"y", y}}).batch(8), o, &validation);
  EXPECT_EQ(*firsts, (std::vector<std::int64_t>{0, 3, 0, 3}));
  EXPECT_EQ(test_batches, 4);
  // The last epoch's val_loss is evaluate over those two batches with the final weights.
  const Evaluation ev = m.evaluate(indexed(10).batch(3).take(2));
  EXPECT_EQ(h.epochs.back().at("val_loss"), ev.loss);
  EXPECT_EQ(h.epochs.back().at("val_accuracy"), ev.accuracy);
  EvaluateOptions two;
  two.steps = 2;
  EXPECT_EQ(m.evaluate(indexed(10).batch(3), two).loss, ev.loss);
}

TEST(FitDataset, OtherDtypesAreConvertedAsTheyAre) {
  // x as U8 0..255 and y as I32 give what the same values as F32 and I64 give.
  std::vector<std::uint8_t> bytes;
  std::vector<float> xs;
  std::vector<std::int32_t> y32;
  std::vector<std::int64_t> y64;
  for (int i = 0; i < 24; ++i) {
    for (int j = 0; j < 4; ++j) {
      bytes.push_back(static_cast<std::uint8_t>((i * 37 + j * 11) % 256));
      xs.push_back(static_cast<float>(bytes.back()));
    }
    y32.push_back(i % 2);
    y64.push_back(i % 2);
  }
  const Dataset as_u8 = Dataset::from_tensor_slices(
      {{"image", Tensor::from<std::uint8_t>(DType::kU8, {24, 4}, bytes)},
       {"label", Tensor::from<std::int32_t>(DType::kI32, {24}, y32)}});
  const Dataset as_f32 = Dataset::from_tensor_slices({{"image", f32({24, 4}, xs)}, {"label", i64(y64)}});
  FitOptions o = quiet(2);
  o.x_key = "image";
  o.y_key = "label";
  Model a = Model::from_config(classifier()), b = Model::from_config(classifier());
  const History ha = a.fit(as_u8.batch(5), o), hb = b.fit(as_f32.batch(5), o);
  EXPECT_EQ(ha.epochs.back().at("loss"), hb.epochs.back().at("loss"));
  EXPECT_EQ(floats(a.weights().at("dense.weight")), floats(b.weights().at("dense.weight")));
}

TEST(FitDataset, ErrorsNameTheBatchAndWhatIsWrong) {
  Model m = Model::from_config(classifier());
  const FitOptions o = quiet(1);
  expect_error([&] { m.fit(indexed(6).batch(2), [] { FitOptions f = quiet(1); f.x_key = "image"; return f; }()); },
               ErrorKind::kInvalidArgument, {"batch 0 of epoch 1", "\"image\"", "x_key", "\"i\", \"x\", \"y\""});
  expect_error([&] { m.fit(indexed(6), o); }, ErrorKind::kInvalidArgument,
               {"batch 0 of epoch 1 \"x\" has shape [4]", "[batch, 4]", ".batch(n)"});
  const Dataset too_wide = indexed(4).batch(2).map([](NamedTensors e) {
    e["x"] = f32({2, 3}, {0, 0, 0, 0, 0, 0});
    return e;
  });
  // Batched already: the hint is the model's input_shape, not .batch(n).
  expect_error([&] { m.fit(too_wide, o); }, ErrorKind::kInvalidArgument,
               {"\"x\" has shape [2, 3]", "the model's input_shape [4] does not fit the data"});
  const Dataset bad_label = indexed(6).batch(2).map([](NamedTensors e) {
    if (e.at("i").as<std::int64_t>()[0] == 2) e.at("y").as<std::int64_t>()[1] = 7;
    return e;
  });
  expect_error([&] { m.fit(bad_label, o); }, ErrorKind::kInvalidArgument,
               {"batch 1 of epoch 1 \"y\"[1] = 7", "not a class index in [0, 2)"});
  const Dataset float_labels = indexed(4).batch(2).map([](NamedTensors e) {
    e["y"] = f32({2}, {0, 1});
    return e;
  });
  expect_error([&] { m.fit(float_labels, o); }, ErrorKind::kInvalidArgument, {"dtype F32", "integer class indices"});
  expect_error([&] { m.fit(indexed(4).batch(2).take(0), o); }, ErrorKind::kInvalidArgument,
               {"no batch in the first epoch"});
  expect_error([&] { m.evaluate(indexed(4).batch(2).take(0)); }, ErrorKind::kInvalidArgument, {"no batch"});
  FitOptions negative = quiet(1);
  negative.steps_per_epoch = -1;
  expect_error([&] { m.fit(indexed(4).batch(2), negative); }, ErrorKind::kInvalidArgument, {"steps_per_epoch = -1"});
}

TEST(FitDataset, StopTrainingFromACallbackEndsAfterTheBatch) {
  auto firsts = std::make_shared<std::vector<std::int64_t>>();
  Model m = Model::from_config(classifier());
  auto cb = std::make_shared<LambdaCallback>();
  cb->batch_end = [c = cb.get()](std::int64_t batch, const Logs&) {
    if (batch == 1) c->model()->set_stop_training(true);
  };
  FitOptions o = quiet(3);
  o.callbacks = {cb};
  const History h = m.fit(recording(indexed(10).batch(2), firsts), o);
  EXPECT_EQ(*firsts, (std::vector<std::int64_t>{0, 2}));
  EXPECT_EQ(h.epochs.size(), 1u);
}

}  // namespace
}  // namespace tensorhub
