// The parsing half of model.json (tensorhub/train/layer_spec.h): shapes, Keras names, padding
// and errors, checked without building a Model (nothing here touches libtorch).
#include "tensorhub/train/layer_spec.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tensorhub/core/error.h"
#include "test_util.h"

namespace tensorhub {
namespace {

using nlohmann::json;
using testing::expect_error;
using Shape = std::vector<std::int64_t>;

TEST(LayerSpecTest, InfersShapesAndKerasNamesOfACnn) {
  const json config = {
      {"layers",
       {{{"type", "Input"}, {"shape", {28, 28, 1}}},
        {{"type", "Conv2D"}, {"filters", 8}, {"kernel_size", 3}, {"padding", "same"}, {"strides", 2}},
        {{"type", "Conv2D"}, {"filters", 4}, {"kernel_size", {3, 5}}, {"use_bias", false}},
        {{"type", "MaxPooling2D"}},
        {{"type", "Flatten"}},
        {{"type", "Dense"}, {"units", 10}, {"activation", "softmax"}, {"name", "out"}}}}};
  const NetworkSpec net = parse_network(config);
  ASSERT_EQ(net.layers.size(), 6u);
  EXPECT_EQ(net.input_shape, (Shape{28, 28, 1}));
  // same, stride 2: ceil(28 / 2) = 14; padding max((14 - 1) 2 + 3 - 28, 0) = 1: 0 before, 1 after.
  const LayerSpec& c1 = net.layers[1];
  EXPECT_EQ(c1.name, "conv2d");
  EXPECT_EQ(c1.output_shape, (Shape{14, 14, 8}));
  EXPECT_EQ(c1.pad_top, 0);
  EXPECT_EQ(c1.pad_bottom, 1);
  // valid: (14 - 3) + 1 = 12 by (14 - 5) + 1 = 10.
  const LayerSpec& c2 = net.layers[2];
  EXPECT_EQ(c2.name, "conv2d_1");
  EXPECT_EQ(c2.input_shape, (Shape{14, 14, 8}));
  EXPECT_EQ(c2.output_shape, (Shape{12, 10, 4}));
  EXPECT_FALSE(c2.use_bias);
  EXPECT_EQ(c2.units, 4);
  EXPECT_EQ(net.layers[3].output_shape, (Shape{6, 5, 4}));  // pool 2, stride 2
  EXPECT_EQ(net.layers[4].output_shape, (Shape{120}));
  EXPECT_EQ(net.layers[0].name, "input_1");
  EXPECT_EQ(net.layers[5].name, "out");
  EXPECT_EQ(net.layers[5].activation, Activation::kSoftmax);
  EXPECT_EQ(net.output_shape, (Shape{10}));
}

TEST(LayerSpecTest, ReadsEachKindsFieldsAndResolvesReshapesMinusOne) {
  const json config = {
      {"input_shape", {784}},
      {"layers",
       {{{"type", "Reshape"}, {"target_shape", {28, -1}}},
        {{"type", "Rescaling"}, {"scale", 0.5}, {"offset", -1}},
        {{"type", "BatchNormalization"}, {"momentum", 0.9}, {"center", false}},
        {{"type", "Dropout"}, {"rate", 0.25}},
        {{"type", "Activation"}, {"activation", "tanh"}}}}};
  const NetworkSpec net = parse_network(config);
  EXPECT_EQ(net.layers[0].target_shape, (Shape{28, 28}));
  EXPECT_DOUBLE_EQ(net.layers[1].scale, 0.5);
  EXPECT_DOUBLE_EQ(net.layers[1].offset, -1);
  EXPECT_DOUBLE_EQ(net.layers[2].momentum, 0.9);
  EXPECT_FALSE(net.layers[2].center);
  EXPECT_TRUE(net.layers[2].scale_gamma);
  EXPECT_DOUBLE_EQ(net.layers[3].rate, 0.25);
  EXPECT_EQ(net.layers[4].activation, Activation::kTanh);
  EXPECT_EQ(net.output_shape, (Shape{28, 28}));
}

TEST(LayerSpecTest, ErrorsNameTheLayerAndField) {
  auto layers = [](json l) { return json{{"input_shape", {4}}, {"layers", std::move(l)}}; };
  expect_error([&] { parse_network(layers({{{"type", "Dense"}, {"units", 0}}})); },
               ErrorKind::kInvalidArgument, {"layers[0].units must be a positive integer, got 0"});
  expect_error([&] { parse_network(layers({{{"type", "Dense"}, {"units", 2}, {"unit", 2}}})); },
               ErrorKind::kInvalidArgument, {"layers[0] has unknown field \"unit\"", "use_bias"});
  expect_error([&] { parse_network(layers({{{"type", "Dense"}, {"units", 2}}, {{"type", "Input"}}})); },
               ErrorKind::kInvalidArgument, {"layers[1]: an Input layer must come first"});
  expect_error([&] { parse_network(layers({{{"type", "Reshape"}, {"target_shape", {3}}}})); },
               ErrorKind::kInvalidArgument, {"layers[0] (reshape): Reshape target_shape [3] does not fit its input [4]"});
  expect_error([&] { parse_network({{"layers", {{{"type", "Dense"}, {"units", 2}}}}}); },
               ErrorKind::kInvalidArgument, {"input_shape is missing"});
  expect_error([&] { parse_network(layers({{{"type", "Dense"}, {"units", 2}, {"name", "a"}},
                                           {{"type", "Dense"}, {"units", 2}, {"name", "a"}}})); },
               ErrorKind::kInvalidArgument, {"layers[1].name \"a\" is used twice"});
}


// ---- the sequence layers: Embedding, Conv1D, MaxPooling1D, GlobalAveragePooling1D -----------

TEST(LayerSpecTest, InfersShapesOfASequenceNetworkWithTensorFlowsPadding) {
  const json config = {
      {"input_shape", {9}},
      {"layers",
       {{{"type", "Embedding"}, {"input_dim", 50}, {"output_dim", 6}},
        {{"type", "Conv1D"}, {"filters", 4}, {"kernel_size", 4}, {"strides", 2}, {"padding", "same"},
         {"activation", "relu"}},
        {{"type", "Conv1D"}, {"filters", 3}, {"kernel_size", {2}}, {"use_bias", false}},
        {{"type", "MaxPooling1D"}, {"padding", "same"}},
        {{"type", "GlobalAveragePooling1D"}},
        {{"type", "Dense"}, {"units", 2}}}}};
  const NetworkSpec net = parse_network(config);
  ASSERT_EQ(net.layers.size(), 6u);
  const LayerSpec& e = net.layers[0];
  EXPECT_EQ(e.name, "embedding");
  EXPECT_EQ(e.input_dim, 50);
  EXPECT_EQ(e.units, 6);
  EXPECT_FALSE(e.mask_zero);
  EXPECT_EQ(e.output_shape, (Shape{9, 6}));
  // same, stride 2: ceil(9 / 2) = 5 steps; padding max((5 - 1) 2 + 4 - 9, 0) = 3: 1 before, 2 after.
  const LayerSpec& c1 = net.layers[1];
  EXPECT_EQ(c1.name, "conv1d");
  EXPECT_EQ(c1.output_shape, (Shape{5, 4}));
  EXPECT_EQ(c1.window[0], 4);
  EXPECT_EQ(c1.strides[0], 2);
  EXPECT_EQ(c1.pad_top, 1);
  EXPECT_EQ(c1.pad_bottom, 2);
  EXPECT_EQ(c1.activation, Activation::kRelu);
  // valid, kernel 2: 5 - 2 + 1 = 4 steps.
  EXPECT_EQ(net.layers[2].name, "conv1d_1");
  EXPECT_EQ(net.layers[2].output_shape, (Shape{4, 3}));
  EXPECT_FALSE(net.layers[2].use_bias);
  // pool 2, stride 2 (Keras's defaults), same: ceil(4 / 2) = 2, no padding needed.
  const LayerSpec& p = net.layers[3];
  EXPECT_EQ(p.name, "max_pooling1d");
  EXPECT_EQ(p.window[0], 2);
  EXPECT_EQ(p.strides[0], 2);
  EXPECT_EQ(p.output_shape, (Shape{2, 3}));
  EXPECT_EQ(p.pad_top + p.pad_bottom, 0);
  EXPECT_EQ(net.layers[4].name, "global_average_pooling1d");
  EXPECT_EQ(net.layers[4].output_shape, (Shape{3}));
  EXPECT_FALSE(net.layers[4].use_mask);
  EXPECT_EQ(net.output_shape, (Shape{2}));
}

TEST(LayerSpecTest, EmbeddingOfScalarIdsAndKeepdimsAndOddSamePadding) {
  // One id per example: [] -> [output_dim] (Keras's Embedding on input of shape (n,)).
  const NetworkSpec scalar = parse_network(
      {{"input_shape", json::array()},
       {"layers", {{{"type", "Embedding"}, {"input_dim", 3}, {"output_dim", 2}}}}});
  EXPECT_EQ(scalar.output_shape, (Shape{2}));
  // MaxPooling1D pool 3 stride 1 same on 5 steps: 5 out, padding 2: 1 before, 1 after;
  // pool 2 stride 1 same: padding 1, all of it after (TensorFlow's rule).
  const NetworkSpec net = parse_network(
      {{"input_shape", {5, 2}},
       {"layers",
        {{{"type", "MaxPooling1D"}, {"pool_size", 3}, {"strides", 1}, {"padding", "same"}},
         {{"type", "MaxPooling1D"}, {"pool_size", 2}, {"strides", 1}, {"padding", "same"}},
         {{"type", "GlobalAveragePooling1D"}, {"keepdims", true}}}}});
  EXPECT_EQ(net.layers[0].output_shape, (Shape{5, 2}));
  EXPECT_EQ(net.layers[0].pad_top, 1);
  EXPECT_EQ(net.layers[0].pad_bottom, 1);
  EXPECT_EQ(net.layers[1].pad_top, 0);
  EXPECT_EQ(net.layers[1].pad_bottom, 1);
  EXPECT_EQ(net.output_shape, (Shape{1, 2}));
}

TEST(LayerSpecTest, MaskZeroReachesTheGlobalAveragePoolingThroughDenseOnly) {
  const NetworkSpec net = parse_network(
      {{"input_shape", {4}},
       {"layers",
        {{{"type", "Embedding"}, {"input_dim", 5}, {"output_dim", 3}, {"mask_zero", true}},
         {{"type", "Dropout"}, {"rate", 0.1}},
         {{"type", "Dense"}, {"units", 3}, {"activation", "tanh"}},
         {{"type", "GlobalAveragePooling1D"}},
         {{"type", "Dense"}, {"units", 2}}}}});
  EXPECT_TRUE(net.layers[0].mask_zero);
  EXPECT_TRUE(net.layers[3].use_mask);
  auto embed_then = [](json rest) {
    json layers = json::array({{{"type", "Embedding"}, {"input_dim", 5}, {"output_dim", 3}, {"mask_zero", true}}});
    for (auto& l : rest) layers.push_back(l);
    return json{{"input_shape", {4}}, {"layers", layers}};
  };
  expect_error([&] { parse_network(embed_then({{{"type", "Flatten"}}, {{"type", "Dense"}, {"units", 2}}})); },
               ErrorKind::kInvalidArgument,
               {"layers[1] (flatten) does not support the mask of Embedding \"embedding\"", "mask_zero false"});
  expect_error([&] { parse_network(embed_then({{{"type", "Conv1D"}, {"filters", 2}, {"kernel_size", 2}}})); },
               ErrorKind::kInvalidArgument, {"layers[1] (conv1d) does not support the mask"});
  expect_error([&] { parse_network(embed_then({{{"type", "Dense"}, {"units", 2}}})); },
               ErrorKind::kInvalidArgument, {"the mask of Embedding \"embedding\"", "reaches the network's output"});
}

TEST(LayerSpecTest, SequenceLayerErrorsNameTheLayerAndField) {
  auto net = [](json shape, json layer) {
    return json{{"input_shape", std::move(shape)}, {"layers", json::array({std::move(layer)})}};
  };
  expect_error([&] { parse_network(net({4}, {{"type", "Embedding"}, {"input_dim", 0}, {"output_dim", 2}})); },
               ErrorKind::kInvalidArgument, {"layers[0].input_dim must be a positive integer", "got 0"});
  expect_error([&] { parse_network(net({4}, {{"type", "Embedding"}, {"input_dim", 16777217}, {"output_dim", 2}})); },
               ErrorKind::kInvalidArgument, {"layers[0].input_dim must be a positive integer (at most 16777216)"});
  expect_error([&] { parse_network(net({4}, {{"type", "Embedding"}, {"input_dim", 5}})); },
               ErrorKind::kInvalidArgument, {"layers[0].output_dim must be a positive integer", "got nothing"});
  expect_error([&] { parse_network(net({4}, {{"type", "Embedding"}, {"input_dim", 1 << 20}, {"output_dim", 1 << 12}})); },
               ErrorKind::kInvalidArgument, {"layers[0] (embedding): Embedding 1048576 x 4096 is too large"});
  expect_error([&] { parse_network(net({4}, {{"type", "Embedding"}, {"input_dim", 5}, {"output_dim", 2}, {"mask_zero", 1}})); },
               ErrorKind::kInvalidArgument, {"layers[0].mask_zero must be true or false"});
  expect_error([&] { parse_network(net({4, 4, 1}, {{"type", "Conv1D"}, {"filters", 2}, {"kernel_size", 2}})); },
               ErrorKind::kInvalidArgument, {"layers[0] (conv1d): Conv1D needs inputs of shape [steps, channels]"});
  expect_error([&] { parse_network(net({8}, {{"type", "Conv1D"}, {"filters", 2}, {"kernel_size", 2}})); },
               ErrorKind::kInvalidArgument, {"add a channel axis: Reshape {\"target_shape\": [8, 1]}"});
  expect_error([&] { parse_network(net({3, 2}, {{"type", "Conv1D"}, {"filters", 2}, {"kernel_size", 4}})); },
               ErrorKind::kInvalidArgument,
               {"layers[0] (conv1d): Conv1D kernel_size [4] with padding \"valid\" does not fit its input [3, 2]"});
  expect_error([&] { parse_network(net({3, 2}, {{"type", "Conv1D"}, {"filters", 2}, {"kernel_size", 2}, {"padding", "causal"}})); },
               ErrorKind::kInvalidArgument, {"layers[0].padding \"causal\" is not a padding; allowed: valid, same"});
  expect_error([&] { parse_network(net({3, 2}, {{"type", "Conv1D"}, {"filters", 2}})); },
               ErrorKind::kInvalidArgument, {"layers[0].kernel_size is missing"});
  expect_error([&] { parse_network(net({3, 2}, {{"type", "Conv1D"}, {"filters", 2}, {"kernel_size", {2, 2}}})); },
               ErrorKind::kInvalidArgument, {"layers[0].kernel_size must be a positive integer (or [n]), got [2,2]"});
  expect_error([&] { parse_network(net({3, 2}, {{"type", "MaxPooling1D"}, {"pool_size", 0}})); },
               ErrorKind::kInvalidArgument, {"layers[0].pool_size must be a positive integer"});
  expect_error([&] { parse_network(net({6}, {{"type", "GlobalAveragePooling1D"}})); },
               ErrorKind::kInvalidArgument, {"GlobalAveragePooling1D needs inputs of shape [steps, channels]"});
  expect_error([&] { parse_network(net({3, 2}, {{"type", "GlobalAveragePooling1D"}, {"data_format", "channels_first"}})); },
               ErrorKind::kInvalidArgument, {"layers[0].data_format \"channels_first\" is not supported"});
}

TEST(LayerSpecTest, EmbeddingIdsMustBeIntegersBelowInputDim) {
  const NetworkSpec net = parse_network(
      {{"input_shape", {3}}, {"layers", {{{"type", "Embedding"}, {"input_dim", 10}, {"output_dim", 2}}}}});
  const LayerSpec& e = net.layers[0];
  const std::vector<float> good = {0, 9, 3};
  check_embedding_ids(good.data(), 3, e);
  for (const auto& [bad, text] : std::vector<std::pair<float, std::string>>{
           {10.0f, "input value 10 (element 1"}, {-1.0f, "input value -1 (element 1"},
           {2.5f, "input value 2.5 (element 1"}, {std::nanf(""), "input value nan (element 1"}}) {
    const std::vector<float> ids = {1, bad, 2};
    expect_error([&] { check_embedding_ids(ids.data(), 3, e); }, ErrorKind::kInvalidArgument,
                 {"Embedding layer \"embedding\": " + text, "is not an integer id in [0, 10)", "input_dim = 10"});
  }
  // Other dtypes are checked in their own dtype: 2^40 is reported as it is, not rounded.
  const Tensor big = Tensor::from<std::int64_t>(DType::kI64, {1, 3}, {1, 2, std::int64_t{1} << 40});
  expect_error([&] { embedding_ids_as_f32(big, e); }, ErrorKind::kInvalidArgument,
               {"input value 1099511627776 (element 2"});
  const Tensor u8 = Tensor::from<std::uint8_t>(DType::kU8, {1, 3}, {0, 7, 9});
  const Tensor f = embedding_ids_as_f32(u8, e);
  EXPECT_EQ(f.dtype, DType::kF32);
  EXPECT_EQ(f.shape, (Shape{1, 3}));
  EXPECT_EQ(std::vector<float>(f.as<float>(), f.as<float>() + 3), (std::vector<float>{0, 7, 9}));
  const Tensor d = Tensor::from<double>(DType::kF64, {1, 3}, {0, 1.5, 2});
  expect_error([&] { embedding_ids_as_f32(d, e); }, ErrorKind::kInvalidArgument, {"input value 1.5 (element 1"});
  const Tensor b = Tensor::from<std::uint8_t>(DType::kBool, {1, 3}, {0, 1, 1});
  expect_error([&] { embedding_ids_as_f32(b, e); }, ErrorKind::kInvalidArgument, {"x has dtype BOOL"});
}

}  // namespace
}  // namespace tensorhub
