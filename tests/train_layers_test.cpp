// Tests of the convolutional layers, BatchNormalization, AdamW / RMSprop and the losses beyond
// sparse_categorical_crossentropy (tensorhub/train/model.h). Every expected value is computed
// by hand in the comments (TensorFlow's "same" padding rule, Keras's update formulas), or, for
// the larger CNN, by Debian's python3-torch from the same weights.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tensorhub/core/error.h"
#include "tensorhub/train/model.h"
#include "test_util.h"
#include "train_test_data.h"

namespace tensorhub {
namespace {

using nlohmann::json;
using testing::expect_error;  // tests/test_util.h
using testing::f32;           // tests/train_test_data.h
using testing::i64;
using testing::values;
using testing::TempDir;

void expect_near_all(const std::vector<float>& got, const std::vector<double>& want,
                     double tolerance, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tolerance) << what << " [" << i << "]";
}

FitOptions quiet(int epochs = 1, std::int64_t batch_size = 32) {
  FitOptions o;
  o.verbose = 0;
  o.epochs = epochs;
  o.batch_size = batch_size;
  o.shuffle = false;
  o.seed = 5;
  return o;
}

// x = 1..n as an image [1, h, w, c] in row-major (h, w, c) order, times `sign`.
Tensor ramp_image(std::int64_t h, std::int64_t w, std::int64_t c, float sign = 1) {
  std::vector<float> v(static_cast<std::size_t>(h * w * c));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = sign * static_cast<float>(i + 1);
  return f32({1, h, w, c}, v);
}

// ---- Conv2D -----------------------------------------------------------------------------------

TEST(Conv2D, ValidOnThreeByThreeWithKnownKernel) {
  // x = [[1, 2, 3], [4, 5, 6], [7, 8, 9]], kernel [[1, 2], [3, 4]], bias 0.5:
  // out[0][0] = 1*1 + 2*2 + 4*3 + 5*4 = 37, out[0][1] = 2 + 6 + 15 + 24 = 47,
  // out[1][0] = 4 + 10 + 21 + 32 = 67, out[1][1] = 5 + 12 + 24 + 36 = 77 (+ 0.5 each).
  const json config = {{"input_shape", {3, 3, 1}},
                       {"loss", nullptr},
                       {"layers", {{{"type", "Conv2D"}, {"filters", 1}, {"kernel_size", 2}}}}};
  const Model m = Model::from_parts(config, {{"conv2d.weight", f32({1, 1, 2, 2}, {1, 2, 3, 4})},
                                            {"conv2d.bias", f32({1}, {0.5f})}});
  const Tensor out = m.predict(ramp_image(3, 3, 1));
  EXPECT_EQ(out.shape, (std::vector<std::int64_t>{1, 2, 2, 1}));
  expect_near_all(values(out), {37.5, 47.5, 67.5, 77.5}, 1e-5, "conv");
  EXPECT_EQ(m.count_params(), 5);
}

TEST(Conv2D, ChannelsLastLayoutAndKerasFlattenOrder) {
  // A 2x2 image with 2 channels, pixels (1, 10), (2, 20), (3, 30), (4, 40); a 1x1 kernel with
  // weight [filters, channels] = [[1, 0], [1, -1]]: filter 0 copies channel 0, filter 1 is
  // channel 0 - channel 1. Flatten then orders (h, w, c): 1, -9, 2, -18, 3, -27, 4, -36.
  const json config = {{"input_shape", {2, 2, 2}},
                       {"loss", nullptr},
                       {"layers",
                        {{{"type", "Conv2D"}, {"filters", 2}, {"kernel_size", 1}, {"use_bias", false}},
                         {{"type", "Flatten"}}}}};
  const Model m = Model::from_parts(config, {{"conv2d.weight", f32({2, 2, 1, 1}, {1, 0, 1, -1})}});
  const Tensor out = m.predict(f32({1, 2, 2, 2}, {1, 10, 2, 20, 3, 30, 4, 40}));
  EXPECT_EQ(out.shape, (std::vector<std::int64_t>{1, 8}));
  expect_near_all(values(out), {1, -9, 2, -18, 3, -27, 4, -36}, 1e-5, "flatten");
}

TEST(Conv2D, SamePaddingWithStrideTwoPadsBottomAndRightAsTensorFlow) {
  // 4x4 ramp 1..16, 3x3 kernel of ones, strides 2, "same": out = ceil(4 / 2) = 2, padding
  // (2 - 1) * 2 + 3 - 4 = 1, all of it at the bottom / right (TensorFlow). Windows:
  // rows 0-2 x cols 0-2: 1+2+3+5+6+7+9+10+11 = 54; rows 0-2 x cols 2-3: 3+4+7+8+11+12 = 45;
  // rows 2-3 x cols 0-2: 9+10+11+13+14+15 = 72; rows 2-3 x cols 2-3: 11+12+15+16 = 54.
  // (Padding on the top / left instead, as torch's symmetric rule would, gives 14 at [0][0].)
  const json config = {{"input_shape", {4, 4, 1}},
                       {"loss", nullptr},
                       {"layers",
                        {{{"type", "Conv2D"}, {"filters", 1}, {"kernel_size", {3, 3}},
                          {"strides", 2}, {"padding", "same"}, {"use_bias", false}}}}};
  const Model m =
      Model::from_parts(config, {{"conv2d.weight", f32({1, 1, 3, 3}, std::vector<float>(9, 1))}});
  const Tensor out = m.predict(ramp_image(4, 4, 1));
  EXPECT_EQ(out.shape, (std::vector<std::int64_t>{1, 2, 2, 1}));
  expect_near_all(values(out), {54, 45, 72, 54}, 1e-4, "same/2");

  // Stride 1, "same", 3x3 on 3x3: one zero row / column on every side; the centre sums all
  // nine values (45), the corner (0, 0) sums 1 + 2 + 4 + 5 = 12. With relu on (x - 20): 0, 25.
  json c3 = {{"input_shape", {3, 3, 1}},
             {"loss", nullptr},
             {"layers",
              {{{"type", "Conv2D"}, {"filters", 1}, {"kernel_size", 3}, {"padding", "same"},
                {"activation", "relu"}}}}};
  const Model m3 = Model::from_parts(c3, {{"conv2d.weight", f32({1, 1, 3, 3}, std::vector<float>(9, 1))},
                                         {"conv2d.bias", f32({1}, {-20})}});
  const auto v = values(m3.predict(ramp_image(3, 3, 1)));
  ASSERT_EQ(v.size(), 9u);
  EXPECT_NEAR(v[0], 0, 1e-5);
  EXPECT_NEAR(v[4], 25, 1e-5);
}

TEST(Conv2D, GlorotUniformUsesTheReceptiveFieldAndIsSeeded) {
  // Keras: limit = sqrt(6 / (fan_in + fan_out)), fan_in = 3*3*2 = 18, fan_out = 3*3*4 = 36.
  const json config = {{"input_shape", {5, 5, 2}},
                       {"seed", 9},
                       {"loss", nullptr},
                       {"layers", {{{"type", "Conv2D"}, {"filters", 4}, {"kernel_size", 3}}}}};
  const auto w = values(Model::from_config(config).weights().at("conv2d.weight"));
  ASSERT_EQ(w.size(), 72u);
  const double limit = std::sqrt(6.0 / 54.0);
  double max_abs = 0;
  for (float x : w) max_abs = std::max(max_abs, static_cast<double>(std::abs(x)));
  EXPECT_LE(max_abs, limit);
  EXPECT_GT(max_abs, 0.8 * limit);  // 72 uniform draws: the largest is near the limit
  EXPECT_EQ(values(Model::from_config(config).weights().at("conv2d.weight")), w);
}

// ---- MaxPooling2D -------------------------------------------------------------------------------

TEST(MaxPooling2D, DefaultPoolOfTwoOnFourByFour) {
  // 4x4 ramp with two channels (c0 = 1, 3, 5, ..., c1 = 2, 4, 6, ...): the maximum of each 2x2
  // block is its bottom-right pixel: pixels 5, 7, 13, 15 (0-based) -> c0 11, 15, 27, 31.
  const json config = {{"input_shape", {4, 4, 2}},
                       {"loss", nullptr},
                       {"layers", {{{"type", "MaxPooling2D"}}}}};
  const Model m = Model::from_config(config);
  const Tensor out = m.predict(ramp_image(4, 4, 2));
  EXPECT_EQ(out.shape, (std::vector<std::int64_t>{1, 2, 2, 2}));
  expect_near_all(values(out), {11, 12, 15, 16, 27, 28, 31, 32}, 0, "pool");
}

TEST(MaxPooling2D, SamePaddingNeverWinsTheMax) {
  // -(1..16) on 4x4, pool 3, strides 2, "same": windows rows 0-2 / 2-3 x cols 0-2 / 2-3 (the
  // padding is at the bottom / right, as -inf): maxima -1, -3, -9, -11. Zero padding would
  // give 0 for the last three.
  const json config = {{"input_shape", {4, 4, 1}},
                       {"loss", nullptr},
                       {"layers",
                        {{{"type", "MaxPooling2D"}, {"pool_size", 3}, {"strides", 2},
                          {"padding", "same"}}}}};
  const Tensor out = Model::from_config(config).predict(ramp_image(4, 4, 1, -1));
  EXPECT_EQ(out.shape, (std::vector<std::int64_t>{1, 2, 2, 1}));
  expect_near_all(values(out), {-1, -3, -9, -11}, 0, "same");

  // "valid" with pool [2, 3] and strides 1 on 4x4: out [3, 2].
  const json valid = {{"input_shape", {4, 4, 1}},
                      {"loss", nullptr},
                      {"layers", {{{"type", "MaxPooling2D"}, {"pool_size", {2, 3}}, {"strides", 1}}}}};
  const Tensor v = Model::from_config(valid).predict(ramp_image(4, 4, 1));
  EXPECT_EQ(v.shape, (std::vector<std::int64_t>{1, 3, 2, 1}));
  expect_near_all(values(v), {7, 8, 11, 12, 15, 16}, 0, "valid");
}

// ---- BatchNormalization ---------------------------------------------------------------------------

json bn_only(const json& loss) {
  return {{"input_shape", {2}},
          {"loss", loss},
          {"optimizer", {{"type", "SGD"}, {"learning_rate", 0.1}}},
          {"layers", {{{"type", "BatchNormalization"}}}}};
}

TEST(BatchNormalization, NormalisesTheBatchAndMovesTheAveragesByOnePercent) {
  // Batch of 4: column 0 = 1, 2, 3, 4 (mean 2.5, biased variance 1.25), column 1 = 0, 0, 0, 4
  // (mean 1, variance 3). Training mode normalises with these: with targets 0 and mse the loss
  // is the mean of the squared normalised values, var / (var + 0.001) per column:
  // (1.25 / 1.251 + 3 / 3.001) / 2. After the step (Keras momentum 0.99):
  // moving_mean = 0.01 * mean = [0.025, 0.01], moving_variance = 0.99 + 0.01 * var =
  // [1.0025, 1.02].
  Model m = Model::from_config(bn_only("mse"));
  const Tensor x = f32({4, 2}, {1, 0, 2, 0, 3, 0, 4, 4});
  const Tensor y = f32({4, 2}, std::vector<float>(8, 0));
  const History h = m.fit(x, y, quiet(1, 4));
  ASSERT_EQ(h.epochs.size(), 1u);
  EXPECT_NEAR(h.epochs[0].at("loss"), (1.25 / 1.251 + 3 / 3.001) / 2, 1e-6);
  EXPECT_EQ(h.epochs[0].count("accuracy"), 0u);  // mse reports no accuracy
  const NamedTensors w = m.weights();
  expect_near_all(values(w.at("batch_normalization.moving_mean")), {0.025, 0.01}, 1e-7, "mean");
  expect_near_all(values(w.at("batch_normalization.moving_variance")), {1.0025, 1.02}, 1e-6,
                  "variance");
  // gamma and beta are trained, the moving averages are not (count_params: 4 trainable).
  EXPECT_EQ(m.count_params(), 4);
  EXPECT_TRUE(w.count("batch_normalization.gamma") && w.count("batch_normalization.beta"));
}

TEST(BatchNormalization, InferenceUsesTheMovingAveragesGammaAndBeta) {
  // y = (x - moving_mean) / sqrt(moving_variance + 0.001) * gamma + beta:
  // x = [4, 3]: (4 - 1) / sqrt(3.001) * 2 + 0.5, (3 - 2) / sqrt(0.999 + 0.001) * 1 + 0 = 1.
  const NamedTensors w = {{"batch_normalization.gamma", f32({2}, {2, 1})},
                          {"batch_normalization.beta", f32({2}, {0.5f, 0})},
                          {"batch_normalization.moving_mean", f32({2}, {1, 2})},
                          {"batch_normalization.moving_variance", f32({2}, {3, 0.999f})}};
  const Model m = Model::from_parts(bn_only(nullptr), w);
  expect_near_all(values(m.predict(f32({1, 2}, {4, 3}))), {3 / std::sqrt(3.001) * 2 + 0.5, 1},
                  1e-5, "inference");

  // center / scale false: no beta / gamma; momentum 0.5 moves halfway.
  json c = bn_only("mse");
  c["layers"][0]["center"] = false;
  c["layers"][0]["scale"] = false;
  c["layers"][0]["momentum"] = 0.5;
  Model plain = Model::from_config(c);
  EXPECT_EQ(plain.count_params(), 0);
  EXPECT_EQ(plain.weights().size(), 2u);
}

TEST(BatchNormalization, CnnSavedAndReloadedPredictsIdentically) {
  TempDir dir;
  const json config = {
      {"input_shape", {6, 6, 1}},
      {"seed", 4},
      {"layers",
       {{{"type", "Conv2D"}, {"filters", 4}, {"kernel_size", 3}, {"padding", "same"}},
        {{"type", "BatchNormalization"}},
        {{"type", "Activation"}, {"activation", "relu"}},
        {{"type", "MaxPooling2D"}},
        {{"type", "Flatten"}},
        {{"type", "Dense"}, {"units", 3}, {"activation", "softmax"}}}},
      {"optimizer", "Adam"}};
  std::mt19937 rng(1);
  std::normal_distribution<float> g(0, 1);
  std::vector<float> xs(20 * 36);
  for (auto& v : xs) v = g(rng) * 2 + 1;
  const Tensor x = f32({20, 6, 6, 1}, xs);
  std::vector<std::int64_t> ys(20);
  for (std::size_t i = 0; i < ys.size(); ++i) ys[i] = static_cast<std::int64_t>(i % 3);
  Model m = Model::from_config(config);
  m.fit(x, i64(ys), quiet(2, 8));
  // The moving averages moved away from their start (0 and 1) and are part of the weights.
  const auto mean = values(m.weights().at("batch_normalization.moving_mean"));
  ASSERT_EQ(mean.size(), 4u);
  EXPECT_NE(mean[0], 0.0f);
  m.save((dir / "cnn").string());
  const Model loaded = Model::load((dir / "cnn").string());
  const Tensor a = m.predict(x), b = loaded.predict(x);
  EXPECT_EQ(a.shape, (std::vector<std::int64_t>{20, 3}));
  EXPECT_TRUE(a.data == b.data) << "reloaded model predicts differently";
  // Inference mode: predicting twice does not move the averages.
  EXPECT_EQ(values(loaded.weights().at("batch_normalization.moving_mean")), mean);
  // A model whose averages were left at their start predicts differently (the test can tell).
  NamedTensors w = m.weights();
  w["batch_normalization.moving_mean"] = f32({4}, {0, 0, 0, 0});
  const Model reset = Model::from_parts(config, w);
  EXPECT_FALSE(reset.predict(x).data == a.data);
}

// ---- a small CNN learns --------------------------------------------------------------------------

// 8x8 images holding one bright bar, vertical (class 0) or horizontal (class 1), at a random
// position, over uniform noise in [0, 0.3): x F32 [n, 8, 8, 1], y I64 [n].
void bars(std::int64_t n, std::uint32_t seed, Tensor& x, Tensor& y) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> noise(0, 0.3f);
  std::vector<float> xs(static_cast<std::size_t>(n * 64));
  std::vector<std::int64_t> ys(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const auto cls = static_cast<std::int64_t>(rng() % 2);
    const auto at = static_cast<int>(rng() % 8);
    ys[static_cast<std::size_t>(i)] = cls;
    for (int r = 0; r < 8; ++r)
      for (int c = 0; c < 8; ++c) {
        const bool on = cls == 0 ? c == at : r == at;
        xs[static_cast<std::size_t>(i * 64 + r * 8 + c)] = on ? 1.0f : noise(rng);
      }
  }
  x = f32({n, 8, 8, 1}, xs);
  y = i64(ys);
}

TEST(SmallCnn, LearnsBarOrientation) {
  const json config = {
      {"input_shape", {8, 8, 1}},
      {"seed", 1},
      {"layers",
       {{{"type", "Conv2D"}, {"filters", 8}, {"kernel_size", 3}, {"activation", "relu"}},
        {{"type", "MaxPooling2D"}},
        {{"type", "Flatten"}},
        {{"type", "Dense"}, {"units", 10}}}},
      {"optimizer", {{"type", "Adam"}, {"learning_rate", 0.01}}}};
  Model m = Model::from_config(config);
  EXPECT_EQ(m.count_params(), 8 * 9 + 8 + 3 * 3 * 8 * 10 + 10);
  Tensor x, y, xt, yt;
  bars(256, 1, x, y);
  bars(200, 2, xt, yt);
  FitOptions o = quiet(8, 16);
  o.shuffle = true;
  m.fit(x, y, o);
  const Evaluation ev = m.evaluate(xt, yt);
  EXPECT_GE(ev.accuracy, 0.95) << "loss " << ev.loss;
}

// ---- the CNN forward pass against python3-torch ---------------------------------------------------

// Writes `t` as text: one number per line (the Python side reads it with float()).
void write_numbers(const std::string& path, const std::vector<float>& v) {
  std::ofstream f(path);
  f.precision(9);
  for (float x : v) f << x << "\n";
}

TEST(SmallCnn, ForwardMatchesPythonTorch) {
  // Conv2D 3x3 stride 2 "same" (asymmetric padding) -> BatchNormalization (inference) ->
  // MaxPooling2D 2 -> Flatten -> Dense, with random weights; torch computes the same network
  // in NCHW with TensorFlow's padding spelled out (F.pad), and the Keras flatten order by
  // permuting to NHWC before flattening.
  const json config = {
      {"input_shape", {7, 7, 2}},
      {"seed", 11},
      {"loss", nullptr},
      {"layers",
       {{{"type", "Conv2D"}, {"filters", 3}, {"kernel_size", 3}, {"strides", 2}, {"padding", "same"},
         {"activation", "tanh"}},
        {{"type", "BatchNormalization"}},
        {{"type", "MaxPooling2D"}, {"pool_size", 2}, {"padding", "same"}},
        {{"type", "Flatten"}},
        {{"type", "Dense"}, {"units", 4}}}}};
  NamedTensors w = Model::from_config(config).weights();
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(0.5f, 1.5f);
  std::vector<float> mm(3), mv(3), gamma(3), beta(3);
  for (int i = 0; i < 3; ++i) mm[i] = u(rng) - 1, mv[i] = u(rng), gamma[i] = u(rng), beta[i] = u(rng) - 1;
  w["batch_normalization.moving_mean"] = f32({3}, mm);
  w["batch_normalization.moving_variance"] = f32({3}, mv);
  w["batch_normalization.gamma"] = f32({3}, gamma);
  w["batch_normalization.beta"] = f32({3}, beta);
  const Model m = Model::from_parts(config, w);
  std::vector<float> xs(2 * 7 * 7 * 2);
  for (auto& v : xs) v = u(rng) * 2 - 2;
  const Tensor x = f32({2, 7, 7, 2}, xs);
  const auto ours = values(m.predict(x));

  TempDir dir;
  const auto file = [&](const std::string& name) { return (dir / name).string(); };
  write_numbers(file("x"), xs);
  for (const char* name : {"conv2d.weight", "conv2d.bias", "dense.weight", "dense.bias"})
    write_numbers(file(name), values(w.at(name)));
  write_numbers(file("bn"), [&] {
    std::vector<float> all;
    for (const auto* v : {&mm, &mv, &gamma, &beta}) all.insert(all.end(), v->begin(), v->end());
    return all;
  }());
  std::ofstream(file("forward.py")) << R"(import sys, torch
import torch.nn.functional as F
d = sys.argv[1]
def load(name, shape):
    return torch.tensor([float(l) for l in open(d + '/' + name)], dtype=torch.float64).reshape(shape)
x = load('x', (2, 7, 7, 2)).permute(0, 3, 1, 2)
# TensorFlow "same", k 3, s 2, in 7: out 4, padding (4 - 1) * 2 + 3 - 7 = 2 -> 1 before, 1 after
h = torch.tanh(F.conv2d(F.pad(x, (1, 1, 1, 1)), load('conv2d.weight', (3, 2, 3, 3)),
                        load('conv2d.bias', (3,)), stride=2))
bn = load('bn', (4, 3))
h = (h - bn[0].view(1, 3, 1, 1)) / torch.sqrt(bn[1].view(1, 3, 1, 1) + 0.001) \
    * bn[2].view(1, 3, 1, 1) + bn[3].view(1, 3, 1, 1)
# MaxPooling2D 2, "same" on 4x4: no padding needed
h = F.max_pool2d(h, 2)
h = h.permute(0, 2, 3, 1).reshape(2, -1)
out = F.linear(h, load('dense.weight', (4, 12)), load('dense.bias', (4,)))
print(' '.join('%.9g' % v for v in out.reshape(-1).tolist()))
)";
  std::string text;
  try {
    text = testing::run_command("/usr/bin/python3 " + file("forward.py") + " " + dir.path().string());
  } catch (const std::exception& e) {
    FAIL() << "python3-torch is needed for this test: " << e.what();
  }
  std::istringstream in(text);
  std::vector<double> want;
  for (double v; in >> v;) want.push_back(v);
  expect_near_all(ours, want, 1e-4, "torch");
}

// ---- optimizers ---------------------------------------------------------------------------------

// One step on x = [[1]], y = [0] from W = [[0.5], [-0.5]] (Dense 1 -> 2, no bias): logits
// [0.5, -0.5], softmax p0 = 1 / (1 + e^-1), dLoss/dW = [g, -g] with g = p0 - 1.
std::vector<float> after_one_step(const json& optimizer) {
  const json config = {{"input_shape", {1}},
                       {"layers", {{{"type", "Dense"}, {"units", 2}, {"use_bias", false}}}},
                       {"optimizer", optimizer}};
  Model m = Model::from_parts(config, {{"dense.weight", f32({2, 1}, {0.5f, -0.5f})}});
  m.fit(f32({1, 1}, {1}), i64({0}), quiet());
  return values(m.weights().at("dense.weight"));
}
const double kGrad = 1.0 / (1.0 + std::exp(-1.0)) - 1.0;

TEST(RMSprop, OneStepFollowsKerasFormulaWithEpsilonInsideTheSqrt) {
  // v = (1 - rho) g^2; w -= lr g / sqrt(v + eps). With eps = 0.1 the placement matters:
  // torch's lr g / (sqrt(v) + eps) would differ in the second digit.
  const double lr = 0.1, rho = 0.9, eps = 0.1, g = kGrad;
  const double v = (1 - rho) * g * g;
  const double step = lr * g / std::sqrt(v + eps);
  const auto w = after_one_step({{"type", "RMSprop"}, {"learning_rate", lr}, {"epsilon", eps}});
  ASSERT_EQ(w.size(), 2u);
  EXPECT_NEAR(w[0], 0.5 - step, 1e-7);
  EXPECT_NEAR(w[1], -0.5 + step, 1e-7);
  EXPECT_GT(std::abs(step - lr * g / (std::sqrt(v) + eps)), 1e-3);
}

TEST(RMSprop, CenteredWithMomentumOneStep) {
  // centered: a = (1 - rho) g, denominator = v - a^2 + eps; momentum buffer = 0 * 0.5 + increment.
  const double lr = 0.01, rho = 0.8, eps = 1e-7, g = kGrad;
  const double v = (1 - rho) * g * g, a = (1 - rho) * g;
  const double step = lr * g / std::sqrt(v - a * a + eps);
  const auto w = after_one_step({{"type", "RMSprop"}, {"learning_rate", lr}, {"rho", rho},
                                 {"momentum", 0.5}, {"centered", true}});
  EXPECT_NEAR(w[0], 0.5 - step, 1e-7);
  EXPECT_NEAR(w[1], -0.5 + step, 1e-7);
  // The defaults are Keras's: lr 0.001, rho 0.9, eps 1e-7: step = 0.001 g / sqrt(0.1 g^2 + 1e-7).
  const auto d = after_one_step("RMSprop");
  EXPECT_NEAR(d[0], 0.5 - 0.001 * g / std::sqrt(0.1 * g * g + 1e-7), 1e-7);
}

TEST(AdamW, OneStepDecaysTheWeightsThenTakesTheAdamStep) {
  // w = w (1 - lr wd) - lr sqrt(1 - b2) / (1 - b1) m / (sqrt(v) + eps), m = (1 - b1) g,
  // v = (1 - b2) g^2 (Keras applies the decay before the update; the gradient is the old one's).
  const double lr = 0.1, wd = 0.5, b1 = 0.9, b2 = 0.999, eps = 0.1, g = kGrad;
  const double m = (1 - b1) * g, v = (1 - b2) * g * g;
  const double step = lr * std::sqrt(1 - b2) / (1 - b1) * m / (std::sqrt(v) + eps);
  const auto w = after_one_step({{"type", "AdamW"}, {"learning_rate", lr}, {"weight_decay", wd},
                                 {"epsilon", eps}});
  EXPECT_NEAR(w[0], 0.5 * (1 - lr * wd) - step, 1e-6);
  EXPECT_NEAR(w[1], -0.5 * (1 - lr * wd) + step, 1e-6);
  // Keras 3's defaults: lr 0.001, weight_decay 0.004, eps 1e-7: the Adam step is ~lr sign(g).
  const auto d = after_one_step("AdamW");
  const double sd = 0.001 * std::sqrt(1 - 0.999) / 0.1 * (0.1 * g) / (std::sqrt(0.001 * g * g) + 1e-7);
  EXPECT_NEAR(d[0], 0.5 * (1 - 0.001 * 0.004) - sd, 1e-7);
}

// ---- losses and accuracy --------------------------------------------------------------------------

// Dense 2 -> 2 with the identity as weights: the logits are the inputs.
Model identity_classifier(const json& loss, const std::string& activation = "linear") {
  const json config = {{"input_shape", {2}},
                       {"loss", loss},
                       {"layers", {{{"type", "Dense"}, {"units", 2}, {"activation", activation}}}}};
  return Model::from_parts(config, {{"dense.weight", f32({2, 2}, {1, 0, 0, 1})},
                                    {"dense.bias", f32({2}, {0, 0})}});
}

TEST(Losses, CategoricalCrossentropyOfKnownLogits) {
  // logits [0, ln 3]: softmax [1/4, 3/4]. Row 0, y = [1, 0]: ln 4, argmax 1 != 0.
  // Row 1, y = [0.5, 0.5]: 0.5 ln 4 + 0.5 ln(4/3), argmax of y is 0 (first of a tie): wrong.
  // Row 2, logits [ln 3, 0], y = [1, 0]: ln(4/3), right.
  const float l3 = std::log(3.0f);
  const Tensor x = f32({3, 2}, {0, l3, 0, l3, l3, 0});
  const Tensor y = f32({3, 2}, {1, 0, 0.5f, 0.5f, 1, 0});
  for (const char* act : {"linear", "softmax"}) {
    const Model m = identity_classifier("categorical_crossentropy", act);
    const Evaluation ev = m.evaluate(x, y);
    EXPECT_NEAR(ev.loss, (std::log(4.0) + 0.5 * std::log(4.0) + 0.5 * std::log(4.0 / 3) +
                          std::log(4.0 / 3)) / 3, 1e-6) << act;
    EXPECT_NEAR(ev.accuracy, 1.0 / 3, 1e-12) << act;
  }
  // softmax at the end: predict gives probabilities.
  expect_near_all(values(identity_classifier("categorical_crossentropy", "softmax")
                             .predict(f32({1, 2}, {0, l3}))),
                  {0.25, 0.75}, 1e-6, "predict");
}

TEST(Losses, BinaryCrossentropyFromSigmoidOrLogits) {
  // Dense 1 -> 1 with weight 1: logit = x. x = 0, ln 3, -ln 3: p = 0.5, 0.75, 0.25; y = 1, 0, 0:
  // losses ln 2, ln 4, ln(4/3); accuracy (p > 0.5 == y): no, no, yes = 1/3.
  const float l3 = std::log(3.0f);
  const Tensor x = f32({3, 1}, {0, l3, -l3});
  const double want = (std::log(2.0) + std::log(4.0) + std::log(4.0 / 3)) / 3;
  for (const char* act : {"sigmoid", "linear"}) {
    const json config = {{"input_shape", {1}},
                         {"loss", "binary_crossentropy"},
                         {"layers", {{{"type", "Dense"}, {"units", 1}, {"activation", act}}}}};
    const Model m = Model::from_parts(config, {{"dense.weight", f32({1, 1}, {1})},
                                               {"dense.bias", f32({1}, {0})}});
    for (const Tensor& y : {f32({3}, {1, 0, 0}), f32({3, 1}, {1, 0, 0})}) {
      const Evaluation ev = m.evaluate(x, y);
      EXPECT_NEAR(ev.loss, want, 1e-6) << act;
      EXPECT_NEAR(ev.accuracy, 1.0 / 3, 1e-12) << act;
    }
    if (std::string(act) == "sigmoid")
      expect_near_all(values(m.predict(x)), {0.5, 0.75, 0.25}, 1e-6, "probabilities");
  }
}

TEST(Losses, BinaryCrossentropyOfSeveralIndependentLabels) {
  // Output [2] through the identity, y [n, 2]; an example's loss is the mean over its labels.
  // Row 0: logits [0, ln 3], y [1, 0]: (ln 2 + ln 4) / 2, predictions [0, 1]: 0 of 2 right.
  // Row 1: logits [ln 3, -ln 3], y [1, 0]: ln(4/3), both right. Loss the mean, accuracy 1/2,
  // whatever the batch size.
  const float l3 = std::log(3.0f);
  const Model m = identity_classifier("binary_crossentropy", "sigmoid");
  const Tensor x = f32({2, 2}, {0, l3, l3, -l3}), y = f32({2, 2}, {1, 0, 1, 0});
  for (std::int64_t batch : {1, 2}) {
    const Evaluation ev = m.evaluate(x, y, batch);
    EXPECT_NEAR(ev.loss, ((std::log(2.0) + std::log(4.0)) / 2 + std::log(4.0 / 3)) / 2, 1e-6);
    EXPECT_NEAR(ev.accuracy, 0.5, 1e-12);
  }
  // The same for mse in batches of 1 and 2: ((0 - 1)^2 + (ln 3)^2) / 2 and ((ln 3 - 1)^2 +
  // (ln 3)^2) / 2, averaged.
  const Model mse = identity_classifier("mse");
  const double l = std::log(3.0);
  for (std::int64_t batch : {1, 2})
    EXPECT_NEAR(mse.evaluate(x, y, batch).loss, ((1 + l * l) / 2 + ((l - 1) * (l - 1) + l * l) / 2) / 2,
                1e-5);
}

TEST(Losses, BinaryCrossentropyTrainsALogisticRegression) {
  Tensor x, yi;
  testing::separable(200, 3, x, yi);
  std::vector<float> yf;
  for (std::int64_t i = 0; i < 200; ++i) yf.push_back(static_cast<float>(yi.as<std::int64_t>()[i]));
  const json config = {{"input_shape", {4}},
                       {"seed", 2},
                       {"loss", "binary_crossentropy"},
                       {"metrics", {"accuracy"}},
                       {"layers", {{{"type", "Dense"}, {"units", 1}, {"activation", "sigmoid"}}}},
                       {"optimizer", {{"type", "RMSprop"}, {"learning_rate", 0.05}}}};
  Model m = Model::from_config(config);
  const History h = m.fit(x, f32({200}, yf), quiet(20, 16));
  EXPECT_GE(h.epochs.back().at("accuracy"), 0.95);
  EXPECT_LT(h.epochs.back().at("loss"), h.epochs.front().at("loss"));
}

TEST(Losses, MseOfKnownValuesAndNoAccuracy) {
  // x = [1, 2] through the identity, y = [0, 4]: ((1 - 0)^2 + (2 - 4)^2) / 2 = 2.5; a second
  // example with no error: mean 1.25.
  const Model m = identity_classifier("mse");
  const Evaluation ev = m.evaluate(f32({2, 2}, {1, 2, 3, 3}), f32({2, 2}, {0, 4, 3, 3}));
  EXPECT_NEAR(ev.loss, 1.25, 1e-6);
  EXPECT_TRUE(std::isnan(ev.accuracy));
  // A relu at the end is part of the output under mse: relu(-1) = 0, error 1.
  const Model relu = identity_classifier("mse", "relu");
  EXPECT_NEAR(relu.evaluate(f32({1, 2}, {-1, 0}), f32({1, 2}, {1, 0})).loss, 0.5, 1e-6);

  // Regression of y = 2 x0 - x1 + 0.5 with SGD: the loss falls below 1e-4.
  std::mt19937 rng(4);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> xs, ys;
  for (int i = 0; i < 64; ++i) {
    const float a = u(rng), b = u(rng);
    xs.insert(xs.end(), {a, b});
    ys.push_back(2 * a - b + 0.5f);
  }
  const json config = {{"input_shape", {2}},
                       {"seed", 1},
                       {"loss", "mse"},
                       {"layers", {{{"type", "Dense"}, {"units", 1}}}},
                       {"optimizer", {{"type", "SGD"}, {"learning_rate", 0.2}}}};
  Model reg = Model::from_config(config);
  const History h = reg.fit(f32({64, 2}, xs), f32({64, 1}, ys), quiet(60, 8));
  EXPECT_LT(h.epochs.back().at("loss"), 1e-4);
  EXPECT_EQ(h.epochs.back().count("accuracy"), 0u);
}

// ---- Reshape ------------------------------------------------------------------------------------

TEST(Reshape, KeepsRowMajorOrderAsKerasAndNumpy) {
  // x = 1..6 reshaped to [2, 3, 1] row-major is the image [[1, 2, 3], [4, 5, 6]] (numpy's
  // np.arange(1, 7).reshape(2, 3, 1)); a column-major reshape would give [[1, 3, 5], [2, 4, 6]].
  // Max over the two rows (pool [2, 1]): [4, 5, 6] (column-major: [2, 4, 6]); max over each row
  // (pool [1, 3]): [3, 6] (column-major: [5, 6]).
  const Tensor x = f32({1, 6}, {1, 2, 3, 4, 5, 6});
  auto pooled = [&](const json& pool) {
    const json config = {{"input_shape", {6}},
                         {"loss", nullptr},
                         {"layers",
                          {{{"type", "Reshape"}, {"target_shape", {2, 3, 1}}},
                           {{"type", "MaxPooling2D"}, {"pool_size", pool}}}}};
    return Model::from_config(config).predict(x);
  };
  const Tensor rows = pooled({2, 1});
  EXPECT_EQ(rows.shape, (std::vector<std::int64_t>{1, 1, 3, 1}));
  expect_near_all(values(rows), {4, 5, 6}, 0, "max over rows");
  const Tensor cols = pooled({1, 3});
  EXPECT_EQ(cols.shape, (std::vector<std::int64_t>{1, 2, 1, 1}));
  expect_near_all(values(cols), {3, 6}, 0, "max over each row");
}

TEST(Reshape, InfersTheMinusOneEntryAndKeepsTheConfig) {
  const json config = {{"input_shape", {6}},
                       {"loss", nullptr},
                       {"layers", {{{"type", "Reshape"}, {"target_shape", {-1, 2}}}}}};
  const Model m = Model::from_config(config);
  const Tensor out = m.predict(f32({2, 6}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}));
  EXPECT_EQ(out.shape, (std::vector<std::int64_t>{2, 3, 2}));  // 6 / 2 = 3
  expect_near_all(values(out), {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, 0, "values");
  EXPECT_EQ(m.config()["layers"][0]["name"], "reshape");              // Keras's name
  EXPECT_EQ(m.config()["layers"][0]["target_shape"], json({-1, 2}));  // as given
  EXPECT_EQ(m.count_params(), 0);
  // [2, 3, 1] -> [-1] is a Flatten: 6 values.
  const json flat = {{"input_shape", {2, 3, 1}},
                     {"loss", nullptr},
                     {"layers", {{{"type", "Reshape"}, {"target_shape", {-1}}}}}};
  EXPECT_EQ(Model::from_config(flat).predict(f32({1, 2, 3, 1}, {1, 2, 3, 4, 5, 6})).shape,
            (std::vector<std::int64_t>{1, 6}));
}

// A CNN on the [n, 784] rows that `tensorhub dataset import` stores.
json cnn_on_rows() {
  return {{"input_shape", {784}},
          {"seed", 3},
          {"layers",
           {{{"type", "Reshape"}, {"target_shape", {28, 28, 1}}},
            {{"type", "Conv2D"}, {"filters", 4}, {"kernel_size", 3}, {"activation", "relu"}},
            {{"type", "MaxPooling2D"}},
            {{"type", "Flatten"}},
            {{"type", "Dense"}, {"units", 10}}}}};
}

TEST(Reshape, CnnFromFlatRowsPredictsAsTheSameCnnOnImages) {
  const Model rows = Model::from_config(cnn_on_rows());
  // Conv2D 3x3x1x4 + 4 biases; [28, 28] -> valid 3x3 -> [26, 26, 4] -> pool 2 -> [13, 13, 4]
  // = 676 values -> Dense 10: 676 * 10 + 10.
  EXPECT_EQ(rows.count_params(), 4 * 9 + 4 + 676 * 10 + 10);
  std::vector<float> v(3 * 784);
  std::mt19937 rng(4);
  std::uniform_real_distribution<float> u(0, 1);
  for (auto& e : v) e = u(rng);
  const Tensor out = rows.predict(f32({3, 784}, v));
  EXPECT_EQ(out.shape, (std::vector<std::int64_t>{3, 10}));
  // The same network given images [n, 28, 28, 1] (same weights, same bytes): same outputs.
  json images = cnn_on_rows();
  images["input_shape"] = {28, 28, 1};
  images["layers"].erase(0);
  const Model direct = Model::from_parts(images, rows.weights());
  const std::vector<float> want = values(direct.predict(f32({3, 28, 28, 1}, v)));
  expect_near_all(values(out), std::vector<double>(want.begin(), want.end()), 1e-6, "logits");
}

// ---- bad input ----------------------------------------------------------------------------------

json cnn_with(const json& layer, const json& input_shape = {3, 3, 1}) {
  return {{"input_shape", input_shape},
          {"loss", nullptr},
          {"layers", {layer}}};
}

TEST(BadInput, ShapesThatDoNotFitNameTheLayerAndTheShapes) {
  const json conv = {{"type", "Conv2D"}, {"filters", 2}, {"kernel_size", 3}};
  expect_error([&] { Model::from_config(cnn_with(conv, {784})); }, ErrorKind::kInvalidArgument,
               {"layers[0] (conv2d)", "Conv2D needs inputs of shape [height, width, channels]",
                "got [784]"});
  expect_error([&] { Model::from_config(cnn_with(conv, {28, 28})); },
               ErrorKind::kInvalidArgument, {"[28, 28]", "input_shape [28, 28, 1]"});
  json big = conv;
  big["kernel_size"] = {5, 2};
  expect_error([&] { Model::from_config(cnn_with(big)); }, ErrorKind::kInvalidArgument,
               {"layers[0] (conv2d)", "kernel_size [5, 2] with padding \"valid\"",
                "its input [3, 3, 1]"});
  big["padding"] = "same";
  EXPECT_EQ(Model::from_config(cnn_with(big)).predict(f32({1, 3, 3, 1}, std::vector<float>(9, 0))).shape,
            (std::vector<std::int64_t>{1, 3, 3, 2}));
  expect_error([&] { Model::from_config(cnn_with({{"type", "MaxPooling2D"}, {"pool_size", 4}})); },
               ErrorKind::kInvalidArgument, {"layers[0] (max_pooling2d)", "pool_size [4, 4]"});
  expect_error([&] { Model::from_config(cnn_with({{"type", "BatchNormalization"}}, json::array())); },
               ErrorKind::kInvalidArgument, {"BatchNormalization needs inputs with at least one"});
  // A classifier's output must be [classes]: a Conv2D output needs a Flatten.
  json c = cnn_with(conv, {5, 5, 1});
  c["loss"] = "categorical_crossentropy";
  expect_error([&] { Model::from_config(c); }, ErrorKind::kInvalidArgument,
               {"[3, 3, 2]", "categorical_crossentropy needs [classes]", "Flatten"});
}

TEST(BadInput, FieldsAreNamedWithTheirAllowedValues) {
  const json conv = {{"type", "Conv2D"}, {"filters", 2}, {"kernel_size", 3}};
  json bad = conv;
  bad["padding"] = "full";
  expect_error([&] { Model::from_config(cnn_with(bad)); }, ErrorKind::kInvalidArgument,
               {"layers[0].padding \"full\" is not a padding; allowed: valid, same"});
  bad = conv;
  bad["kernel_size"] = {3, 0};
  expect_error([&] { Model::from_config(cnn_with(bad)); }, ErrorKind::kInvalidArgument,
               {"layers[0].kernel_size must be a positive integer or [height, width]"});
  bad = conv;
  bad.erase("kernel_size");
  expect_error([&] { Model::from_config(cnn_with(bad)); }, ErrorKind::kInvalidArgument,
               {"layers[0].kernel_size is missing"});
  bad = conv;
  bad["filters"] = -1;
  expect_error([&] { Model::from_config(cnn_with(bad)); }, ErrorKind::kInvalidArgument,
               {"layers[0].filters must be a positive integer", "-1"});
  bad = conv;
  bad["data_format"] = "channels_first";
  expect_error([&] { Model::from_config(cnn_with(bad)); }, ErrorKind::kInvalidArgument,
               {"layers[0] has unknown field \"data_format\""});
  expect_error([&] { Model::from_config(cnn_with({{"type", "BatchNormalization"}, {"axis", 1}})); },
               ErrorKind::kInvalidArgument, {"layers[0].axis 1 is not supported; allowed: -1"});
  expect_error([&] { Model::from_config(cnn_with({{"type", "BatchNormalization"}, {"momentum", 2}})); },
               ErrorKind::kInvalidArgument, {"layers[0].momentum = 2 is outside [0, 1]"});

  json opt = bn_only("mse");
  opt["optimizer"] = {{"type", "RMSprop"}, {"beta_1", 0.9}};
  expect_error([&] { Model::from_config(opt); }, ErrorKind::kInvalidArgument,
               {"optimizer has unknown field \"beta_1\"", "centered", "rho"});
  opt["optimizer"] = {{"type", "AdamW"}, {"weight_decay", -1}};
  expect_error([&] { Model::from_config(opt); }, ErrorKind::kInvalidArgument,
               {"optimizer.weight_decay = -1 is outside"});
  opt["optimizer"] = "Adagrad";
  expect_error([&] { Model::from_config(opt); }, ErrorKind::kInvalidArgument,
               {"allowed: Adam, SGD, AdamW, RMSprop"});
  json loss = bn_only("hinge");
  expect_error([&] { Model::from_config(loss); }, ErrorKind::kInvalidArgument,
               {"loss \"hinge\" is not a loss", "categorical_crossentropy", "binary_crossentropy",
                "mse"});
  json metric = bn_only("mse");
  metric["metrics"] = {"accuracy"};
  expect_error([&] { Model::from_config(metric); }, ErrorKind::kInvalidArgument,
               {"metrics[0] \"accuracy\" has no meaning for loss \"mse\""});
}

TEST(BadInput, LabelsMustFitTheLoss) {
  const Tensor x = f32({2, 2}, {1, 2, 3, 4});
  Model cat = identity_classifier("categorical_crossentropy");
  expect_error([&] { cat.fit(x, i64({0, 1}), quiet()); }, ErrorKind::kInvalidArgument,
               {"y has dtype I64; categorical_crossentropy needs F32 one-hot rows",
                "sparse_categorical_crossentropy", "[2, 2]"});
  expect_error([&] { cat.evaluate(x, f32({2}, {0, 1})); }, ErrorKind::kInvalidArgument,
               {"y has shape [2]; categorical_crossentropy needs [2, 2]"});
  Model sparse = identity_classifier("sparse_categorical_crossentropy");
  expect_error([&] { sparse.fit(x, f32({2}, {0, 1}), quiet()); }, ErrorKind::kInvalidArgument,
               {"y has dtype F32; sparse_categorical_crossentropy needs I64 class indices"});
  const json config = {{"input_shape", {2}},
                       {"loss", "binary_crossentropy"},
                       {"layers", {{{"type", "Dense"}, {"units", 1}, {"activation", "sigmoid"}}}}};
  Model binary = Model::from_config(config);
  expect_error([&] { binary.fit(x, f32({2}, {1, 2}), quiet()); }, ErrorKind::kInvalidArgument,
               {"y element 1 = 2", "is not a label in [0, 1]"});
  expect_error([&] { binary.fit(x, f32({2, 2}, {1, 0, 0, 1}), quiet()); },
               ErrorKind::kInvalidArgument, {"y has shape [2, 2]; binary_crossentropy needs [2, 1] or [2]"});
  Model mse = identity_classifier("mse");
  expect_error([&] { mse.fit(x, f32({2, 1}, {1, 2}), quiet()); }, ErrorKind::kInvalidArgument,
               {"y has shape [2, 1]; mse needs [2, 2]"});
  expect_error([&] { mse.fit(x, f32({2, 2}, {1, 2, NAN, 0}), quiet()); },
               ErrorKind::kInvalidArgument, {"y element 2", "is not finite"});
  const Tensor yv = i64({0, 1});
  expect_error([&] { mse.fit(x, f32({2, 2}, {1, 2, 3, 4}), quiet(), &x, &yv); },
               ErrorKind::kInvalidArgument, {"y_val has dtype I64; mse needs F32 targets"});
}

TEST(BadInput, ReshapeTargetShapesThatDoNotFit) {
  auto reshape = [](const json& target) {
    return cnn_with({{"type", "Reshape"}, {"target_shape", target}}, {784});
  };
  expect_error([&] { Model::from_config(reshape({28, 28, 2})); }, ErrorKind::kInvalidArgument,
               {"layers[0] (reshape)", "target_shape [28, 28, 2] does not fit its input [784]",
                "784 values per example", "holds 1568"});
  expect_error([&] { Model::from_config(reshape({-1, 5})); }, ErrorKind::kInvalidArgument,
               {"layers[0] (reshape)", "[-1, 5]", "not a multiple of 5"});
  expect_error([&] { Model::from_config(reshape({-1, -1})); }, ErrorKind::kInvalidArgument,
               {"layers[0].target_shape [-1,-1] has more than one -1"});
  for (const json& bad : {json({0, 784}), json::array(), json("28x28"), json({28.5, 28})})
    expect_error([&] { Model::from_config(reshape(bad)); }, ErrorKind::kInvalidArgument,
                 {"layers[0].target_shape must be a non-empty array of positive integers"});
  expect_error([&] { Model::from_config(cnn_with({{"type", "Reshape"}}, {784})); },
               ErrorKind::kInvalidArgument, {"layers[0].target_shape is missing"});
}

}  // namespace
}  // namespace tensorhub
