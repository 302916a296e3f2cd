// Private to src/train: the libtorch side of tensorhub::train::Model. Included only by the .cpp
// files of this folder (which get <torch/torch.h> as a precompiled header); never by a public
// header.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensorhub/train/model.h"

namespace tensorhub::train {
namespace detail {

enum class LayerKind { kInput, kDense, kDropout, kFlatten, kActivation };
enum class Activation { kLinear, kRelu, kSigmoid, kTanh, kSoftmax };

/// The parameters of one Dense layer, registered as a child module named like the Keras layer
/// so that parameters are "<layer>.weight" [out, in] and "<layer>.bias" [out].
struct DenseParams : torch::nn::Module {
  torch::Tensor weight;  // F32 [units, in]
  torch::Tensor bias;    // F32 [units], undefined when use_bias is false
};

/// One layer of the network, after validation of its config.
struct Layer {
  LayerKind kind = LayerKind::kInput;
  std::string name;                       // Keras name: "dense", "dense_1", "dropout", ...
  Activation activation = Activation::kLinear;  // Dense and Activation
  double rate = 0;                        // Dropout
  std::shared_ptr<DenseParams> dense;     // Dense
};

/// A feed-forward stack of layers (a Sequential with Keras names). Dropout masks are drawn
/// from `generator` so that fit() can seed them without touching torch's global generator.
struct Network : torch::nn::Module {
  std::vector<Layer> layers;
  torch::Generator generator;

  /// x: F32 [batch, input_shape...]. With `logits` true a softmax that ends the network is
  /// left out (its input is what the loss consumes, as Keras does for from_logits=False
  /// models ending in softmax).
  torch::Tensor forward(torch::Tensor x, bool logits);
};

enum class OptimizerKind { kAdam, kSGD };

}  // namespace detail

struct Model::Impl {
  nlohmann::json config;                 // with layer names filled in
  std::vector<std::int64_t> input_shape;  // without the batch dimension
  std::int64_t num_classes = 0;          // size of the output (last dimension)
  std::shared_ptr<detail::Network> net;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
};

namespace detail {
/// Converts a libtorch error escaping from `what` into tensorhub::Internal.
[[noreturn]] void rethrow_torch_error(const std::string& what, const c10::Error& e);
}  // namespace detail

}  // namespace tensorhub::train
