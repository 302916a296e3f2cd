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

enum class LayerKind { kInput, kDense, kDropout, kFlatten, kActivation, kRescaling };
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
  double scale = 1, offset = 0;           // Rescaling: x * scale + offset
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

/// Inverted-dropout noise shaped like `like`: each F32 element is 0 with probability `rate`
/// and 1 / (1 - rate) otherwise, from a counter-based generator keyed by one draw of
/// `generator` (reproducible for a seed whatever the thread count). REQUIRES 0 <= rate < 1.
torch::Tensor dropout_mask(const torch::Tensor& like, double rate, torch::Generator& generator);

/// An optimizer stepping the parameters it was built with, from their .grad() (parameters
/// whose gradient is undefined are left alone).
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual void step() = 0;
};

/// Adam as Keras computes it (epsilon added to sqrt(v), bias corrections folded into the
/// step size), one fused pass over each parameter (AVX2 when the CPU has it).
class Adam final : public Optimizer {
 public:
  Adam(std::vector<torch::Tensor> params, double learning_rate, double beta_1, double beta_2,
       double epsilon);
  void step() override;

 private:
  std::vector<torch::Tensor> params_, m_, v_;
  double lr_, b1_, b2_, eps_;
  std::int64_t iterations_ = 0;
};

/// Any torch::optim optimizer (SGD).
class TorchOptimizer final : public Optimizer {
 public:
  explicit TorchOptimizer(std::unique_ptr<torch::optim::Optimizer> optimizer);
  void step() override;

 private:
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
};

/// The OpenBLAS kernels in use ("SkylakeX", "Haswell", "Prescott", ...), or "" if libtorch's
/// BLAS is not OpenBLAS. See blas_kernels.cpp for how they are chosen.
std::string blas_kernels();

/// Warns once on stderr if OpenBLAS runs its slowest generic kernels on a CPU with AVX2 or
/// AVX-512 (OPENBLAS_CORETYPE set to Prescott by hand).
void warn_if_slow_blas();

}  // namespace detail

struct Model::Impl {
  nlohmann::json config;                 // with layer names filled in
  std::vector<std::int64_t> input_shape;  // without the batch dimension
  std::int64_t num_classes = 0;          // classes of a classifier; 0 for other outputs
  std::vector<std::int64_t> output_shape;  // per example, e.g. [10]; [] for a scalar
  std::shared_ptr<detail::Network> net;
  std::unique_ptr<detail::Optimizer> optimizer;
};

namespace detail {
/// Converts a libtorch error escaping from `what` into tensorhub::Internal.
[[noreturn]] void rethrow_torch_error(const std::string& what, const c10::Error& e);
}  // namespace detail

}  // namespace tensorhub::train
