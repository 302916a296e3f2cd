// Tests of tensorhub::Model: hand-computed outputs, training on a separable problem,
// weights round trips, seeding, and the InvalidArgument messages of bad configs.
#include "tensorhub/train/model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "tensorhub/core/error.h"
#include "tensorhub/train/callbacks.h"
#include "test_util.h"
#include "train_test_data.h"

namespace tensorhub {
namespace {

using nlohmann::json;

using testing::expect_error;  // tests/test_util.h

using testing::f32;
using testing::i64;
using testing::values;
// Dense 3 -> 2, no activation: W = [[1, 2, 3], [-1, 0, 0.5]], b = [0.5, -1].
json dense_config() {
  return {{"input_shape", {3}}, {"layers", {{{"type", "Dense"}, {"units", 2}}}}};
}
NamedTensors dense_weights() {
  return {{"dense.weight", f32({2, 3}, {1, 2, 3, -1, 0, 0.5f})},
          {"dense.bias", f32({2}, {0.5f, -1})}};
}

TEST(ModelPredict, DenseWithHandSetWeights) {
  const Model m = Model::from_parts(dense_config(), dense_weights());
  const Tensor out = m.predict(f32({2, 3}, {1, 1, 1, 2, 0, -2}));
  EXPECT_EQ(out.dtype, DType::kF32);
  EXPECT_EQ(out.shape, (std::vector<std::int64_t>{2, 2}));
  // Row 0: 1+2+3+0.5 = 6.5, -1+0+0.5-1 = -1.5. Row 1: 2+0-6+0.5 = -3.5, -2+0-1-1 = -4.
  EXPECT_EQ(values(out), (std::vector<float>{6.5f, -1.5f, -3.5f, -4.0f}));
}

// TF Serving's half_plus_two as Keras builds it: Input(shape=()) -> Rescaling(0.5, offset=2),
// an inference-only model ("loss": null). Values from TF Serving's REST API documentation.
TEST(ModelPredict, RescalingOfScalarsIsHalfPlusTwo) {
  const json config = {{"input_shape", json::array()},
                       {"loss", nullptr},
                       {"layers", {{{"type", "Rescaling"}, {"scale", 0.5}, {"offset", 2.0}}}}};
  const Model m = Model::from_config(config);
  const Tensor out = m.predict(f32({3}, {1.0f, 2.0f, 5.0f}));
  EXPECT_EQ(out.shape, (std::vector<std::int64_t>{3}));
  EXPECT_EQ(values(out), (std::vector<float>{2.5f, 3.0f, 4.5f}));
  EXPECT_TRUE(m.weights().empty());
  expect_error([&] { m.evaluate(f32({3}, {1, 2, 3}), i64({0, 1, 0})); }, ErrorKind::kFailedPrecondition,
               {"inference only"});
  // A classifier still needs [classes] outputs.
  expect_error([&] { Model::from_config({{"input_shape", json::array()},
                                         {"layers", {{{"type", "Rescaling"}, {"scale", 0.5}}}}}); },
               ErrorKind::kInvalidArgument, {"sparse_categorical_crossentropy needs [classes]"});
  expect_error([&] { Model::from_config({{"input_shape", json::array()},
                                         {"layers", {{{"type", "Dense"}, {"units", 1}}}}}); },
               ErrorKind::kInvalidArgument, {"not scalars"});
}

TEST(ModelPredict, ReluThenSoftmaxWithDropoutOffAndFlatten) {
  // Input [1, 3] -> Flatten -> Dense(2, relu) (W, b above) -> Dropout 0.5 (identity in
  // inference) -> Dense(2, softmax) with W2 = [[1, 1], [0, -1]], b2 = [0, 0].
  const json config = {
      {"layers",
       {{{"type", "Input"}, {"shape", {1, 3}}},
        {{"type", "Flatten"}},
        {{"type", "Dense"}, {"units", 2}, {"activation", "relu"}},
        {{"type", "Dropout"}, {"rate", 0.5}},
        {{"type", "Dense"}, {"units", 2}, {"activation", "softmax"}}}}};
  NamedTensors w = dense_weights();
  w["dense_1.weight"] = f32({2, 2}, {1, 1, 0, -1});
  w["dense_1.bias"] = f32({2}, {0, 0});
  const Model m = Model::from_parts(config, w);
  const auto& layers = m.config().at("layers");
  EXPECT_EQ(layers[0].at("name"), "input_1");
  EXPECT_EQ(layers[1].at("name"), "flatten");
  EXPECT_EQ(layers[2].at("name"), "dense");
  EXPECT_EQ(layers[3].at("name"), "dropout");
  EXPECT_EQ(layers[4].at("name"), "dense_1");

  const Tensor x = f32({2, 1, 3}, {1, 1, 1, 2, 0, -2});
  const std::vector<float> out = values(m.predict(x));
  // relu: row 0 [6.5, 0], row 1 [0, 0]; second Dense: row 0 [6.5, 0], row 1 [0, 0].
  const double p0 = 1.0 / (1.0 + std::exp(-6.5));
  ASSERT_EQ(out.size(), 4u);
  EXPECT_NEAR(out[0], p0, 1e-6);
  EXPECT_NEAR(out[1], 1.0 - p0, 1e-6);
  EXPECT_NEAR(out[2], 0.5, 1e-6);
  EXPECT_NEAR(out[3], 0.5, 1e-6);

  // The loss of a model ending in softmax is the cross-entropy of its probabilities (computed
  // from the pre-softmax logits, as Keras does): labels [1, 0].
  const Evaluation ev = m.evaluate(x, i64({1, 0}));
  EXPECT_NEAR(ev.loss, (-std::log(1.0 - p0) - std::log(0.5)) / 2, 1e-5);
  EXPECT_NEAR(ev.accuracy, 0.5, 1e-12);  // row 0 predicts 0 (label 1); row 1 ties -> 0
}

TEST(ModelPredict, ActivationLayersByHand) {
  // Activation layers after a linear Dense: sigmoid(6.5), tanh(-1.5), ...
  for (const std::string act : {"sigmoid", "tanh", "relu", "linear"}) {
    json config = dense_config();
    config["layers"].push_back({{"type", "Activation"}, {"activation", act}});
    const Model m = Model::from_parts(config, dense_weights());
    const std::vector<float> out = values(m.predict(f32({1, 3}, {1, 1, 1})));
    auto f = [&](double v) {
      if (act == "sigmoid") return 1 / (1 + std::exp(-v));
      if (act == "tanh") return std::tanh(v);
      if (act == "relu") return v > 0 ? v : 0.0;
      return v;
    };
    EXPECT_NEAR(out[0], f(6.5), 1e-6) << act;
    EXPECT_NEAR(out[1], f(-1.5), 1e-6) << act;
  }
}

using testing::separable;  // tests/train_test_data.h

json small_classifier(const json& optimizer) {
  return {{"input_shape", {4}},
          {"seed", 3},
          {"layers",
           {{{"type", "Dense"}, {"units", 16}, {"activation", "relu"}},
            {{"type", "Dense"}, {"units", 2}}}},
          {"loss", "sparse_categorical_crossentropy"},
          {"optimizer", optimizer}};
}

TEST(ModelFit, AdamLearnsSeparableProblem) {
  Tensor x, y, xv, yv;
  separable(512, 1, x, y);
  separable(256, 2, xv, yv);
  Model m = Model::from_config(small_classifier({{"type", "Adam"}, {"learning_rate", 0.01}}));
  FitOptions o;
  o.batch_size = 32;
  o.epochs = 25;
  o.seed = 5;
  o.verbose = 0;
  const History h = m.fit(x, y, o, &xv, &yv);
  ASSERT_EQ(h.epochs.size(), 25u);
  EXPECT_LT(h.epochs.back().at("loss"), h.epochs.front().at("loss"));
  EXPECT_GE(h.epochs.back().at("accuracy"), 0.95);
  EXPECT_GE(h.epochs.back().at("val_accuracy"), 0.95);
  const Evaluation ev = m.evaluate(xv, yv);
  EXPECT_GE(ev.accuracy, 0.95);
  EXPECT_NEAR(ev.loss, h.epochs.back().at("val_loss"), 1e-9);
}

TEST(ModelFit, SgdWithNesterovMomentumLearnsSeparableProblem) {
  Tensor x, y;
  separable(512, 1, x, y);
  Model m = Model::from_config(small_classifier(
      {{"type", "SGD"}, {"learning_rate", 0.1}, {"momentum", 0.9}, {"nesterov", true}}));
  FitOptions o;
  o.batch_size = 32;
  o.epochs = 20;
  o.seed = 5;
  o.verbose = 0;
  m.fit(x, y, o);
  EXPECT_GE(m.evaluate(x, y).accuracy, 0.95);
}

TEST(ModelFit, SeedsMakeTrainingReproducibleAndCallbackStops) {
  Tensor x, y;
  separable(200, 4, x, y);
  json config = small_classifier({{"type", "Adam"}, {"learning_rate", 0.01}});
  config["layers"].insert(config["layers"].begin(), json{{"type", "Dropout"}, {"rate", 0.3}});
  FitOptions o;
  o.batch_size = 16;
  o.epochs = 5;
  o.seed = 11;
  o.verbose = 0;
  std::vector<int> seen;
  auto stop = std::make_shared<LambdaCallback>();
  stop->epoch_end = [&, c = stop.get()](int epoch, const Logs&) {
    seen.push_back(epoch);
    if (epoch >= 2) c->model()->set_stop_training(true);  // stop after the third epoch
  };
  o.callbacks = {stop};
  Model a = Model::from_config(config), b = Model::from_config(config);
  const History ha = a.fit(x, y, o), hb = b.fit(x, y, o);
  EXPECT_EQ(seen, (std::vector<int>{0, 1, 2, 0, 1, 2}));
  ASSERT_EQ(ha.epochs.size(), 3u);
  ASSERT_EQ(hb.epochs.size(), 3u);
  for (int e = 0; e < 3; ++e) EXPECT_EQ(ha.epochs[e].at("loss"), hb.epochs[e].at("loss")) << e;
  EXPECT_EQ(values(a.predict(x)), values(b.predict(x)));

  // initial_epoch: epochs 3 and 4 only, numbered as such.
  seen.clear();
  o.initial_epoch = 3;
  stop->epoch_end = [&](int epoch, const Logs&) { seen.push_back(epoch); };
  EXPECT_EQ(a.fit(x, y, o).epochs.size(), 2u);
  EXPECT_EQ(seen, (std::vector<int>{3, 4}));
}

// One step on x = [[1]], y = [0] from W = [[0.5], [-0.5]] (Dense 1 -> 2, no bias): logits
// [0.5, -0.5], softmax p0 = 1 / (1 + e^-1), dLoss/dW = [p0 - 1, 1 - p0].
json one_step_config(const json& optimizer) {
  return {{"input_shape", {1}},
          {"layers", {{{"type", "Dense"}, {"units", 2}, {"use_bias", false}}}},
          {"optimizer", optimizer}};
}
std::vector<float> after_one_step(const json& optimizer) {
  Model m = Model::from_parts(one_step_config(optimizer),
                              {{"dense.weight", f32({2, 1}, {0.5f, -0.5f})}});
  FitOptions o;
  o.verbose = 0;
  o.shuffle = false;
  m.fit(f32({1, 1}, {1}), i64({0}), o);
  return values(m.weights().at("dense.weight"));
}

TEST(ModelFit, AdamStepFollowsKerasFormula) {
  // Keras: m = (1 - b1) g, v = (1 - b2) g^2, w -= lr sqrt(1 - b2) / (1 - b1) m / (sqrt(v) + eps).
  // With eps = 0.1 this differs clearly from torch's placement of eps (|g| / (|g| + eps)).
  const double lr = 0.1, b1 = 0.9, b2 = 0.999, eps = 0.1;
  const double g = 1.0 / (1.0 + std::exp(-1.0)) - 1.0;  // dLoss/dW[0]; dLoss/dW[1] = -g
  const double m = (1 - b1) * g, v = (1 - b2) * g * g;
  const double step = lr * std::sqrt(1 - b2) / (1 - b1) * m / (std::sqrt(v) + eps);
  const auto w = after_one_step({{"type", "Adam"}, {"learning_rate", lr}, {"beta_1", b1},
                                 {"beta_2", b2}, {"epsilon", eps}});
  ASSERT_EQ(w.size(), 2u);
  EXPECT_NEAR(w[0], 0.5 - step, 1e-6);
  EXPECT_NEAR(w[1], -0.5 + step, 1e-6);
  EXPECT_NEAR(step, -0.1 * 0.0316228 * 0.268941 / (0.0316228 * 0.268941 + 0.1), 1e-6);
}

TEST(ModelFit, AdamStepOnManyWeightsFollowsKerasFormula) {
  // 20 outputs so the vectorised path (8 at a time) and its scalar tail both run: W = 0 gives
  // softmax 1/20 everywhere, dLoss/dW[j] = 1/20 - (j == 0).
  const double lr = 0.01, b1 = 0.9, b2 = 0.999, eps = 0.01;
  json config = one_step_config({{"type", "Adam"}, {"learning_rate", lr}, {"epsilon", eps}});
  config["layers"][0]["units"] = 20;
  Model m = Model::from_parts(config, {{"dense.weight", f32({20, 1}, std::vector<float>(20, 0))}});
  FitOptions o;
  o.verbose = 0;
  m.fit(f32({1, 1}, {1}), i64({0}), o);
  const auto w = values(m.weights().at("dense.weight"));
  for (int j = 0; j < 20; ++j) {
    const double g = 0.05 - (j == 0 ? 1.0 : 0.0);
    const double step = lr * std::sqrt(1 - b2) / (1 - b1) * ((1 - b1) * g) /
                        (std::sqrt((1 - b2) * g * g) + eps);
    EXPECT_NEAR(w[j], -step, 1e-7) << j;
  }
}

TEST(ModelFit, SgdStepIsLearningRateTimesGradient) {
  const double g = 1.0 / (1.0 + std::exp(-1.0)) - 1.0;
  const auto w = after_one_step({{"type", "SGD"}, {"learning_rate", 0.1}});
  EXPECT_NEAR(w[0], 0.5 - 0.1 * g, 1e-6);
  EXPECT_NEAR(w[1], -0.5 + 0.1 * g, 1e-6);
}

TEST(ModelFit, DropoutKeepsOneMinusRateAndScales) {
  // x = 1000 ones -> Dropout(0.3) -> Dense 2 with W = [1/1000 ..., 0 ...]: the training
  // logit is 1/0.7 * (kept fraction), in inference exactly 1. The loss fit reports for label
  // 0 is log(1 + e^-logit), which gives the logit back. A tiny learning rate keeps W fixed.
  const json config = {{"input_shape", {1000}},
                       {"layers",
                        {{{"type", "Dropout"}, {"rate", 0.3}},
                         {{"type", "Dense"}, {"units", 2}, {"use_bias", false}}}},
                       {"optimizer", {{"type", "SGD"}, {"learning_rate", 1e-12}}}};
  std::vector<float> w(2000, 0.0f);
  for (int i = 0; i < 1000; ++i) w[i] = 1e-3f;
  Model m = Model::from_parts(config, {{"dense.weight", f32({2, 1000}, w)}});
  const Tensor x = f32({1, 1000}, std::vector<float>(1000, 1.0f));
  EXPECT_NEAR(values(m.predict(x))[0], 1.0, 1e-5);
  FitOptions o;
  o.verbose = 0;
  o.epochs = 40;
  o.seed = 21;
  const History h = m.fit(x, i64({0}), o);
  double kept = 0, lo = 1, hi = 0;
  for (const auto& logs : h.epochs) {
    const double logit = -std::log(std::exp(logs.at("loss")) - 1.0);
    const double fraction = logit * 0.7;
    kept += fraction / h.epochs.size();
    lo = std::min(lo, fraction);
    hi = std::max(hi, fraction);
  }
  // Mean of 40 x 1000 Bernoulli(0.7): standard deviation 0.0023.
  EXPECT_NEAR(kept, 0.7, 0.012);
  EXPECT_LT(lo, hi);  // a fresh mask each step
  EXPECT_NEAR(values(m.predict(x))[0], 1.0, 1e-5);
}

TEST(ModelWeights, RoundTripPredictsIdentically) {
  const json config = mlp_config(32, 16, 1e-3);
  Model m = Model::from_config(config);
  Tensor x, y;
  // 784-wide inputs from a fixed generator; train one epoch so weights are not the init.
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(0, 1);
  std::vector<float> xs(64 * 784);
  for (auto& v : xs) v = u(rng);
  std::vector<std::int64_t> ys(64);
  for (std::size_t i = 0; i < ys.size(); ++i) ys[i] = static_cast<std::int64_t>(i % 10);
  x = f32({64, 784}, xs);
  y = i64(ys);
  FitOptions o;
  o.verbose = 0;
  m.fit(x, y, o);

  const NamedTensors w = m.weights();
  std::vector<std::string> names;
  for (const auto& [name, t] : w) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"dense.bias", "dense.weight", "dense_1.bias",
                                             "dense_1.weight", "dense_2.bias", "dense_2.weight"}));
  EXPECT_EQ(w.at("dense.weight").shape, (std::vector<std::int64_t>{32, 784}));
  EXPECT_EQ(w.at("dense_2.bias").shape, (std::vector<std::int64_t>{10}));
  EXPECT_EQ(m.count_params(), 784 * 32 + 32 + 32 * 16 + 16 + 16 * 10 + 10);

  const Tensor p = m.predict(x);
  // From the original config and from the config with names filled in.
  EXPECT_EQ(Model::from_parts(config, w).predict(x).data, p.data);
  EXPECT_EQ(Model::from_parts(m.config(), w).predict(x).data, p.data);
}

TEST(ModelConfig, MlpConfigIsTheOriginalMlp) {
  const json c = mlp_config(800, 800);
  EXPECT_EQ(c.at("input_shape"), json::array({784}));
  EXPECT_EQ(c.at("optimizer"), (json{{"type", "Adam"}, {"learning_rate", 1e-4}}));
  EXPECT_EQ(c.at("loss"), "sparse_categorical_crossentropy");
  const Model m = Model::from_config(c);
  EXPECT_EQ(m.count_params(), 784 * 800 + 800 + 800 * 800 + 800 + 800 * 10 + 10);
  std::vector<std::string> names;
  for (const auto& l : m.config().at("layers")) names.push_back(l.at("name"));
  EXPECT_EQ(names, (std::vector<std::string>{"dropout", "dense", "dropout_1", "dense_1",
                                             "dropout_2", "dense_2"}));
  EXPECT_EQ(m.config().at("layers")[1].at("activation"), "relu");
  EXPECT_EQ(m.config().at("layers")[0].at("rate"), 0.2);
}

TEST(ModelConfig, UnknownNamesAreInvalidArgumentNamingTheField) {
  json c = mlp_config(8, 8);
  c["layers"][2]["type"] = "Dense2";
  expect_error([&] { Model::from_config(c); }, ErrorKind::kInvalidArgument,
               {"layers[2].type \"Dense2\" is not a layer; allowed: Input, Dense, Dropout, "
                "Flatten, Activation"});

  c = mlp_config(8, 8);
  c["optimizer"]["type"] = "Adamax";
  expect_error([&] { Model::from_config(c); }, ErrorKind::kInvalidArgument,
               {"optimizer.type \"Adamax\" is not an optimizer; allowed: Adam, SGD"});

  c = mlp_config(8, 8);
  c["loss"] = "categorical_hinge";
  expect_error([&] { Model::from_config(c); }, ErrorKind::kInvalidArgument,
               {"loss \"categorical_hinge\" is not a loss; allowed: "
                "sparse_categorical_crossentropy"});

  c = mlp_config(8, 8);
  c["layers"][1]["activation"] = "gelu";
  expect_error([&] { Model::from_config(c); }, ErrorKind::kInvalidArgument,
               {"layers[1].activation \"gelu\" is not an activation; allowed: relu, sigmoid, "
                "tanh, softmax, linear"});

  c = mlp_config(8, 8);
  c["optimizer"]["learning_rte"] = 0.1;
  expect_error([&] { Model::from_config(c); }, ErrorKind::kInvalidArgument,
               {"optimizer has unknown field \"learning_rte\""});

  c = mlp_config(8, 8);
  c["layers"][3]["units"] = 0;
  expect_error([&] { Model::from_config(c); }, ErrorKind::kInvalidArgument,
               {"layers[3].units must be a positive integer, got 0"});

  c = mlp_config(8, 8);
  c["layers"][0]["rate"] = 1.5;
  expect_error([&] { Model::from_config(c); }, ErrorKind::kInvalidArgument,
               {"layers[0].rate = 1.5 is outside [0, 1)"});

  c = mlp_config(8, 8);
  c.erase("input_shape");
  expect_error([&] { Model::from_config(c); }, ErrorKind::kInvalidArgument, {"input_shape"});
}

TEST(ModelWeights, FromPartsRefusesMissingExtraAndMisshapedWeights) {
  NamedTensors w = dense_weights();
  w.erase("dense.bias");
  expect_error([&] { Model::from_parts(dense_config(), w); }, ErrorKind::kInvalidArgument,
               {"missing tensor \"dense.bias\" of shape [2]"});

  w = dense_weights();
  w["dense_1.weight"] = f32({1}, {0});
  expect_error([&] { Model::from_parts(dense_config(), w); }, ErrorKind::kInvalidArgument,
               {"unexpected tensor \"dense_1.weight\"", "dense.bias, dense.weight"});

  w = dense_weights();
  w["dense.weight"] = f32({3, 2}, {1, 2, 3, 4, 5, 6});
  expect_error([&] { Model::from_parts(dense_config(), w); }, ErrorKind::kInvalidArgument,
               {"weights[\"dense.weight\"] has shape [3, 2]; the config needs [2, 3]"});

  w = dense_weights();
  w["dense.bias"] = Tensor::from<std::int64_t>(DType::kI64, {2}, {0, 1});
  expect_error([&] { Model::from_parts(dense_config(), w); }, ErrorKind::kInvalidArgument,
               {"weights[\"dense.bias\"] has dtype I64; expected F32"});
}

TEST(ModelFit, RefusesDataThatDoesNotFit) {
  Model m = Model::from_parts(dense_config(), dense_weights());
  FitOptions o;
  o.verbose = 0;
  expect_error([&] { m.fit(f32({2, 2}, {1, 2, 3, 4}), i64({0, 1}), o); },
               ErrorKind::kInvalidArgument, {"x has shape [2, 2]; the model needs [n, 3]"});
  expect_error([&] { m.fit(f32({2, 3}, {1, 2, 3, 4, 5, 6}), i64({0, 2}), o); },
               ErrorKind::kInvalidArgument, {"y[1] = 2 is not a class index in [0, 2)"});
  expect_error([&] { m.predict(Tensor::from<std::int64_t>(DType::kI64, {1, 3}, {1, 2, 3})); },
               ErrorKind::kInvalidArgument, {"x has dtype I64; the model needs F32"});
  expect_error([&] { m.evaluate(f32({0, 3}, {}), i64({})); }, ErrorKind::kInvalidArgument,
               {"x holds no examples"});
  o.batch_size = 0;
  expect_error([&] { m.fit(f32({2, 3}, {1, 2, 3, 4, 5, 6}), i64({0, 1}), o); },
               ErrorKind::kInvalidArgument, {"batch_size = 0"});
  expect_error([] { set_num_threads(-1); }, ErrorKind::kInvalidArgument, {"negative"});
}

}  // namespace
}  // namespace tensorhub
