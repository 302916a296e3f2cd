// Tests of the sequence layers of model.json (Embedding, GlobalAveragePooling1D, Conv1D,
// MaxPooling1D) and of Model::layer_output, in libtorch. Every expected value is computed in
// the test itself: by hand in the comments (lookups and means), or by plain loops over the
// weights (Conv1D with TensorFlow's "same" padding rule, MaxPooling1D).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <tuple>
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
using testing::quiet;
using testing::TempDir;
using testing::values;
using Shape = std::vector<std::int64_t>;

void expect_near_all(const std::vector<float>& got, const std::vector<double>& want, double tolerance,
                     const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tolerance) << what << " [" << i << "]";
}

// The table of an Embedding with input_dim 4, output_dim 2: row i = (i, 10 i + 1).
Tensor table4x2() { return f32({4, 2}, {0, 1, 1, 11, 2, 21, 3, 31}); }

json embedding_average(bool mask_zero) {
  return {{"input_shape", {3}},
          {"loss", nullptr},
          {"layers",
           {{{"type", "Embedding"}, {"input_dim", 4}, {"output_dim", 2}, {"mask_zero", mask_zero}},
            {{"type", "GlobalAveragePooling1D"}}}}};
}

// ---- Embedding and GlobalAveragePooling1D --------------------------------------------------

TEST(Embedding, LooksUpRowsAndGlobalAveragePooling1DAveragesTheSteps) {
  const Model m = Model::from_parts(embedding_average(false), {{"embedding.weight", table4x2()}});
  // ids [1, 3, 3]: rows (1, 11), (3, 31), (3, 31): mean (7/3, 73/3); ids [0, 2, 1]: (1, 11).
  const Tensor x = f32({2, 3}, {1, 3, 3, 0, 2, 1});
  const Tensor y = m.predict(x);
  EXPECT_EQ(y.shape, (Shape{2, 2}));
  expect_near_all(values(y), {7.0 / 3, 73.0 / 3, 1, 11}, 1e-5, "mean of rows");
  // The Embedding's own output: the rows, [2, 3, 2].
  const Tensor e = m.layer_output("embedding", x);
  EXPECT_EQ(e.shape, (Shape{2, 3, 2}));
  expect_near_all(values(e), {1, 11, 3, 31, 3, 31, 0, 1, 2, 21, 1, 11}, 0, "rows");
  EXPECT_EQ(m.count_params(), 8);
}

TEST(Embedding, MaskZeroAveragesOnlyTheNonZeroIdsAsKeras) {
  const Model m = Model::from_parts(embedding_average(true), {{"embedding.weight", table4x2()}});
  // [2, 0, 3]: (2, 21) and (3, 31) -> (2.5, 26); [0, 0, 1]: (1, 11) alone; [0, 0, 0]: every step
  // masked -> zeros (Keras would divide 0 by 0).
  const Tensor y = m.predict(f32({3, 3}, {2, 0, 3, 0, 0, 1, 0, 0, 0}));
  expect_near_all(values(y), {2.5, 26, 1, 11, 0, 0}, 1e-6, "masked mean");
  // Without the mask the zeros count: [2, 0, 3] -> ((2 + 0 + 3) / 3, (21 + 1 + 31) / 3).
  const Model plain = Model::from_parts(embedding_average(false), {{"embedding.weight", table4x2()}});
  expect_near_all(values(plain.predict(f32({1, 3}, {2, 0, 3}))), {5.0 / 3, 53.0 / 3}, 1e-5, "unmasked");
}

TEST(Embedding, OutOfRangeOrFractionalIdsAreAnInvalidArgumentNamingTheLayer) {
  const Model m = Model::from_parts(embedding_average(false), {{"embedding.weight", table4x2()}});
  expect_error([&] { m.predict(f32({2, 3}, {0, 1, 2, 3, 4, 0})); }, ErrorKind::kInvalidArgument,
               {"Embedding layer \"embedding\": input value 4 (element 4", "in [0, 4)", "input_dim = 4"});
  expect_error([&] { m.predict(f32({1, 3}, {0, -1, 2})); }, ErrorKind::kInvalidArgument, {"input value -1"});
  expect_error([&] { m.predict(f32({1, 3}, {0, 1.5f, 2})); }, ErrorKind::kInvalidArgument, {"input value 1.5"});
  // fit and evaluate stop the same way, before any step.
  json config = embedding_average(false);
  config["loss"] = "mse";
  Model t = Model::from_parts(config, {{"embedding.weight", table4x2()}});
  const NamedTensors before = t.weights();
  expect_error([&] { t.fit(f32({2, 3}, {0, 1, 2, 3, 9, 0}), f32({2, 2}, {0, 0, 0, 0}), quiet(1, 2, 5)); },
               ErrorKind::kInvalidArgument, {"input value 9"});
  EXPECT_TRUE(t.weights().at("embedding.weight").data == before.at("embedding.weight").data);
  // A bad id past the first batch is named at its place in x (row 1500, column 2: element
  // 4502), not in the batch predict or fit meets it in; fit stops before the first step.
  std::vector<float> many(2000 * 3, 1.0f);
  many[1500 * 3 + 2] = 7;
  expect_error([&] { m.predict(f32({2000, 3}, many), 1024); }, ErrorKind::kInvalidArgument,
               {"input value 7 (element 4502 of its input"});
  expect_error([&] { t.fit(f32({2000, 3}, many), f32({2000, 2}, std::vector<float>(4000, 0)), quiet(1, 64, 5)); },
               ErrorKind::kInvalidArgument, {"input value 7 (element 4502 of its input"});
  EXPECT_TRUE(t.weights().at("embedding.weight").data == before.at("embedding.weight").data);
  // Integer dtypes are taken as ids, checked in their own dtype.
  const Tensor ids = Tensor::from<std::int64_t>(DType::kI64, {1, 3}, {1, 3, 3});
  expect_near_all(values(m.predict(ids)), {7.0 / 3, 73.0 / 3}, 1e-5, "I64 ids");
  const Tensor huge = Tensor::from<std::int64_t>(DType::kI64, {1, 3}, {1, 3, (std::int64_t{1} << 33) + 1});
  expect_error([&] { m.predict(huge); }, ErrorKind::kInvalidArgument, {"input value 8589934593"});
}

TEST(Embedding, KerasUniformInitialiserSeeded) {
  const json config = {{"input_shape", {2}},
                       {"seed", 3},
                       {"loss", nullptr},
                       {"layers", {{{"type", "Embedding"}, {"input_dim", 100}, {"output_dim", 20}}}}};
  const std::vector<float> w = values(Model::from_config(config).weights().at("embedding.weight"));
  ASSERT_EQ(w.size(), 2000u);
  // RandomUniform(-0.05, 0.05): inside the bounds and spread over them (2000 draws).
  EXPECT_LE(*std::max_element(w.begin(), w.end()), 0.05f);
  EXPECT_GE(*std::min_element(w.begin(), w.end()), -0.05f);
  EXPECT_GT(*std::max_element(w.begin(), w.end()), 0.049f);
  EXPECT_LT(*std::min_element(w.begin(), w.end()), -0.049f);
  EXPECT_EQ(values(Model::from_config(config).weights().at("embedding.weight")), w) << "seeded";
}

// Sequences of 6 ids in [1, 20): class 0 draws them from [1, 10), class 1 from [10, 20), each
// example padded with 0 to a random length of 2..6 (the mask_zero case). x F32 [n, 6], y I64.
void two_vocabularies(std::int64_t n, std::uint32_t seed, Tensor& x, Tensor& y) {
  std::mt19937 rng(seed);
  std::vector<float> xs;
  std::vector<std::int64_t> ys;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t cls = rng() % 2;
    const unsigned length = 2 + rng() % 5;
    for (unsigned t = 0; t < 6; ++t)
      xs.push_back(t < length ? static_cast<float>(cls == 0 ? 1 + rng() % 9 : 10 + rng() % 10) : 0.0f);
    ys.push_back(cls);
  }
  x = f32({n, 6}, xs);
  y = i64(ys);
}

json bag_of_words(bool mask_zero) {
  return {{"input_shape", {6}},
          {"seed", 7},
          {"layers",
           {{{"type", "Embedding"}, {"input_dim", 20}, {"output_dim", 8}, {"mask_zero", mask_zero}},
            {{"type", "GlobalAveragePooling1D"}},
            {{"type", "Dense"}, {"units", 2}}}},
          {"metrics", {"accuracy"}},
          {"optimizer", {{"type", "Adam"}, {"learning_rate", 0.02}}}};
}

TEST(Embedding, BagOfWordsModelLearnsTwoVocabulariesSavesAndResumes) {
  for (bool mask_zero : {false, true}) {
    SCOPED_TRACE(mask_zero ? "mask_zero" : "no mask");
    Tensor x, y, xt, yt;
    two_vocabularies(400, 1, x, y);
    two_vocabularies(300, 2, xt, yt);
    Model m = Model::from_config(bag_of_words(mask_zero));
    EXPECT_EQ(m.count_params(), 20 * 8 + 8 * 2 + 2);
    const double before = m.evaluate(xt, yt).accuracy;
    m.fit(x, y, quiet(10, 32, 5));
    const Evaluation ev = m.evaluate(xt, yt);
    EXPECT_GE(ev.accuracy, 0.97) << "loss " << ev.loss << ", accuracy before training " << before;
    // Saved and loaded: the same predictions; training resumes from the optimizer state.
    TempDir dir;
    m.save((dir / "bow").string());
    Model loaded = Model::load((dir / "bow").string());
    EXPECT_TRUE(loaded.predict(xt).data == m.predict(xt).data);
    EXPECT_EQ(loaded.weights().at("embedding.weight").shape, (Shape{20, 8}));
    EXPECT_EQ(loaded.epochs_done(), 10);
    FitOptions more = quiet(11, 32, 5);
    more.initial_epoch = 10;
    m.fit(x, y, more);
    loaded.fit(x, y, more);
    EXPECT_TRUE(loaded.weights().at("embedding.weight").data == m.weights().at("embedding.weight").data)
        << "a resumed fit takes the same step as the uninterrupted one";
  }
}

// ---- layer_output --------------------------------------------------------------------------

TEST(LayerOutput, EmbeddingGivesTheWeightRowsOfTheIdsAndOtherLayersTheirOutputs) {
  Tensor x, y;
  two_vocabularies(50, 3, x, y);
  Model m = Model::from_config(bag_of_words(false));
  m.fit(x, y, quiet(1, 16, 5));
  const Tensor w = m.weights().at("embedding.weight");
  const Tensor rows = m.layer_output("embedding", x, 7);
  ASSERT_EQ(rows.shape, (Shape{50, 6, 8}));
  const float* r = rows.as<float>();
  const float* table = w.as<float>();
  for (std::int64_t i = 0; i < 50 * 6; ++i) {
    const auto id = static_cast<std::int64_t>(x.as<float>()[i]);
    for (int d = 0; d < 8; ++d) ASSERT_EQ(r[i * 8 + d], table[id * 8 + d]) << "id " << id;
  }
  // The pooling's output is the mean of those rows; the last layer's is predict's.
  const Tensor pooled = m.layer_output("global_average_pooling1d", x);
  ASSERT_EQ(pooled.shape, (Shape{50, 8}));
  for (int d = 0; d < 8; ++d) {
    double sum = 0;
    for (int t = 0; t < 6; ++t) sum += r[t * 8 + d];
    EXPECT_NEAR(pooled.as<float>()[d], sum / 6, 1e-6);
  }
  EXPECT_EQ(values(m.layer_output("dense", x)), values(m.predict(x)));
  expect_error([&] { m.layer_output("dense_7", x); }, ErrorKind::kNotFound,
               {"layer \"dense_7\" is not in this model; its layers are: embedding, global_average_pooling1d, dense"});
}

// ---- Conv1D and MaxPooling1D against loops -------------------------------------------------

// Conv1D computed by loops from torch-layout weights w [f, c, k] and bias [f], channels_last
// x [n, steps, c], TensorFlow's padding: out = ceil(steps / s) for same (pad (out-1) s + k -
// steps, the smaller half before), (steps - k) / s + 1 for valid.
std::vector<double> conv1d_loops(const std::vector<float>& x, std::int64_t n, std::int64_t steps, std::int64_t c,
                                 const std::vector<float>& w, const std::vector<float>& b, std::int64_t f,
                                 std::int64_t k, std::int64_t s, bool same, std::int64_t& out_steps) {
  std::int64_t before = 0;
  if (same) {
    out_steps = (steps + s - 1) / s;
    before = std::max<std::int64_t>((out_steps - 1) * s + k - steps, 0) / 2;
  } else {
    out_steps = (steps - k) / s + 1;
  }
  std::vector<double> y;
  for (std::int64_t e = 0; e < n; ++e)
    for (std::int64_t o = 0; o < out_steps; ++o)
      for (std::int64_t fi = 0; fi < f; ++fi) {
        double acc = b[fi];
        for (std::int64_t j = 0; j < k; ++j) {
          const std::int64_t t = o * s + j - before;
          if (t < 0 || t >= steps) continue;
          for (std::int64_t ch = 0; ch < c; ++ch) acc += x[(e * steps + t) * c + ch] * w[(fi * c + ch) * k + j];
        }
        y.push_back(acc);
      }
  return y;
}

TEST(Conv1D, MatchesLoopsForValidAndSamePaddingWithStrides) {
  std::mt19937 rng(4);
  std::normal_distribution<float> g(0, 1);
  const std::int64_t n = 3, steps = 10, c = 3, f = 4;
  std::vector<float> xs(n * steps * c);
  for (auto& v : xs) v = g(rng);
  for (const auto& [k, s, same] : std::vector<std::tuple<std::int64_t, std::int64_t, bool>>{
           {3, 1, false}, {4, 2, true}, {3, 3, true}, {2, 3, false}, {5, 1, true}}) {
    SCOPED_TRACE("kernel " + std::to_string(k) + " stride " + std::to_string(s) + (same ? " same" : " valid"));
    std::vector<float> w(f * c * k), b(f);
    for (auto& v : w) v = g(rng);
    for (auto& v : b) v = g(rng);
    const json config = {{"input_shape", {steps, c}},
                         {"loss", nullptr},
                         {"layers",
                          {{{"type", "Conv1D"}, {"filters", f}, {"kernel_size", k}, {"strides", s},
                            {"padding", same ? "same" : "valid"}}}}};
    const Model m = Model::from_parts(config, {{"conv1d.weight", f32({f, c, k}, w)}, {"conv1d.bias", f32({f}, b)}});
    std::int64_t out_steps = 0;
    const std::vector<double> want = conv1d_loops(xs, n, steps, c, w, b, f, k, s, same, out_steps);
    const Tensor y = m.predict(f32({n, steps, c}, xs));
    EXPECT_EQ(y.shape, (Shape{n, out_steps, f}));
    expect_near_all(values(y), want, 1e-4, "conv1d");
  }
}

TEST(Conv1D, GlorotUniformOverTheReceptiveFieldAndActivation) {
  const json config = {{"input_shape", {8, 5}},
                       {"seed", 2},
                       {"loss", nullptr},
                       {"layers", {{{"type", "Conv1D"}, {"filters", 7}, {"kernel_size", 3}, {"activation", "relu"}}}}};
  const Model m = Model::from_config(config);
  EXPECT_EQ(m.count_params(), 7 * 5 * 3 + 7);
  const std::vector<float> w = values(m.weights().at("conv1d.weight"));
  // Keras: fan_in = 3 * 5, fan_out = 3 * 7, limit sqrt(6 / 36).
  const double limit = std::sqrt(6.0 / (15 + 21));
  EXPECT_LE(*std::max_element(w.begin(), w.end()), limit);
  EXPECT_GT(*std::max_element(w.begin(), w.end()), 0.8 * limit);
  EXPECT_EQ(values(m.weights().at("conv1d.bias")), std::vector<float>(7, 0.0f));
  std::vector<float> xs(2 * 8 * 5);
  for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(static_cast<float>(i));
  for (float v : values(m.predict(f32({2, 8, 5}, xs)))) EXPECT_GE(v, 0.0f) << "relu";
}

TEST(MaxPooling1D, DefaultPoolOfTwoAndSamePaddingThatNeverWins) {
  // Steps of one channel: 1, -5, 3, 2, -1 with pool 2 (stride 2, valid): max(1, -5) = 1,
  // max(3, 2) = 3. Same, pool 2 stride 2 on 5 steps: 3 outputs, the last window (-1, pad) -> -1.
  // Negative values show the padding is never a 0 that wins.
  const Tensor x = f32({1, 5, 1}, {1, -5, 3, 2, -1});
  auto pool = [&](json layer) {
    const json config = {{"input_shape", {5, 1}}, {"loss", nullptr}, {"layers", json::array({layer})}};
    return values(Model::from_config(config).predict(x));
  };
  EXPECT_EQ(pool({{"type", "MaxPooling1D"}}), (std::vector<float>{1, 3}));
  EXPECT_EQ(pool({{"type", "MaxPooling1D"}, {"padding", "same"}}), (std::vector<float>{1, 3, -1}));
  // pool 3 stride 1 same: padding 1 before, 1 after.
  EXPECT_EQ(pool({{"type", "MaxPooling1D"}, {"pool_size", 3}, {"strides", 1}, {"padding", "same"}}),
            (std::vector<float>{1, 3, 3, 3, 2}));
  // Two channels: channels pool apart.
  const json config2 = {{"input_shape", {2, 2}}, {"loss", nullptr}, {"layers", {{{"type", "MaxPooling1D"}}}}};
  EXPECT_EQ(values(Model::from_config(config2).predict(f32({1, 2, 2}, {1, 9, 4, -2}))), (std::vector<float>{4, 9}));
}

TEST(Conv1D, TextCnnTrainsSavesAndReloads) {
  // Embedding -> Conv1D -> MaxPooling1D -> GlobalAveragePooling1D -> Dense on the two
  // vocabularies; reloaded it predicts identically.
  const json config = {{"input_shape", {6}},
                       {"seed", 9},
                       {"layers",
                        {{{"type", "Embedding"}, {"input_dim", 20}, {"output_dim", 6}},
                         {{"type", "Conv1D"}, {"filters", 5}, {"kernel_size", 3}, {"padding", "same"}, {"activation", "relu"}},
                         {{"type", "MaxPooling1D"}},
                         {{"type", "GlobalAveragePooling1D"}},
                         {{"type", "Dense"}, {"units", 2}}}},
                       {"optimizer", {{"type", "Adam"}, {"learning_rate", 0.02}}}};
  Tensor x, y, xt, yt;
  two_vocabularies(400, 5, x, y);
  two_vocabularies(200, 6, xt, yt);
  Model m = Model::from_config(config);
  m.fit(x, y, quiet(10, 32, 5));
  EXPECT_GE(m.evaluate(xt, yt).accuracy, 0.95);
  TempDir dir;
  m.save((dir / "cnn").string());
  EXPECT_TRUE(Model::load((dir / "cnn").string()).predict(xt).data == m.predict(xt).data);
}

}  // namespace
}  // namespace tensorhub
