// The parsing half of model.json (tensorhub/train/layer_spec.h): shapes, Keras names, padding
// and errors, checked without building a Model (nothing here touches libtorch).
#include "tensorhub/train/layer_spec.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace tensorhub
