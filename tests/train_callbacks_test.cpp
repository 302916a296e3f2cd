// Tests of the Keras callbacks (tensorhub/train/callbacks.h) and of Model::save/load with
// optimizer state: hook order, hand-computed EarlyStopping/ReduceLROnPlateau sequences, CSV
// contents, checkpoint names, exact resumption (also across a SIGKILLed child process), and
// TensorBoard files decoded back.
#include "tensorhub/train/callbacks.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tensorhub/core/error.h"
#include "tensorhub/data/tfrecord.h"
#include "tensorhub/store/hub.h"
#include "tensorhub/tf/event.pb.h"
#include "test_util.h"
#include "train_test_data.h"

namespace tensorhub {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::TempDir;

using testing::expect_error;  // tests/test_util.h

using testing::f32;
using testing::i64;

using testing::quiet;
using testing::separable;  // tests/train_test_data.h

// Random inputs with random labels: nothing to learn, so validation loss rises as the model
// memorises the training set.
void noise(std::int64_t n, std::uint32_t seed, std::int64_t dims, Tensor& x, Tensor& y) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0, 1);
  std::vector<float> xs(static_cast<std::size_t>(n * dims));
  for (auto& v : xs) v = g(rng);
  std::vector<std::int64_t> ys(static_cast<std::size_t>(n));
  for (auto& v : ys) v = static_cast<std::int64_t>(rng() % 2);
  x = f32({n, dims}, xs);
  y = i64(ys);
}

json classifier(const json& optimizer, int units = 16, bool dropout = false) {
  json layers = json::array();
  layers.push_back({{"type", "Dense"}, {"units", units}, {"activation", "relu"}});
  if (dropout) layers.push_back({{"type", "Dropout"}, {"rate", 0.3}});
  layers.push_back({{"type", "Dense"}, {"units", 2}});
  return {{"input_shape", {4}},
          {"seed", 3},
          {"layers", layers},
          {"loss", "sparse_categorical_crossentropy"},
          {"optimizer", optimizer}};
}

json adam(double lr = 0.01) { return {{"type", "Adam"}, {"learning_rate", lr}}; }

void expect_same_weights(const NamedTensors& a, const NamedTensors& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) {
    ASSERT_TRUE(b.count(name)) << name;
    EXPECT_EQ(t.shape, b.at(name).shape) << name;
    EXPECT_TRUE(t.data == b.at(name).data) << name << " differs";
  }
}

bool same_weights(const NamedTensors& a, const NamedTensors& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [name, t] : a)
    if (!b.count(name) || t.data != b.at(name).data) return false;
  return true;
}

std::string read_text(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// ---- hooks -----------------------------------------------------------------------------------

// A user callback written in C++: records every hook.
class Recorder : public Callback {
 public:
  std::vector<std::string> calls;
  std::vector<Logs> batch_logs;
  std::vector<Logs> epoch_logs;
  void on_train_begin(const Logs&) override { calls.push_back("train_begin"); }
  void on_train_end(const Logs&) override { calls.push_back("train_end"); }
  void on_epoch_begin(int e, const Logs&) override { calls.push_back("epoch_begin " + std::to_string(e)); }
  void on_epoch_end(int e, Logs& logs) override {
    calls.push_back("epoch_end " + std::to_string(e));
    epoch_logs.push_back(logs);
    logs["custom"] = 42;  // later callbacks and History see it
  }
  void on_train_batch_begin(std::int64_t b, const Logs&) override { calls.push_back("batch_begin " + std::to_string(b)); }
  void on_train_batch_end(std::int64_t b, const Logs& logs) override {
    calls.push_back("batch_end " + std::to_string(b));
    batch_logs.push_back(logs);
  }
  void on_test_begin(const Logs&) override { calls.push_back("test_begin"); }
  void on_test_end(const Logs&) override { calls.push_back("test_end"); }
  void on_test_batch_begin(std::int64_t b, const Logs&) override { calls.push_back("test_batch_begin " + std::to_string(b)); }
  void on_test_batch_end(std::int64_t b, const Logs&) override { calls.push_back("test_batch_end " + std::to_string(b)); }
  void on_predict_begin(const Logs&) override { calls.push_back("predict_begin"); }
  void on_predict_end(const Logs&) override { calls.push_back("predict_end"); }
  void on_predict_batch_begin(std::int64_t b, const Logs&) override { calls.push_back("predict_batch_begin " + std::to_string(b)); }
  void on_predict_batch_end(std::int64_t b, const Logs&) override { calls.push_back("predict_batch_end " + std::to_string(b)); }
};

// `n` training and `n_val` validation examples of the separable problem (seeds 1 and 2).
struct TrainAndValidation {
  Tensor x, y, xv, yv;
};
TrainAndValidation train_and_validation(int n, int n_val) {
  TrainAndValidation d;
  separable(n, 1, d.x, d.y);
  separable(n_val, 2, d.xv, d.yv);
  return d;
}

TEST(Callbacks, UserCallbackSeesKerasHookOrderAndBatchLogs) {
  auto [x, y, xv, yv] = train_and_validation(10, 5);
  Model model = Model::from_config(classifier(adam()));
  auto rec = std::make_shared<Recorder>();
  FitOptions o = quiet(2);
  o.callbacks = {rec};
  const History h = model.fit(x, y, o, &xv, &yv);
  std::vector<std::string> want = {"train_begin"};
  for (int e = 0; e < 2; ++e) {
    want.push_back("epoch_begin " + std::to_string(e));
    for (int b = 0; b < 3; ++b) {
      want.push_back("batch_begin " + std::to_string(b));
      want.push_back("batch_end " + std::to_string(b));
    }
    for (const char* s : {"test_begin", "test_batch_begin 0", "test_batch_end 0", "test_end"})
      want.push_back(s);
    want.push_back("epoch_end " + std::to_string(e));
  }
  want.push_back("train_end");
  EXPECT_EQ(rec->calls, want);
  EXPECT_EQ(rec->model(), &model);
  EXPECT_EQ(rec->params().epochs, 2);
  EXPECT_EQ(rec->params().steps, 3);

  // Batch logs are the batch's own values: batches of 4, 4, 2 average to the epoch's loss.
  ASSERT_EQ(rec->batch_logs.size(), 6u);
  for (int e = 0; e < 2; ++e) {
    const Logs* b = &rec->batch_logs[3 * e];
    EXPECT_NEAR((4 * b[0].at("loss") + 4 * b[1].at("loss") + 2 * b[2].at("loss")) / 10,
                h.epochs[e].at("loss"), 1e-12);
    EXPECT_NEAR((4 * b[0].at("accuracy") + 4 * b[1].at("accuracy") + 2 * b[2].at("accuracy")) / 10,
                h.epochs[e].at("accuracy"), 1e-12);
    EXPECT_NE(b[0].at("loss"), b[1].at("loss"));
    EXPECT_TRUE(rec->epoch_logs[e].count("val_loss"));
    EXPECT_EQ(h.epochs[e].at("custom"), 42);
  }

  rec->calls.clear();
  model.predict(x, 4, {rec});
  EXPECT_EQ(rec->calls, (std::vector<std::string>{
                            "predict_begin", "predict_batch_begin 0", "predict_batch_end 0",
                            "predict_batch_begin 1", "predict_batch_end 1",
                            "predict_batch_begin 2", "predict_batch_end 2", "predict_end"}));
  rec->calls.clear();
  const Evaluation ev = model.evaluate(xv, yv, 1024, {rec});
  EXPECT_EQ(rec->calls, (std::vector<std::string>{"test_begin", "test_batch_begin 0",
                                                  "test_batch_end 0", "test_end"}));
  EXPECT_DOUBLE_EQ(ev.loss, h.epochs[1].at("val_loss"));
}

TEST(Callbacks, StopTrainingEndsAfterTheCurrentBatchAndLearningRateIsSettable) {
  Tensor x, y;
  separable(10, 1, x, y);
  Model model = Model::from_config(classifier(adam(0.01)));
  EXPECT_DOUBLE_EQ(model.learning_rate(), 0.01);
  model.set_learning_rate(0.002);
  EXPECT_DOUBLE_EQ(model.learning_rate(), 0.002);
  expect_error([&] { model.set_learning_rate(-1); }, ErrorKind::kInvalidArgument, {"positive"});
  auto stop = std::make_shared<LambdaCallback>();
  int epoch_ends = 0;
  stop->batch_end = [&](std::int64_t b, const Logs&) {
    if (b == 1) stop->model()->set_stop_training(true);
  };
  stop->epoch_end = [&](int, Logs&) { ++epoch_ends; };
  FitOptions o = quiet(5);
  o.callbacks = {stop};
  const History h = model.fit(x, y, o);
  EXPECT_EQ(h.epochs.size(), 1u);
  EXPECT_EQ(epoch_ends, 1);
  EXPECT_EQ(model.steps_done(), 2);
  EXPECT_EQ(model.epochs_done(), 1);
}

// ---- EarlyStopping ----------------------------------------------------------------------------

// Feeds `values` of `monitor` as epoch logs; returns the epoch at which training stopped, or -1.
int feed_early_stopping(const EarlyStoppingOptions& opts, const std::vector<double>& values) {
  Model model = Model::from_config(classifier(adam()));
  EarlyStopping es(opts);
  es.set_model(&model);
  es.on_train_begin({});
  for (std::size_t e = 0; e < values.size(); ++e) {
    Logs logs{{opts.monitor, values[e]}};
    es.on_epoch_end(static_cast<int>(e), logs);
    if (model.stop_training()) {
      EXPECT_EQ(es.stopped_epoch(), static_cast<int>(e));
      return static_cast<int>(e);
    }
  }
  return -1;
}

TEST(EarlyStopping, StopsAtHandComputedEpochs) {
  EarlyStoppingOptions o;
  o.patience = 2;
  // best 1.0, 0.9 (wait 0), 0.95 (wait 1), 0.92 (wait 2 >= 2): stop at epoch 3.
  EXPECT_EQ(feed_early_stopping(o, {1.0, 0.9, 0.95, 0.92, 0.91, 0.5}), 3);
  // min_delta 0.05: 0.97 is not below 1.0 - 0.05, so with patience 1 it stops at epoch 1.
  o.patience = 1;
  o.min_delta = 0.05;
  EXPECT_EQ(feed_early_stopping(o, {1.0, 0.97, 0.9, 0.88}), 1);
  o.min_delta = -0.05;  // the sign does not matter (Keras takes abs)
  EXPECT_EQ(feed_early_stopping(o, {1.0, 0.97, 0.9, 0.88}), 1);
  // Mode auto on an accuracy is max: 0.5, 0.6 (better), 0.6 (wait 1), 0.55 (wait 2): epoch 3.
  EarlyStoppingOptions acc;
  acc.monitor = "val_accuracy";
  acc.patience = 2;
  EXPECT_EQ(feed_early_stopping(acc, {0.5, 0.6, 0.6, 0.55, 0.7}), 3);
  acc.mode = Mode::kMin;  // forced min: 0.6 is worse than 0.5 -> wait 1, 0.6 wait 2: epoch 2
  EXPECT_EQ(feed_early_stopping(acc, {0.5, 0.6, 0.6, 0.55, 0.7}), 2);
  // Baseline 0.5: 0.8 improves on inf but not on the baseline, so wait is not reset
  // (1 after epoch 0); 0.9 makes it 2: stop at epoch 1 instead of epoch 2 without baseline.
  EarlyStoppingOptions b;
  b.patience = 2;
  EXPECT_EQ(feed_early_stopping(b, {0.8, 0.9, 0.9, 0.9}), 2);
  b.baseline = 0.5;
  EXPECT_EQ(feed_early_stopping(b, {0.8, 0.9, 0.9, 0.9}), 1);
  // start_from_epoch 2: epochs 0 and 1 are ignored; patience 0 stops at the first
  // non-improvement after that (epoch 3), instead of epoch 1.
  EarlyStoppingOptions s;
  EXPECT_EQ(feed_early_stopping(s, {1, 2, 3, 4}), 1);
  s.start_from_epoch = 2;
  EXPECT_EQ(feed_early_stopping(s, {1, 2, 3, 4}), 3);
  // Never stops while improving.
  EXPECT_EQ(feed_early_stopping(s, {5, 4, 3, 2, 1}), -1);
}

TEST(EarlyStopping, RestoresTheBestWeightsAtTheEndWhenTheLastEpochWasNotTheBest) {
  json config = classifier(adam());
  Model model = Model::from_config(config);
  auto weights_of_seed = [&](int seed) {
    json c = config;
    c["seed"] = seed;
    return Model::from_config(c).weights();
  };
  const NamedTensors w1 = weights_of_seed(11), w2 = weights_of_seed(12);
  EarlyStoppingOptions o;
  o.patience = 5;
  o.restore_best_weights = true;
  EarlyStopping es(o);
  es.set_model(&model);
  es.on_train_begin({});
  Logs l0{{"val_loss", 1.0}}, l1{{"val_loss", 0.5}}, l2{{"val_loss", 0.7}};
  es.on_epoch_end(0, l0);
  model.set_weights(w1);
  es.on_epoch_end(1, l1);  // best
  model.set_weights(w2);
  es.on_epoch_end(2, l2);  // wait 1 of 5: training goes on to its end
  EXPECT_FALSE(model.stop_training());
  expect_same_weights(model.weights(), w2);
  es.on_train_end({});
  EXPECT_EQ(es.best_epoch(), 1);
  expect_same_weights(model.weights(), w1);
}

TEST(EarlyStopping, OverfittingRunStopsEarlyAndRestoresTheBestWeights) {
  Tensor x, y, xv, yv;
  noise(16, 5, 4, x, y);
  noise(200, 6, 4, xv, yv);
  json config = classifier(adam(0.05), 64);
  Model model = Model::from_config(config);
  EarlyStoppingOptions eo;
  eo.patience = 2;
  eo.restore_best_weights = true;
  auto es = std::make_shared<EarlyStopping>(eo);
  FitOptions o = quiet(20, 16);
  o.callbacks = {es};
  const History h = model.fit(x, y, o, &xv, &yv);
  ASSERT_LT(h.epochs.size(), 20u) << "validation loss kept improving on noise";
  const int stopped = static_cast<int>(h.epochs.size()) - 1;
  EXPECT_EQ(es->stopped_epoch(), stopped);
  // The best epoch is the argmin of val_loss and exactly patience epochs before the stop.
  int best = 0;
  for (int e = 0; e < static_cast<int>(h.epochs.size()); ++e)
    if (h.epochs[e].at("val_loss") < h.epochs[best].at("val_loss")) best = e;
  EXPECT_EQ(es->best_epoch(), best);
  EXPECT_EQ(stopped - best, 2);
  // restore_best_weights: the model now evaluates to the best epoch's val_loss.
  EXPECT_NEAR(model.evaluate(xv, yv).loss, h.epochs[best].at("val_loss"), 1e-6);
}

// ---- ModelCheckpoint and save/load -------------------------------------------------------------

TEST(ModelCheckpoint, FormatsFilepathsAsPython) {
  EXPECT_EQ(format_filepath("ckpt-{epoch:02d}-{val_loss:.2f}", {{"epoch", 3}, {"val_loss", 0.4567}}),
            "ckpt-03-0.46");
  EXPECT_EQ(format_filepath("w.{epoch}-{loss:.3e}{{x}}", {{"epoch", 12}, {"loss", 0.00123}}),
            "w.12-1.230e-03{x}");
  EXPECT_EQ(format_filepath("{loss:8.3f}|{epoch:4d}", {{"epoch", 7}, {"loss", 2.5}}),
            "   2.500|   7");
  // The rest of Python's format-spec grammar (fill, alignment, sign), as fmt implements it:
  // '{:>4d}'.format(7), '{:+.1f}'.format(2.5), '{:*<6.2f}'.format(2.5) in Python.
  EXPECT_EQ(format_filepath("{epoch:>4d}|{loss:+.1f}|{loss:*<6.2f}", {{"epoch", 7}, {"loss", 2.5}}),
            "   7|+2.5|2.50**");
  expect_error([] { format_filepath("{val_acc}", {{"epoch", 1}}); }, ErrorKind::kInvalidArgument,
               {"{val_acc}", "epoch"});
  expect_error([] { format_filepath("{epoch:x}", {{"epoch", 1}}); },
               ErrorKind::kInvalidArgument, {"'x'"});
  expect_error([] { format_filepath("{loss:d}", {{"loss", 0.5}}); }, ErrorKind::kInvalidArgument,
               {"integer"});
}

TEST(ModelCheckpoint, SavesModelDirectoriesNamedFromTheLogs) {
  TempDir dir;
  auto [x, y, xv, yv] = train_and_validation(12, 8);
  Model model = Model::from_config(classifier(adam()));
  ModelCheckpointOptions co;
  co.filepath = (dir / "ckpt-{epoch:02d}-{val_loss:.2f}").string();
  auto all = std::make_shared<ModelCheckpoint>(co);
  co.filepath = (dir / "best").string();
  co.save_best_only = true;
  auto best = std::make_shared<ModelCheckpoint>(co);
  FitOptions o = quiet(3);
  o.callbacks = {all, best};
  const History h = model.fit(x, y, o, &xv, &yv);
  ASSERT_EQ(all->saved().size(), 3u);
  for (int e = 0; e < 3; ++e) {
    char name[64];
    std::snprintf(name, sizeof name, "ckpt-%02d-%.2f", e + 1, h.epochs[e].at("val_loss"));
    EXPECT_EQ(all->saved()[e], (dir / name).string());
    for (const char* f : {"model.json", "weights.safetensors", "optimizer.safetensors", "state.json"})
      EXPECT_TRUE(fs::exists(dir / name / f)) << name << "/" << f;
    const json state = json::parse(read_text(dir / name / "state.json"));
    EXPECT_EQ(state["epoch"], e + 1);
    EXPECT_EQ(state["step"], 3 * (e + 1));
    EXPECT_DOUBLE_EQ(state["learning_rate"].get<double>(), 0.01);
  }
  // The last checkpoint holds the final weights; loaded, it predicts identically.
  Model loaded = Model::load(all->saved().back());
  expect_same_weights(loaded.weights(), model.weights());
  EXPECT_EQ(loaded.epochs_done(), 3);
  EXPECT_EQ(loaded.steps_done(), 9);
  // save_best_only saved once per improvement of val_loss.
  std::size_t improvements = 0;
  double b = INFINITY;
  for (const auto& l : h.epochs)
    if (l.at("val_loss") < b) b = l.at("val_loss"), ++improvements;
  EXPECT_EQ(best->saved().size(), improvements);
  EXPECT_DOUBLE_EQ(best->best(), b);
}

TEST(ModelCheckpoint, InitialValueThresholdAndMaxMode) {
  TempDir dir;
  Model model = Model::from_config(classifier(adam()));
  ModelCheckpointOptions co;
  co.filepath = (dir / "c{epoch}").string();
  co.save_best_only = true;
  co.initial_value_threshold = 0.5;
  ModelCheckpoint cp(co);
  cp.set_model(&model);
  cp.on_train_begin({});
  for (int e = 0; e < 3; ++e) {
    Logs l{{"val_loss", std::vector<double>{0.6, 0.4, 0.45}[e]}};
    cp.on_epoch_end(e, l);
  }
  EXPECT_EQ(cp.saved(), std::vector<std::string>{(dir / "c2").string()});
  co.monitor = "val_accuracy";  // auto: max
  co.initial_value_threshold.reset();
  ModelCheckpoint acc(co);
  acc.set_model(&model);
  acc.on_train_begin({});
  for (int e = 0; e < 3; ++e) {
    Logs l{{"val_accuracy", std::vector<double>{0.6, 0.4, 0.7}[e]}};
    acc.on_epoch_end(e, l);
  }
  EXPECT_EQ(acc.saved(), (std::vector<std::string>{(dir / "c1").string(), (dir / "c3").string()}));
}

TEST(ModelCheckpoint, SaveFreqInBatchesAndWeightsOnly) {
  TempDir dir;
  Tensor x, y;
  separable(12, 1, x, y);
  Model model = Model::from_config(classifier(adam()));
  ModelCheckpointOptions co;
  co.filepath = (dir / "b-{epoch}-{batch}").string();
  co.save_freq = 2;
  co.save_weights_only = true;
  auto cp = std::make_shared<ModelCheckpoint>(co);
  FitOptions o = quiet(2);  // 3 batches per epoch: saves after global batches 2, 4, 6
  o.callbacks = {cp};
  model.fit(x, y, o);
  EXPECT_EQ(cp->saved(), (std::vector<std::string>{(dir / "b-1-2").string(), (dir / "b-2-1").string(),
                                                   (dir / "b-2-3").string()}));
  EXPECT_TRUE(fs::exists(dir / "b-2-3" / "weights.safetensors"));
  EXPECT_FALSE(fs::exists(dir / "b-2-3" / "model.json"));
}

TEST(ModelCheckpoint, UnwritableDirectoryIsReportedBeforeTraining) {
  TempDir dir;
  std::ofstream(dir / "file") << "x";
  Tensor x, y;
  separable(12, 1, x, y);
  Model model = Model::from_config(classifier(adam()));
  ModelCheckpointOptions co;
  co.filepath = (dir / "file" / "sub" / "ckpt-{epoch}").string();
  FitOptions o = quiet(2);
  o.callbacks = {std::make_shared<ModelCheckpoint>(co)};
  expect_error([&] { model.fit(x, y, o); }, ErrorKind::kUnavailable, {"sub"});
  EXPECT_EQ(model.steps_done(), 0);
}

void expect_exact_resume(const json& config) {
  TempDir dir;
  Tensor x, y;
  separable(20, 1, x, y);
  Model full = Model::from_config(config);
  full.fit(x, y, quiet(4));

  Model half = Model::from_config(config);
  half.fit(x, y, quiet(2));
  half.save((dir / "saved").string());
  Model resumed = Model::load((dir / "saved").string());
  FitOptions o = quiet(4);
  o.initial_epoch = resumed.epochs_done();
  EXPECT_EQ(o.initial_epoch, 2);
  resumed.fit(x, y, o);
  expect_same_weights(resumed.weights(), full.weights());

  // Without the optimizer state the continuation differs (the test can tell).
  Model fresh = Model::from_parts(config, Model::load((dir / "saved").string()).weights());
  fresh.fit(x, y, o);
  EXPECT_FALSE(same_weights(fresh.weights(), full.weights()));
}

TEST(ModelSave, FitResumesExactlyWithAdamState) { expect_exact_resume(classifier(adam(), 16, true)); }

TEST(ModelSave, FitResumesExactlyWithSgdMomentumState) {
  expect_exact_resume(
      classifier({{"type", "SGD"}, {"learning_rate", 0.1}, {"momentum", 0.9}}, 16, true));
}

TEST(ModelSave, FitResumesExactlyWithAdamWState) {
  expect_exact_resume(classifier(
      {{"type", "AdamW"}, {"learning_rate", 0.01}, {"weight_decay", 0.05}}, 16, true));
}

TEST(ModelSave, FitResumesExactlyWithCenteredRmspropMomentumState) {
  // All three RMSprop slots: velocity, momentum, average_gradient.
  expect_exact_resume(classifier({{"type", "RMSprop"}, {"learning_rate", 0.01}, {"momentum", 0.5},
                                  {"centered", true}}, 16, true));
}

TEST(ModelSave, CheckpointOfAnotherArchitectureIsRefused) {
  TempDir dir;
  Model untrained = Model::from_config(classifier(adam(), 16));
  untrained.save((dir / "a").string());
  expect_same_weights(Model::load((dir / "a").string()).weights(), untrained.weights());
  Model other = Model::from_config(classifier(adam(), 8));
  expect_error([&] { other.load_state((dir / "a").string()); }, ErrorKind::kInvalidArgument,
               {"another architecture", "\"units\":16", "\"units\":8"});
  Model sgd = Model::from_config(classifier({{"type", "SGD"}}, 16));
  expect_error([&] { sgd.load_state((dir / "a").string()); }, ErrorKind::kInvalidArgument,
               {"adam", "sgd"});
  expect_error([&] { Model::load((dir / "missing").string()); }, ErrorKind::kUnavailable,
               {"model.json"});
}

TEST(ModelSave, PartsRoundTripInMemoryAsTheDirectoryDoes) {
  TempDir dir;
  Tensor x, y;
  separable(12, 1, x, y);
  Model trained = Model::from_config(classifier(adam(), 16));
  trained.fit(x, y, quiet(2));
  const ModelParts parts = trained.to_parts();
  std::vector<std::string> names;
  for (const auto& [name, bytes] : parts) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"model.json", "optimizer.safetensors", "state.json",
                                             "weights.safetensors"}));
  // save() writes exactly these bytes.
  trained.save((dir / "saved").string());
  for (const auto& [name, bytes] : parts) EXPECT_EQ(read_file_bytes(dir / "saved" / name), bytes) << name;
  const Model back = Model::from_parts(parts, "memory");
  expect_same_weights(back.weights(), trained.weights());
  EXPECT_EQ(back.epochs_done(), 2);
  EXPECT_EQ(back.steps_done(), trained.steps_done());
  EXPECT_EQ(back.to_parts(), parts);  // optimizer slots and state.json included
  ModelParts no_state = parts;
  no_state.erase("state.json");
  expect_error([&] { Model::from_parts(no_state, "memory"); }, ErrorKind::kDataLoss,
               {"memory/state.json is missing"});
}

// ---- BackupAndRestore ------------------------------------------------------------------------

json backup_config() { return classifier(adam(), 16, true); }

FitOptions backup_fit(const std::string& backup_dir, std::shared_ptr<Callback> extra = nullptr) {
  FitOptions o = quiet(6);
  o.callbacks = {std::make_shared<BackupAndRestore>(backup_dir)};
  if (extra) o.callbacks.push_back(extra);
  return o;
}

// The child of BackupAndRestore.SigkilledRunResumesToTheSameWeights (run as a separate
// process with TENSORHUB_BACKUP_CHILD=<backup dir>): trains with a backup and SIGKILLs itself
// at the end of epoch 2, after the backup was written.
TEST(BackupAndRestoreChild, TrainsAndIsKilled) {
  const char* dir = std::getenv("TENSORHUB_BACKUP_CHILD");
  if (!dir) GTEST_SKIP() << "runs only as the child process of the SIGKILL test";
  Tensor x, y;
  separable(20, 1, x, y);
  Model model = Model::from_config(backup_config());
  auto killer = std::make_shared<LambdaCallback>();
  killer->epoch_end = [](int epoch, Logs&) {
    if (epoch == 2) ::raise(SIGKILL);
  };
  model.fit(x, y, backup_fit(dir, killer));
  ADD_FAILURE() << "not killed";
}

TEST(BackupAndRestore, SigkilledRunResumesToTheSameWeights) {
  TempDir dir;
  const std::string backup = (dir / "backup").string();
  Tensor x, y;
  separable(20, 1, x, y);
  Model full = Model::from_config(backup_config());
  full.fit(x, y, quiet(6));

  // The child execs a fresh process image (libtorch's thread pools do not survive fork);
  // its environment is built before fork, as only async-signal-safe calls may follow it.
  std::vector<std::string> env_strings = {"TENSORHUB_BACKUP_CHILD=" + backup};
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "TENSORHUB_BACKUP_CHILD=", 23) != 0) env_strings.push_back(*e);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  char arg0[] = "train_tests";
  char filter[] = "--gtest_filter=BackupAndRestoreChild.TrainsAndIsKilled";
  char* argv[] = {arg0, filter, nullptr};
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::execve("/proc/self/exe", argv, envp.data());
    ::_exit(127);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << "child exited with " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  const json state = json::parse(read_text(fs::path(backup) / "chief" / "state.json"));
  EXPECT_EQ(state["epoch"], 3);

  Model model = Model::from_config(backup_config());
  FitOptions o = backup_fit(backup);
  auto bar = std::static_pointer_cast<BackupAndRestore>(o.callbacks[0]);
  const History h = model.fit(x, y, o);
  EXPECT_EQ(bar->restored_epoch(), 3);
  EXPECT_EQ(h.epochs.size(), 3u);  // epochs 3, 4, 5
  expect_same_weights(model.weights(), full.weights());
  EXPECT_FALSE(fs::exists(backup)) << "the backup is deleted after a successful run";
}

// ---- TerminateOnNaN, CSVLogger, schedulers, progress bar --------------------------------------

TEST(TerminateOnNaN, StopsAtTheBatchWithAnInvalidLoss) {
  Tensor x, y;
  separable(12, 1, x, y);
  reinterpret_cast<float*>(x.data.data())[4 * 9 + 1] = NAN;  // example 9: batch 2 unshuffled
  Model model = Model::from_config(classifier(adam()));
  auto t = std::make_shared<TerminateOnNaN>();
  FitOptions o = quiet(3);
  o.shuffle = false;
  o.callbacks = {t};
  ::testing::internal::CaptureStderr();
  const History h = model.fit(x, y, o);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(t->terminated_batch(), 2);
  EXPECT_NE(err.find("Batch 2: Invalid loss, terminating training"), std::string::npos) << err;
  EXPECT_EQ(h.epochs.size(), 1u);
  EXPECT_EQ(model.steps_done(), 3);
}

TEST(CSVLogger, WritesSortedColumnsAndAppends) {
  TempDir dir;
  const std::string path = (dir / "log.csv").string();
  Model model = Model::from_config(classifier(adam()));
  {
    CSVLogger csv(path);
    csv.set_model(&model);
    csv.on_train_begin({});
    Logs l0{{"loss", 0.5}, {"accuracy", 0.75}}, l1{{"loss", 0.25}, {"accuracy", 1.0}};
    csv.on_epoch_end(0, l0);
    csv.on_epoch_end(1, l1);
    csv.on_train_end({});
  }
  EXPECT_EQ(read_text(path), "epoch,accuracy,loss\n0,0.75,0.5\n1,1,0.25\n");
  {
    CSVLogger csv(path, ';', /*append=*/true);
    csv.on_train_begin({});
    Logs l2{{"loss", 0.125}, {"accuracy", 1.0}};
    csv.on_epoch_end(2, l2);
    csv.on_train_end({});
  }
  EXPECT_EQ(read_text(path), "epoch,accuracy,loss\n0,0.75,0.5\n1,1,0.25\n2;1;0.125\n");

  // From a real fit: rows hold the history's values exactly.
  auto [x, y, xv, yv] = train_and_validation(12, 6);
  FitOptions o = quiet(2);
  o.callbacks = {std::make_shared<CSVLogger>(path)};
  const History h = model.fit(x, y, o, &xv, &yv);
  std::istringstream lines(read_text(path));
  std::string line;
  std::getline(lines, line);
  EXPECT_EQ(line, "epoch,accuracy,loss,val_accuracy,val_loss");
  for (int e = 0; e < 2; ++e) {
    ASSERT_TRUE(std::getline(lines, line));
    double ep, acc, loss, vacc, vloss;
    ASSERT_EQ(std::sscanf(line.c_str(), "%lf,%lf,%lf,%lf,%lf", &ep, &acc, &loss, &vacc, &vloss), 5);
    EXPECT_EQ(ep, e);
    EXPECT_EQ(loss, h.epochs[e].at("loss"));
    EXPECT_EQ(vloss, h.epochs[e].at("val_loss"));
    EXPECT_EQ(acc, h.epochs[e].at("accuracy"));
  }
}

TEST(LearningRateScheduler, SetsTheRateEachEpochAndLogsIt) {
  Tensor x, y;
  separable(8, 1, x, y);
  Model model = Model::from_config(classifier({{"type", "SGD"}, {"learning_rate", 0.08}}));
  std::vector<std::pair<int, double>> asked;
  FitOptions o = quiet(4);
  o.callbacks = {std::make_shared<LearningRateScheduler>([&](int epoch, double lr) {
    asked.emplace_back(epoch, lr);
    return epoch < 1 ? lr : lr * 0.5;
  })};
  const History h = model.fit(x, y, o);
  EXPECT_EQ(asked, (std::vector<std::pair<int, double>>{{0, 0.08}, {1, 0.08}, {2, 0.04}, {3, 0.02}}));
  const double want[] = {0.08, 0.04, 0.02, 0.01};
  for (int e = 0; e < 4; ++e) EXPECT_DOUBLE_EQ(h.epochs[e].at("lr"), want[e]) << e;
  EXPECT_DOUBLE_EQ(model.learning_rate(), 0.01);
}

TEST(ReduceLROnPlateau, HandComputedSequenceWithCooldownAndMinLr) {
  Model model = Model::from_config(classifier(adam(0.01)));
  ReduceLROnPlateauOptions ro;
  ro.factor = 0.5;
  ro.patience = 2;
  ro.cooldown = 1;
  ro.min_lr = 0.002;
  ReduceLROnPlateau r(ro);
  r.set_model(&model);
  r.on_train_begin({});
  std::vector<double> lrs, logged;
  for (int e = 0; e < 9; ++e) {
    Logs logs{{"val_loss", 1.0}};
    r.on_epoch_end(e, logs);
    logged.push_back(logs.at("lr"));
    lrs.push_back(model.learning_rate());
  }
  const std::vector<double> want = {0.01, 0.01, 0.005, 0.005, 0.0025, 0.0025, 0.002, 0.002, 0.002};
  for (int e = 0; e < 9; ++e) EXPECT_DOUBLE_EQ(lrs[e], want[e]) << e;
  EXPECT_DOUBLE_EQ(logged[2], 0.01);  // "lr" is the rate the epoch ran with
  // Improvements by more than min_delta reset the wait; smaller ones do not.
  Model m2 = Model::from_config(classifier(adam(0.01)));
  ReduceLROnPlateauOptions r2o;
  r2o.patience = 1;
  ReduceLROnPlateau r2(r2o);
  r2.set_model(&m2);
  r2.on_train_begin({});
  for (double v : {1.0, 0.9, 0.89995}) {  // the last is not better by 1e-4
    Logs logs{{"val_loss", v}};
    r2.on_epoch_end(0, logs);
  }
  EXPECT_DOUBLE_EQ(m2.learning_rate(), 0.001);
  expect_error([] { ReduceLROnPlateauOptions bad; bad.factor = 1.0; ReduceLROnPlateau x(bad); },
               ErrorKind::kInvalidArgument, {"factor"});
}

TEST(ProgressBar, PrintsOneLinePerEpochWhenNotATerminal) {
  Tensor x, y;
  separable(12, 1, x, y);
  Model model = Model::from_config(classifier(adam()));
  FitOptions o = quiet(2);
  o.verbose = 2;
  ::testing::internal::CaptureStderr();
  model.fit(x, y, o);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("Epoch 1/2 3/3 - "), std::string::npos) << err;
  EXPECT_NE(err.find("Epoch 2/2 3/3 - "), std::string::npos) << err;
  EXPECT_NE(err.find(" - loss: "), std::string::npos) << err;
  EXPECT_EQ(err.find('\r'), std::string::npos);
}

// ---- TensorBoard and HubLogger -----------------------------------------------------------------

struct Scalar {
  std::string tag;
  std::int64_t step;
  float value;
};

void read_events(const fs::path& dir, std::vector<Scalar>& scalars,
                 std::vector<std::pair<std::string, std::int64_t>>& histograms) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path());
  ASSERT_EQ(files.size(), 1u) << dir;
  EXPECT_EQ(files[0].filename().string().rfind("events.out.tfevents.", 0), 0u);
  for (const std::string& record : read_tfrecord_file(files[0])) {
    tf::Event ev;
    ASSERT_TRUE(ev.ParseFromString(record));
    if (!ev.has_summary()) continue;
    for (const auto& v : ev.summary().value()) {
      if (v.has_histo())
        histograms.emplace_back(v.tag(), ev.step());
      else
        scalars.push_back({v.tag(), ev.step(), v.simple_value()});
    }
  }
}

const Scalar* find_scalar(const std::vector<Scalar>& s, const std::string& tag, std::int64_t step) {
  for (const auto& x : s)
    if (x.tag == tag && x.step == step) return &x;
  return nullptr;
}

TEST(TensorBoard, WritesEpochScalarsValidationAndHistograms) {
  TempDir dir;
  auto [x, y, xv, yv] = train_and_validation(12, 6);
  Model model = Model::from_config(classifier(adam()));
  TensorBoardOptions to;
  to.log_dir = (dir / "logs").string();
  to.histogram_freq = 1;
  to.update_freq = 2;
  auto batches = std::make_shared<LambdaCallback>();
  std::vector<double> batch_losses;
  batches->batch_end = [&](std::int64_t, const Logs& l) { batch_losses.push_back(l.at("loss")); };
  FitOptions o = quiet(3);
  o.callbacks = {std::make_shared<TensorBoard>(to), batches};
  const History h = model.fit(x, y, o, &xv, &yv);

  std::vector<Scalar> train, val;
  std::vector<std::pair<std::string, std::int64_t>> train_h, val_h;
  read_events(dir / "logs" / "train", train, train_h);
  read_events(dir / "logs" / "validation", val, val_h);
  for (int e = 0; e < 3; ++e) {
    const Scalar* s = find_scalar(train, "epoch_loss", e);
    ASSERT_TRUE(s) << e;
    EXPECT_EQ(s->value, static_cast<float>(h.epochs[e].at("loss")));
    ASSERT_TRUE(s = find_scalar(train, "epoch_accuracy", e));
    EXPECT_EQ(s->value, static_cast<float>(h.epochs[e].at("accuracy")));
    ASSERT_TRUE(s = find_scalar(train, "epoch_learning_rate", e));
    EXPECT_EQ(s->value, 0.01f);
    ASSERT_TRUE(s = find_scalar(val, "epoch_loss", e));
    EXPECT_EQ(s->value, static_cast<float>(h.epochs[e].at("val_loss")));
    ASSERT_TRUE(s = find_scalar(val, "epoch_accuracy", e));
    EXPECT_EQ(s->value, static_cast<float>(h.epochs[e].at("val_accuracy")));
    for (const char* w : {"dense.weight", "dense.bias", "dense_1.weight", "dense_1.bias"})
      EXPECT_NE(std::find(train_h.begin(), train_h.end(), std::make_pair(std::string(w), std::int64_t{e})),
                train_h.end()) << w << " at " << e;
  }
  EXPECT_EQ(find_scalar(val, "epoch_val_loss", 0), nullptr);
  // update_freq 2: batch scalars at global batches 2, 4, 6 (of 9).
  ASSERT_EQ(batch_losses.size(), 9u);
  for (std::int64_t g : {2, 4, 6, 8}) {
    const Scalar* s = find_scalar(train, "batch_loss", g);
    ASSERT_TRUE(s) << g;
    EXPECT_EQ(s->value, static_cast<float>(batch_losses[g - 1]));
  }
  EXPECT_EQ(find_scalar(train, "batch_loss", 3), nullptr);
  EXPECT_TRUE(val_h.empty());
}

// A run directory as TensorBoard shows it: every event file in name order (TensorBoard's
// directory watcher reads them so), each event in file order, and TensorBoard's restart rule
// (event_accumulator._CheckForRestartAndMaybePurge, applied once a file_version of 2 or more
// was read): a SessionLog START at step s drops every scalar read before it whose step is
// >= s. `raw` keeps every scalar, to show what the purge removed.
struct RunView {
  std::vector<Scalar> scalars, raw;
  std::vector<std::pair<std::string, std::int64_t>> starts;  // (file name, step) of each START
};

RunView tensorboard_view(const fs::path& run) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(run)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  RunView view;
  double file_version = 0;
  for (const auto& f : files) {
    for (const std::string& record : read_tfrecord_file(f)) {
      tf::Event ev;
      EXPECT_TRUE(ev.ParseFromString(record)) << f;
      if (ev.what_case() == tf::Event::kFileVersion)
        file_version = std::stod(ev.file_version().substr(ev.file_version().find(':') + 1));
      if (ev.has_session_log() && ev.session_log().status() == tf::SessionLog::START) {
        view.starts.emplace_back(f.filename().string(), ev.step());
        if (file_version >= 2)
          std::erase_if(view.scalars, [&](const Scalar& s) { return s.step >= ev.step(); });
      }
      if (!ev.has_summary()) continue;
      for (const auto& v : ev.summary().value()) {
        if (v.has_histo()) continue;
        view.scalars.push_back({v.tag(), ev.step(), v.simple_value()});
        view.raw.push_back(view.scalars.back());
      }
    }
  }
  return view;
}

// The (step, value) series of `tag`, in the order TensorBoard keeps it.
std::vector<std::pair<std::int64_t, float>> series(const std::vector<Scalar>& scalars, const std::string& tag) {
  std::vector<std::pair<std::int64_t, float>> out;
  for (const auto& s : scalars)
    if (s.tag == tag) out.emplace_back(s.step, s.value);
  return out;
}

std::vector<std::pair<std::int64_t, float>> expected_series(const std::vector<std::pair<int, const Logs*>>& epochs,
                                                            const std::string& key) {
  std::vector<std::pair<std::int64_t, float>> out;
  for (const auto& [epoch, logs] : epochs) out.emplace_back(epoch, static_cast<float>(logs->at(key)));
  return out;
}

TEST(TensorBoard, ResumedFitReplacesTheStalePointsInTensorBoard) {
  // A fit of 4 epochs, then a fit resumed at epoch 2 up to 5 (Hyperband's promotion and
  // Model::load + initial_epoch do this) into the same log_dir, by another model so that its
  // values differ. After TensorBoard's purge the epoch series are exactly epochs 0..4: 0 and
  // 1 from the first fit, 2..4 from the resumed one.
  TempDir dir;
  auto [x, y, xv, yv] = train_and_validation(12, 6);
  TensorBoardOptions to;
  to.log_dir = (dir / "logs").string();

  Model first = Model::from_config(classifier(adam()));
  FitOptions o1 = quiet(4);
  o1.callbacks = {std::make_shared<TensorBoard>(to)};
  const History h1 = first.fit(x, y, o1, &xv, &yv);

  json other = classifier(adam(0.05), 8);
  other["seed"] = 11;
  Model resumed = Model::from_config(other);
  FitOptions o2 = quiet(5);
  o2.initial_epoch = 2;
  o2.callbacks = {std::make_shared<TensorBoard>(to)};
  const History h2 = resumed.fit(x, y, o2, &xv, &yv);
  ASSERT_EQ(h2.epochs.size(), 3u);

  const std::vector<std::pair<int, const Logs*>> want = {
      {0, &h1.epochs[0]}, {1, &h1.epochs[1]}, {2, &h2.epochs[0]}, {3, &h2.epochs[1]}, {4, &h2.epochs[2]}};
  for (const char* run : {"train", "validation"}) {
    SCOPED_TRACE(run);
    const RunView view = tensorboard_view(dir / "logs" / run);
    const std::string prefix = std::string(run) == "train" ? "" : "val_";
    // One START per fit, at the step of the fit's first epoch.
    ASSERT_EQ(view.starts.size(), 2u);
    EXPECT_EQ(view.starts[0].second, 0);
    EXPECT_EQ(view.starts[1].second, 2);
    EXPECT_LT(view.starts[0].first, view.starts[1].first) << "the resumed fit's file must sort last";
    for (const char* metric : {"loss", "accuracy"}) {
      const std::string tag = std::string("epoch_") + metric;
      EXPECT_EQ(series(view.scalars, tag), expected_series(want, prefix + metric)) << tag;
      // Without the purge TensorBoard would draw 4 + 3 points, going back at step 2.
      EXPECT_EQ(series(view.raw, tag).size(), 7u) << tag;
    }
    // The first fit's values at 2 and 3 differ from the resumed ones, so the check above
    // tells which fit a point came from.
    EXPECT_NE(static_cast<float>(h1.epochs[2].at(prefix + "loss")), static_cast<float>(h2.epochs[0].at(prefix + "loss")));
  }
  const RunView train = tensorboard_view(dir / "logs" / "train");
  EXPECT_EQ(series(train.scalars, "epoch_learning_rate"),
            (std::vector<std::pair<std::int64_t, float>>{{0, 0.01f}, {1, 0.01f}, {2, 0.05f}, {3, 0.05f}, {4, 0.05f}}));
}

TEST(TensorBoard, BackupAndRestoreResumeDropsTheCrashedEpochsPoints) {
  // A run crashes after TensorBoard wrote epoch 3 but before the backup of epoch 3 was taken;
  // BackupAndRestore resumes at epoch 3 (it sets the epoch in its on_train_begin, after
  // TensorBoard's), so TensorBoard's point at 3 is stale and must give way to the rerun's.
  TempDir dir;
  Tensor x, y;
  separable(20, 1, x, y);
  TensorBoardOptions to;
  to.log_dir = (dir / "logs").string();
  to.update_freq = 1;
  const std::string backup = (dir / "backup").string();
  std::vector<Logs> crashed;
  auto crash = std::make_shared<LambdaCallback>();
  crash->epoch_end = [&](int epoch, Logs& logs) {
    crashed.push_back(logs);
    if (epoch == 3) throw std::runtime_error("crash at the end of epoch 3");
  };
  {
    Model model = Model::from_config(backup_config());
    FitOptions o = quiet(6);
    o.callbacks = {std::make_shared<TensorBoard>(to), crash, std::make_shared<BackupAndRestore>(backup)};
    EXPECT_THROW(model.fit(x, y, o), std::runtime_error);
  }
  ASSERT_EQ(crashed.size(), 4u);
  Model model = Model::from_config(backup_config());
  FitOptions o = quiet(6);
  auto bar = std::make_shared<BackupAndRestore>(backup);
  o.callbacks = {std::make_shared<TensorBoard>(to), bar};
  const History h = model.fit(x, y, o);
  ASSERT_EQ(bar->restored_epoch(), 3);

  const RunView view = tensorboard_view(dir / "logs" / "train");
  ASSERT_EQ(view.starts.size(), 2u);
  EXPECT_EQ(view.starts[1].second, 3);
  const std::vector<std::pair<int, const Logs*>> want = {
      {0, &crashed[0]}, {1, &crashed[1]}, {2, &crashed[2]}, {3, &h.epochs[0]}, {4, &h.epochs[1]}, {5, &h.epochs[2]}};
  EXPECT_EQ(series(view.scalars, "epoch_loss"), expected_series(want, "loss"));
  EXPECT_EQ(series(view.raw, "epoch_loss").size(), 7u);
  // Batch scalars (5 batches an epoch) continue at global batch 3 * 5 + 1 = 16 after the
  // resume. The START at step 3 also drops the crashed run's batch points 3..15 (train/ holds
  // epoch and batch steps, as in Keras; the documented limit of update_freq > 0): 1, 2, then
  // the rerun's 16..30.
  EXPECT_EQ(series(view.raw, "batch_loss").size(), 20u + 15u);
  std::vector<std::int64_t> steps, want_steps = {1, 2};
  for (const auto& [step, value] : series(view.scalars, "batch_loss")) steps.push_back(step);
  for (std::int64_t s = 16; s <= 30; ++s) want_steps.push_back(s);
  EXPECT_EQ(steps, want_steps);
}

TEST(HubLogger, SavesTrainingAndValidationLogsWithTags) {
  TempDir dir;
  const std::string uri = "sqlite://" + (dir / "hub.db").string();
  auto [x, y, xv, yv] = train_and_validation(12, 6);
  Model model = Model::from_config(classifier(adam()));
  FitOptions o = quiet(2);
  o.callbacks = {std::make_shared<HubLogger>(uri, "cb", json{{"run", "r1"}})};
  const History h = model.fit(x, y, o, &xv, &yv);
  Hub hub(uri, "cb");
  const auto train = hub.find_training_logs();
  const auto val = hub.find_validation_logs();
  ASSERT_EQ(train.size(), 2u);
  ASSERT_EQ(val.size(), 2u);
  for (int e = 0; e < 2; ++e) {
    EXPECT_EQ(train[e].tags["run"], "r1");
    EXPECT_EQ(train[e].tags["epoch"], e);
    EXPECT_DOUBLE_EQ(train[e].tags["loss"].get<double>(), h.epochs[e].at("loss"));
    EXPECT_DOUBLE_EQ(train[e].tags["accuracy"].get<double>(), h.epochs[e].at("accuracy"));
    EXPECT_FALSE(train[e].tags.contains("val_loss"));
    EXPECT_DOUBLE_EQ(val[e].tags["loss"].get<double>(), h.epochs[e].at("val_loss"));
    EXPECT_EQ(val[e].tags["run"], "r1");
  }
}

}  // namespace
}  // namespace tensorhub
