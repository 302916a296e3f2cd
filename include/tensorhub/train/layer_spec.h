// The layers of a model.json config, parsed and checked without libtorch.
//
// parse_network() reads a config's "input_shape" and "layers" (the Keras-style layer list
// model.h documents), checks every field, infers each layer's input and output shape per
// example, names the layers as Keras does ("dense", "dense_1", ...), and returns one LayerSpec
// per layer. Model (model.cpp) then only allocates and initialises the modules of each
// LayerSpec. Nothing here needs libtorch, so the config's rules can be tested (and fuzzed) on
// their own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tensorhub {

/// The layer types of model.json, one per Keras layer class.
enum class LayerKind {
  kInput, kDense, kDropout, kFlatten, kActivation, kRescaling, kConv2D, kMaxPooling2D,
  kBatchNormalization, kReshape
};
/// Activations of Dense, Conv2D and Activation layers.
enum class Activation { kLinear, kRelu, kSigmoid, kTanh, kSoftmax };

/// One layer of a config after checking. Shapes are per example (no batch dimension).
struct LayerSpec {
  LayerKind kind = LayerKind::kInput;
  std::string name;                       ///< Keras name: "dense", "dense_1", "dropout", ...
  std::vector<std::int64_t> input_shape;  ///< the shape this layer receives
  std::vector<std::int64_t> output_shape;  ///< the shape it passes on
  Activation activation = Activation::kLinear;  ///< Dense, Conv2D and Activation
  std::int64_t units = 0;                 ///< Dense: outputs; Conv2D: filters
  bool use_bias = true;                   ///< Dense and Conv2D
  double rate = 0;                        ///< Dropout, in [0, 1)
  double scale = 1, offset = 0;           ///< Rescaling: x * scale + offset
  std::vector<std::int64_t> target_shape;  ///< Reshape, -1 resolved
  /// Conv2D and MaxPooling2D: window (kernel_size / pool_size), strides, and the zero
  /// (Conv2D) or -inf (MaxPooling2D) padding that padding "same" adds, TensorFlow's way: the
  /// odd one goes to the bottom / right. Inputs are channels_last [H, W, C].
  std::int64_t window[2] = {1, 1}, strides[2] = {1, 1};
  std::int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  double momentum = 0.99, epsilon = 1e-3;  ///< BatchNormalization, Keras's meaning of momentum
  bool center = true, scale_gamma = true;  ///< BatchNormalization: beta and gamma exist
};

/// A config's network: its input shape and its layers, Input layers included.
struct NetworkSpec {
  std::vector<std::int64_t> input_shape;   ///< per example, e.g. [784]
  std::vector<std::int64_t> output_shape;  ///< the last layer's output, e.g. [10]
  std::vector<LayerSpec> layers;
};

/// Parses and checks `config`'s "input_shape" and "layers" (other top-level fields are not
/// looked at). Throws InvalidArgument naming the field ("layers[2].units must be a positive
/// integer, got 0"; unknown fields: "layers[0] has unknown field ..."), as Model's
/// constructor reports it.
NetworkSpec parse_network(const nlohmann::json& config);

}  // namespace tensorhub
