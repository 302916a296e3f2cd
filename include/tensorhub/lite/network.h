// The edge server's model: a model.json network (train/layer_spec.h) computed with Eigen on
// the CPU, without libtorch, for tensorhub-serve-lite.
//
// It runs what the trainer saves (Input, Dense, Dropout as identity, Flatten, Activation,
// Rescaling, Conv2D, MaxPooling2D, BatchNormalization with its moving averages, Reshape,
// Embedding (mask_zero included), GlobalAveragePooling1D, Conv1D, MaxPooling1D) with
// the trainer's semantics (docs/model-json.md): channels_last images, TensorFlow's "same"
// padding, weights in torch's layout under Keras's layer names. Values are float32 and laid
// out row-major per example, so Flatten and Reshape move no data.
//
// Thread safety: predict() is const and may run on many threads at once.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "tensorhub/core/json.h"
#include "tensorhub/core/named_tensors.h"
#include "tensorhub/train/layer_spec.h"

namespace tensorhub {

/// One loaded network with its weights.
class LiteNetwork {
 public:
  /// Builds the network of `config` (model.json) with `weights` (weights.safetensors).
  /// Throws InvalidArgument naming the layer for a layer it cannot run or a config that does
  /// not parse (parse_network's messages), and with Model::from_parts's messages for a
  /// missing, unexpected, non-F32 or misshapen weight.
  LiteNetwork(const Json& config, const NamedTensors& weights);

  /// Loads a version directory: model.json and, when its layers have weights,
  /// weights.safetensors. Throws NotFound when there is no model.json (naming a TorchScript
  /// model.pt as something only `tensorhub serve` runs), DataLoss for a file that is not
  /// JSON or not safetensors, and what the constructor throws.
  static LiteNetwork load(const std::filesystem::path& version_dir);

  /// Per-example input shape, e.g. [784] or [28, 28, 1] ([] for a scalar).
  const std::vector<std::int64_t>& input_shape() const { return spec_.input_shape; }
  /// Per-example output shape, e.g. [10].
  const std::vector<std::int64_t>& output_shape() const { return spec_.output_shape; }
  /// The config it was built from.
  const Json& config() const { return config_; }

  /// Runs `n` examples: `x` holds n * prod(input_shape) floats, row-major. Returns
  /// n * prod(output_shape) floats, row-major. Throws InvalidArgument (check_embedding_ids's
  /// message) when an Embedding's input holds a value that is not an integer id in
  /// [0, input_dim).
  std::vector<float> predict(const float* x, std::int64_t n) const;

 private:
  // One layer's weights, copied out of the safetensors tensors into the layout its kernel
  // reads: Dense [in, units] (transposed), Conv2D [kh * kw * in_channels, filters], Conv1D
  // [k * in_channels, filters], Embedding its table [input_dim, output_dim] as saved.
  struct Params {
    std::vector<float> kernel, bias;
    std::vector<float> scale, shift;  // BatchNormalization folded: y = x * scale + shift
  };
  void load_params(const LayerSpec& layer, const NamedTensors& weights);

  Json config_;
  NetworkSpec spec_;
  std::vector<Params> params_;  // one per spec_.layers entry
};

}  // namespace tensorhub
