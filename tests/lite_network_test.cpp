// tensorhub-serve-lite's pieces on their own: the Eigen network against values worked out by
// hand (Dense, Conv2D with TensorFlow's "same" padding, MaxPooling2D, BatchNormalization,
// softmax), its refusals at load, and the predict body parser (NaN tokens, nesting, base64).
// Its answers against `tensorhub serve`'s are in lite_serve_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <random>

#include "tensorhub/core/error.h"
#include "tensorhub/lite/network.h"
#include "tensorhub/lite/predict_json.h"
#include "test_util.h"

namespace tensorhub {
namespace {

using testing::TempDir;

Tensor f32(std::vector<std::int64_t> shape, std::vector<float> values) {
  return Tensor::from<float>(DType::kF32, std::move(shape), values);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.message();
  }
  return "(no error)";
}

TEST(LiteNetworkTest, DenseComputesXTimesTheTransposedTorchWeightPlusBias) {
  const Json config = {{"input_shape", {2}}, {"layers", {{{"type", "Dense"}, {"units", 3}}}}, {"loss", nullptr}};
  // torch's layout [units, in]: rows (1, 0), (0, 1), (1, 1); bias (0, 0, 1).
  const LiteNetwork net(config, {{"dense.weight", f32({3, 2}, {1, 0, 0, 1, 1, 1})}, {"dense.bias", f32({3}, {0, 0, 1})}});
  const float x[] = {1, 2, -1, 0.5f};
  EXPECT_EQ(net.predict(x, 2), (std::vector<float>{1, 2, 4, -1, 0.5f, 0.5f}));
  EXPECT_EQ(net.output_shape(), (std::vector<std::int64_t>{3}));
}

TEST(LiteNetworkTest, SoftmaxRowsAndReluSigmoidTanh) {
  const Json config = {{"input_shape", {2}},
                       {"layers", {{{"type", "Activation"}, {"activation", "softmax"}}}}, {"loss", nullptr}};
  const LiteNetwork net(config, {});
  const float x[] = {0, std::log(3.0f), 5, 5};
  const auto y = net.predict(x, 2);
  EXPECT_NEAR(y[0], 0.25, 1e-7);
  EXPECT_NEAR(y[1], 0.75, 1e-7);
  EXPECT_NEAR(y[2], 0.5, 1e-7);
  EXPECT_NEAR(y[3], 0.5, 1e-7);
  for (const auto& [name, expected] : std::vector<std::pair<std::string, float>>{
           {"relu", 0.0f}, {"sigmoid", 1 / (1 + std::exp(2.0f))}, {"tanh", std::tanh(-2.0f)}}) {
    const LiteNetwork a({{"input_shape", {1}}, {"layers", {{{"type", "Activation"}, {"activation", name}}}}}, {});
    const float v = -2;
    EXPECT_NEAR(a.predict(&v, 1)[0], expected, 1e-7) << name;
  }
}

// A 3x3 image of ones, a 3x3 kernel of ones, "same": each output counts the pixels its window
// covers: 4 in the corners, 6 on the edges, 9 in the middle; plus the bias.
TEST(LiteNetworkTest, Conv2DSamePaddingCountsTheWindowsPixels) {
  const Json config = {{"input_shape", {3, 3, 1}},
                       {"layers", {{{"type", "Conv2D"}, {"filters", 1}, {"kernel_size", 3}, {"padding", "same"}}}}};
  const LiteNetwork net(config, {{"conv2d.weight", f32({1, 1, 3, 3}, std::vector<float>(9, 1))},
                                 {"conv2d.bias", f32({1}, {0.5f})}});
  const std::vector<float> ones(9, 1);
  EXPECT_EQ(net.predict(ones.data(), 1), (std::vector<float>{4.5f, 6.5f, 4.5f, 6.5f, 9.5f, 6.5f, 4.5f, 6.5f, 4.5f}));
}

// Two input channels, two filters, kernel 1x2 "valid": filter 0 reads channel 0 of both
// columns, filter 1 channel 1 of the left column minus the right one (torch's weight layout
// [filters, channels, kh, kw]).
TEST(LiteNetworkTest, Conv2DReadsTorchsWeightLayoutOverChannelsLastImages) {
  const Json config = {{"input_shape", {1, 2, 2}},
                       {"layers", {{{"type", "Conv2D"}, {"filters", 2}, {"kernel_size", {1, 2}}, {"use_bias", false}}}}};
  const LiteNetwork net(config, {{"conv2d.weight", f32({2, 2, 1, 2}, {1, 1, 0, 0, 0, 0, 1, -1})}});
  // pixel (0,0) = (c0 1, c1 10), pixel (0,1) = (c0 2, c1 30)
  const float x[] = {1, 10, 2, 30};
  EXPECT_EQ(net.predict(x, 1), (std::vector<float>{3, -20}));
}

// "same" max pooling of a 3x3 image, pool 2, stride 2: the padded row and column (bottom,
// right) never win, even over negative values.
TEST(LiteNetworkTest, MaxPoolingSameIgnoresItsPadding) {
  const Json config = {{"input_shape", {3, 3, 1}},
                       {"layers", {{{"type", "MaxPooling2D"}, {"pool_size", 2}, {"padding", "same"}}}}};
  const LiteNetwork net(config, {});
  const float x[] = {-1, -2, -3, -4, -5, -6, -7, -8, -9};
  EXPECT_EQ(net.predict(x, 1), (std::vector<float>{-1, -3, -7, -9}));
}

// (x - mean) / sqrt(var + eps) * gamma + beta with mean 1, var 3, eps 1, gamma 2, beta 1:
// x = 5 gives 5, x = 1 gives 1; the second channel (mean 0, var 0, gamma 1, beta 0, eps 1) is x.
TEST(LiteNetworkTest, BatchNormalizationUsesTheMovingAverages) {
  const Json config = {{"input_shape", {2}}, {"layers", {{{"type", "BatchNormalization"}, {"epsilon", 1.0}}}}};
  const LiteNetwork net(config, {{"batch_normalization.gamma", f32({2}, {2, 1})},
                                 {"batch_normalization.beta", f32({2}, {1, 0})},
                                 {"batch_normalization.moving_mean", f32({2}, {1, 0})},
                                 {"batch_normalization.moving_variance", f32({2}, {3, 0})}});
  const float x[] = {5, 7, 1, -2};
  const auto y = net.predict(x, 2);
  EXPECT_NEAR(y[0], 5, 1e-6);
  EXPECT_NEAR(y[1], 7, 1e-6);
  EXPECT_NEAR(y[2], 1, 1e-6);
  EXPECT_NEAR(y[3], -2, 1e-6);
}

// Embedding table row i = (i, 10 i + 1) for input_dim 4; GlobalAveragePooling1D averages the
// looked-up rows: ids [1, 3, 3] -> ((1 + 3 + 3) / 3, (11 + 31 + 31) / 3); with mask_zero, ids
// [2, 0, 3] -> mean of rows 2 and 3 = (2.5, 26), and [0, 0, 0] (all masked) -> zeros.
TEST(LiteNetworkTest, EmbeddingLooksUpRowsAndTheMaskedAverageSkipsIdZero) {
  const NamedTensors table = {{"embedding.weight", f32({4, 2}, {0, 1, 1, 11, 2, 21, 3, 31})}};
  auto config = [](bool mask_zero) {
    return Json{{"input_shape", {3}},
                {"layers",
                 {{{"type", "Embedding"}, {"input_dim", 4}, {"output_dim", 2}, {"mask_zero", mask_zero}},
                  {{"type", "GlobalAveragePooling1D"}}}}};
  };
  const LiteNetwork plain(config(false), table);
  const float a[] = {1, 3, 3, 2, 0, 3};
  const auto y = plain.predict(a, 2);
  ASSERT_EQ(y.size(), 4u);
  EXPECT_NEAR(y[0], 7.0 / 3, 1e-6);
  EXPECT_NEAR(y[1], 73.0 / 3, 1e-5);
  EXPECT_NEAR(y[2], 5.0 / 3, 1e-6);
  EXPECT_NEAR(y[3], 53.0 / 3, 1e-5);
  const LiteNetwork masked(config(true), table);
  const float b[] = {2, 0, 3, 0, 0, 0};
  EXPECT_EQ(masked.predict(b, 2), (std::vector<float>{2.5f, 26, 0, 0}));
  // Ids that are not integers in [0, 4): a clear error naming the layer, never a read out of
  // the table.
  for (float bad : {4.0f, -1.0f, 0.5f, std::nanf("")}) {
    const float c[] = {0, 1, bad};
    const std::string e = error_of([&] { plain.predict(c, 1); });
    EXPECT_NE(e.find("Embedding layer \"embedding\": input value"), std::string::npos) << e;
    EXPECT_NE(e.find("is not an integer id in [0, 4)"), std::string::npos) << e;
  }
}

// Conv1D kernel 2 over one channel [1, 2, 4] with "same" and stride 1: padding 1, all after
// (TensorFlow's rule), so outputs are w0 x[t] + w1 x[t + 1] (x[3] = 0); two filters (1, 10) and
// (-1, 0) in torch's layout [filters, channels, k], bias (0, 0.5). Then MaxPooling1D (pool 2):
// filter 0 over steps (21, 42, 4) -> 42 (the third step is dropped, "valid"); filter 1
// (-0.5, -1.5, -3.5) -> -0.5.
TEST(LiteNetworkTest, Conv1DSamePaddingAndMaxPooling1D) {
  const Json config = {{"input_shape", {3, 1}},
                       {"layers",
                        {{{"type", "Conv1D"}, {"filters", 2}, {"kernel_size", 2}, {"padding", "same"}},
                         {{"type", "MaxPooling1D"}}}}};
  const LiteNetwork net(config, {{"conv1d.weight", f32({2, 1, 2}, {1, 10, -1, 0})}, {"conv1d.bias", f32({2}, {0, 0.5f})}});
  const float x[] = {1, 2, 4};
  EXPECT_EQ(net.predict(x, 1), (std::vector<float>{42, -0.5f}));
  EXPECT_EQ(net.output_shape(), (std::vector<std::int64_t>{1, 2}));
}

TEST(LiteNetworkTest, RefusesWhatItCannotRunNamingTheLayerOrTheWeight) {
  const Json lstm = {{"input_shape", {4}}, {"layers", {{{"type", "Dense"}, {"units", 2}}, {{"type", "LSTM"}, {"units", 2}}}}};
  EXPECT_NE(error_of([&] { LiteNetwork(lstm, {}); }).find("layers[1].type \"LSTM\" is not a layer"), std::string::npos);
  const Json dense = {{"input_shape", {2}}, {"layers", {{{"type", "Dense"}, {"units", 3}}}}};
  EXPECT_EQ(error_of([&] { LiteNetwork(dense, {{"dense.weight", f32({3, 2}, std::vector<float>(6))}}); }),
            "weights: missing tensor \"dense.bias\" of shape [3]");
  EXPECT_EQ(error_of([&] {
              LiteNetwork(dense, {{"dense.weight", f32({2, 3}, std::vector<float>(6))}, {"dense.bias", f32({3}, {0, 0, 0})}});
            }),
            "weights[\"dense.weight\"] has shape [2, 3]; the config needs [3, 2]");
  EXPECT_NE(error_of([&] { LiteNetwork(dense, {{"lstm.kernel", f32({1}, {0})}}); }).find("unexpected tensor \"lstm.kernel\""),
            std::string::npos);
}

TEST(LiteNetworkTest, LoadNamesATorchScriptModelAsServesAndAMissingWeightsFile) {
  TempDir dir;
  std::ofstream(dir.path() / "model.pt") << "not read";
  EXPECT_NE(error_of([&] { LiteNetwork::load(dir.path()); }).find("is a TorchScript model"), std::string::npos);
  std::ofstream(dir.path() / "model.json") << R"({"input_shape": [2], "layers": [{"type": "Dense", "units": 1}]})";
  EXPECT_NE(error_of([&] { LiteNetwork::load(dir.path()); }).find("weights.safetensors is missing"), std::string::npos);
}

LiteSignature scalar_signature() {
  return LiteSignature::from_config({{"signature", {{"inputs", "x"}, {"outputs", "y"}}}}, {}, {});
}

TEST(LitePredictJsonTest, RowsColumnsAndTheNonFiniteTokens) {
  const LiteSignature sig = scalar_signature();
  auto r = parse_lite_predict(R"({"instances": [NaN, Infinity, -Infinity, 1.5]})", sig);
  ASSERT_EQ(r.batch, 4);
  EXPECT_TRUE(std::isnan(r.values[0]));
  EXPECT_EQ(r.values[1], INFINITY);
  EXPECT_EQ(r.values[2], -INFINITY);
  EXPECT_EQ(format_lite_predict(r.values, 4, sig, true), R"({"predictions":[NaN,Infinity,-Infinity,1.5]})");
  r = parse_lite_predict(R"({"inputs": {"x": [3, 4]}})", sig);
  EXPECT_FALSE(r.row_format);
  EXPECT_EQ(format_lite_predict(r.values, r.batch, sig, false), R"({"outputs":[3.0,4.0]})");
  // A string that spells a token is a string, not a number.
  EXPECT_NE(error_of([&] { parse_lite_predict(R"({"instances": ["NaN"]})", sig); }).find("Type: String is not of expected type: float"),
            std::string::npos);
  EXPECT_NE(error_of([&] { parse_lite_predict(R"({"instances": [nan]})", sig); }).find("JSON Parse error"), std::string::npos);
}

TEST(LitePredictJsonTest, AnyNestingOfTheRightSizeAndRaggedListsRefused) {
  const LiteSignature sig = LiteSignature::from_config(Json::object(), {4}, {1});
  const auto r = parse_lite_predict(R"({"instances": [[[1, 2], [3, 4]], [[5, 6], [7, 8]]]})", sig);
  EXPECT_EQ(r.batch, 2);
  EXPECT_EQ(r.values, (std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(error_of([&] { parse_lite_predict(R"({"instances": [[1, 2, 3]]})", sig); }),
            "input inputs: each instance has shape [3] (3 values) but the model takes [4] (4 values)");
  EXPECT_EQ(error_of([&] { parse_lite_predict(R"({"instances": [[[1, 2], [3]]]})", sig); }),
            "Failed to process element: 0 of 'instances' list. Error: Encountered list at unexpected size: 1 at "
            "level: 1 expected size: 2");
  const std::string deep = R"({"instances": )" + std::string(65, '[') + "1" + std::string(65, ']') + "}";
  EXPECT_EQ(error_of([&] { parse_lite_predict(deep, sig); }),
            "JSON Parse error: nesting deeper than 64 levels of arrays and objects (the most this server reads)");
}

// The one-pass reader of plain number lists and the DOM reader it hands everything else to
// give the same values (blanks, exponents, -0, NaN; a key it does not read; a name with an escape).
TEST(LitePredictJsonTest, TheFastPathAndTheDomPathReadTheSameValues) {
  const LiteSignature sig = LiteSignature::from_config(Json::object(), {2, 2}, {1});
  for (const std::string body : {R"( { "instances" : [ [ [1, 2.5e0] , [-0, NaN] ] ] , "signature_name":"serving_default" } )",
                                 R"({"instances": [[[1, 2.5e0], [-0, NaN]]], "extra": 1})",
                                 R"({"instances": [[[1, 2.5e0], [-0, NaN]]], "signature_name": "serving_defaul\u0074"})",
                                 R"({"inputs": {"inputs": [[[1, 25E-1], [-0.0, NaN]]]}})"}) {
    const auto r = parse_lite_predict(body, sig);
    ASSERT_EQ(r.batch, 1) << body;
    ASSERT_EQ(r.values.size(), 4u) << body;
    EXPECT_EQ(r.values[0], 1) << body;
    EXPECT_EQ(r.values[1], 2.5f) << body;
    EXPECT_EQ(r.values[2], 0) << body;
    EXPECT_TRUE(std::isnan(r.values[3])) << body;
  }
  // Ragged, a list where a number was, a number where a list was: the DOM path's messages.
  EXPECT_NE(error_of([&] { parse_lite_predict(R"({"instances": [[[1, 2], [3, [4]]]]})", sig); }).find("Failed to process element: 0"),
            std::string::npos);
  EXPECT_NE(error_of([&] { parse_lite_predict(R"({"instances": [[[1, 2], 3]]})", sig); }).find("Failed to process element: 0"),
            std::string::npos);
}

// Every prefix of a valid body and 20,000 single-byte mutations of it (fixed seed): each is
// either read as whole examples of the model's size or refused with InvalidArgument, never
// anything else (what scripts/fuzz checks for serve's parser, here in the suite).
TEST(LitePredictJsonTest, TruncatedAndMutatedBodiesAreReadWholeOrRefused) {
  const LiteSignature sig = LiteSignature::from_config(Json::object(), {2, 2}, {1});
  const std::string body = R"({"signature_name": "serving_default", "instances": [[[1.5, -2e3], [NaN, 0]], [[7, 8], [9, -Infinity]]]})";
  const auto check = [&](const std::string& b) {
    try {
      const auto r = parse_lite_predict(b, sig);
      EXPECT_GE(r.batch, 1) << b;
      EXPECT_EQ(static_cast<std::int64_t>(r.values.size()), r.batch * 4) << b;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << b << ": " << e.what();
    }
  };
  for (std::size_t n = 0; n <= body.size(); ++n) check(body.substr(0, n));
  std::mt19937 rng(16);
  const std::string alphabet = "[]{},:\"\\ -+.0123456789eEaNIn\x01\xff";
  for (int i = 0; i < 20000; ++i) {
    std::string b = body;
    b[rng() % b.size()] = alphabet[rng() % alphabet.size()];
    check(b);
  }
}

TEST(LitePredictJsonTest, Base64OfRfc4648AndRawUint8Decoding) {
  EXPECT_EQ(lite_base64_decode("Zm9vYmFy"), "foobar");
  EXPECT_EQ(lite_base64_decode("Zm9vYg=="), "foob");
  EXPECT_EQ(lite_base64_decode("Zm9vYg"), "foob");
  EXPECT_EQ(lite_base64_decode(""), "");
  EXPECT_EQ(error_of([] { lite_base64_decode("Zm9v!"); }), "Unable to base64 decode");
  EXPECT_EQ(error_of([] { lite_base64_decode("Zm9vY"); }), "Unable to base64 decode");
  const Json config = {{"signature", {{"inputs", "image_bytes"}, {"outputs", "p"}, {"input_dtype", "DT_STRING"},
                                      {"decode", "raw_uint8"}, {"decode_scale", 0.5}}}};
  const LiteSignature sig = LiteSignature::from_config(config, {2}, {1});
  // "AP8=" is the bytes 0x00 0xff.
  const auto r = parse_lite_predict(R"({"instances": [{"b64": "AP8="}]})", sig);
  EXPECT_EQ(r.values, (std::vector<float>{0, 127.5f}));
  EXPECT_NE(error_of([&] { parse_lite_predict(R"({"instances": [{"b64": "AA=="}]})", sig); }).find("has 1 bytes"),
            std::string::npos);
}

}  // namespace
}  // namespace tensorhub
