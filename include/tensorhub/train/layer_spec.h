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

#include "tensorhub/core/named_tensors.h"

namespace tensorhub {

/// The layer types of model.json, one per Keras layer class.
enum class LayerKind {
  kInput, kDense, kDropout, kFlatten, kActivation, kRescaling, kConv2D, kMaxPooling2D,
  kBatchNormalization, kReshape, kEmbedding, kGlobalAveragePooling1D, kConv1D, kMaxPooling1D
};
/// Activations of Dense, Conv1D, Conv2D and Activation layers.
enum class Activation { kLinear, kRelu, kSigmoid, kTanh, kSoftmax };

/// One layer of a config after checking. Shapes are per example (no batch dimension).
struct LayerSpec {
  LayerKind kind = LayerKind::kInput;
  std::string name;                       ///< Keras name: "dense", "dense_1", "dropout", ...
  std::vector<std::int64_t> input_shape;  ///< the shape this layer receives
  std::vector<std::int64_t> output_shape;  ///< the shape it passes on
  Activation activation = Activation::kLinear;  ///< Dense, Conv1D, Conv2D and Activation
  std::int64_t units = 0;                 ///< Dense: outputs; Conv1D, Conv2D: filters;
                                          ///< Embedding: output_dim
  bool use_bias = true;                   ///< Dense, Conv1D and Conv2D
  double rate = 0;                        ///< Dropout, in [0, 1)
  double scale = 1, offset = 0;           ///< Rescaling: x * scale + offset
  std::vector<std::int64_t> target_shape;  ///< Reshape, -1 resolved
  /// Conv2D and MaxPooling2D: window (kernel_size / pool_size), strides, and the zero
  /// (Conv2D) or -inf (MaxPooling2D) padding that padding "same" adds, TensorFlow's way: the
  /// odd one goes to the bottom / right. Inputs are channels_last [H, W, C].
  /// Conv1D and MaxPooling1D (inputs [steps, channels]) use window[0], strides[0] and
  /// pad_top (before the first step) / pad_bottom (after the last); the other axis stays 1 / 0.
  std::int64_t window[2] = {1, 1}, strides[2] = {1, 1};
  std::int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  double momentum = 0.99, epsilon = 1e-3;  ///< BatchNormalization, Keras's meaning of momentum
  bool center = true, scale_gamma = true;  ///< BatchNormalization: beta and gamma exist
  /// Embedding: ids are integers in [0, input_dim); units is output_dim. With mask_zero, id 0
  /// is masked for the layers after it (Keras's mask), see parse_network.
  std::int64_t input_dim = 0;
  bool mask_zero = false;
  /// GlobalAveragePooling1D: keepdims (output [1, features] instead of [features]), and
  /// use_mask: the mask of a mask_zero Embedding before it reaches this layer, which then
  /// averages the unmasked steps only (Keras's GlobalAveragePooling1D with a mask).
  bool keepdims = false;
  bool use_mask = false;
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
///
/// Masks (Keras's mask_zero): the mask of an Embedding with mask_zero true passes unchanged
/// through Dropout, Activation and Dense (which act on each step alone, as in Keras) and is
/// consumed by a GlobalAveragePooling1D (its use_mask is set). Any other layer on the way, or a
/// mask that reaches the end of the network (Keras would weight the loss by it), is refused
/// with InvalidArgument naming the layer.
NetworkSpec parse_network(const nlohmann::json& config);

/// The largest Embedding input_dim: every id below it is exact in float32 (2^24), the dtype
/// ids travel in.
inline constexpr std::int64_t kMaxEmbeddingInputDim = std::int64_t{1} << 24;

/// Checks that the `count` values at `ids` (the input of Embedding `layer`, row-major) are
/// integer ids in [0, layer.input_dim). Throws InvalidArgument naming the layer, the first bad
/// value, its position and input_dim.
void check_embedding_ids(const float* ids, std::int64_t count, const LayerSpec& layer);

/// The model input `x` (any numeric dtype: F32, F64, I64, I32, U8, ...) as F32 for a network
/// whose first layer after Input is `embedding` (an Embedding): each value is checked, in its
/// own dtype, to be an integer id in [0, input_dim) (InvalidArgument as check_embedding_ids,
/// so that an I64 id of 2^40 is reported as it is, not as a rounded float), then converted.
/// An F32 `x` is returned as a copy unchanged (its ids are checked by the layer itself).
/// Throws InvalidArgument for a dtype that is not numeric or bytes that do not fit the shape.
Tensor embedding_ids_as_f32(const Tensor& x, const LayerSpec& embedding);

}  // namespace tensorhub
