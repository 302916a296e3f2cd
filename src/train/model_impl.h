// Private to src/train: the libtorch side of tensorhub::Model. Included only by the .cpp
// files of this folder (which get <torch/torch.h> as a precompiled header); never by a public
// header.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tensorhub/train/layer_spec.h"
#include "tensorhub/train/model.h"

namespace tensorhub {
namespace detail {

// The layer kinds and activations of layer_spec.h, under the names this folder used before.
using ::tensorhub::Activation;
using ::tensorhub::LayerKind;

/// The training loss of a model (model.h's "loss"). kNone: inference only.
enum class LossKind {
  kNone, kSparseCategoricalCrossentropy, kCategoricalCrossentropy, kBinaryCrossentropy, kMse
};

/// The loss's name in the config ("mse", ...; "null" for none).
inline const char* loss_name(LossKind loss) {
  switch (loss) {
    case LossKind::kNone: return "null";
    case LossKind::kSparseCategoricalCrossentropy: return "sparse_categorical_crossentropy";
    case LossKind::kCategoricalCrossentropy: return "categorical_crossentropy";
    case LossKind::kBinaryCrossentropy: return "binary_crossentropy";
    case LossKind::kMse: return "mse";
  }
  return "?";
}

/// The parameters of one Dense layer, registered as a child module named like the Keras layer
/// so that parameters are "<layer>.weight" [out, in] and "<layer>.bias" [out].
struct DenseParams : torch::nn::Module {
  torch::Tensor weight;  // F32 [units, in]
  torch::Tensor bias;    // F32 [units], undefined when use_bias is false
};

/// The parameters of one Conv2D layer in torch's layout: "<layer>.weight" F32
/// [filters, in_channels, kernel_h, kernel_w] (Keras's kernel [kh, kw, in, filters] is
/// weight.permute(2, 3, 1, 0)) and "<layer>.bias" [filters]. Conv1D uses it too, with
/// weight [filters, in_channels, kernel_size] (Keras's [k, in, filters] is permute(2, 1, 0)).
struct ConvParams : torch::nn::Module {
  torch::Tensor weight;
  torch::Tensor bias;  // undefined when use_bias is false
};

/// BatchNormalization's weights under Keras's names: parameters "gamma" and "beta" (each
/// undefined when scale / center is false) and buffers "moving_mean", "moving_variance",
/// all F32 [channels] (the last axis).
struct BatchNormParams : torch::nn::Module {
  torch::Tensor gamma, beta, moving_mean, moving_variance;
};

/// Embedding's table under Keras's layout: "<layer>.weight" F32 [input_dim, output_dim] (Keras
/// calls it "embeddings"), row i the vector of id i.
struct EmbeddingParams : torch::nn::Module {
  torch::Tensor weight;
};

/// One layer of the network: its checked config (layer_spec.h) and its weights.
struct Layer : LayerSpec {
  std::shared_ptr<DenseParams> dense;   // Dense
  std::shared_ptr<ConvParams> conv;     // Conv1D, Conv2D
  std::shared_ptr<EmbeddingParams> embedding;  // Embedding
  std::shared_ptr<BatchNormParams> bn;  // BatchNormalization
};

/// A feed-forward stack of layers (a Sequential with Keras names). Dropout masks are drawn
/// from `generator` so that fit() can seed them without touching torch's global generator.
struct Network : torch::nn::Module {
  std::vector<Layer> layers;
  torch::Generator generator;
  /// The activation the loss computes itself: softmax for the cross-entropies over classes,
  /// sigmoid for binary_crossentropy, none (kLinear) for mse and for inference-only models.
  Activation folded_activation = Activation::kLinear;

  /// x: F32 [batch, input_shape...]. With `logits` true a `folded_activation` that ends the
  /// network (only Dropout may follow it) is left out: its input is what the loss consumes,
  /// as Keras does for from_logits=False models ending in softmax. BatchNormalization uses the
  /// batch's statistics and updates its moving averages in training mode (is_training()), the
  /// moving averages otherwise. An Embedding checks its ids (check_embedding_ids: an
  /// InvalidArgument, never a torch index error) and, with mask_zero, masks id 0 for the
  /// GlobalAveragePooling1D after it (layer_spec.h's parse_network).
  /// `stop`: the index in `layers` of the last layer to run (its activation included); the
  /// default runs them all. Model::layer_output uses it.
  torch::Tensor forward(torch::Tensor x, bool logits, std::size_t stop = static_cast<std::size_t>(-1));
};

/// Inverted-dropout noise shaped like `like`: each F32 element is 0 with probability `rate`
/// and 1 / (1 - rate) otherwise, from a counter-based generator keyed by one draw of
/// `generator` (reproducible for a seed whatever the thread count). REQUIRES 0 <= rate < 1.
torch::Tensor dropout_mask(const torch::Tensor& like, double rate, torch::Generator& generator);

/// Throws DataLoss: optimizer state names a slot `optimizer` does not keep.
[[noreturn]] void throw_unknown_slot(const std::string& optimizer, const std::string& slot,
                                     const std::string& allowed);

/// An optimizer stepping the parameters it was built with, from their .grad() (parameters
/// whose gradient is undefined are left alone).
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual void step() = 0;
  virtual double learning_rate() const = 0;
  virtual void set_learning_rate(double lr) = 0;
  /// Optimizer state per parameter for saving: "<slot>" -> tensor, for parameter `index`
  /// (only slots that exist; a torch SGD creates its momentum buffer on the first step).
  virtual std::map<std::string, torch::Tensor> slots(std::size_t index) = 0;
  /// Installs a saved slot (copying into an existing buffer or creating it). Throws DataLoss
  /// for a slot name this optimizer does not keep.
  virtual void set_slot(std::size_t index, const std::string& slot, const torch::Tensor& t) = 0;
  /// Steps taken (Keras's optimizer.iterations); Adam's bias correction depends on it.
  virtual void set_iterations(std::int64_t t) { (void)t; }
};

/// Adam as Keras computes it (epsilon added to sqrt(v), bias corrections folded into the
/// step size), one fused pass over each parameter (AVX2 when the CPU has it). With
/// weight_decay > 0 it is Keras's AdamW (Loshchilov & Hutter 2019, decoupled weight decay):
/// each parameter is first multiplied by 1 - learning_rate * weight_decay (Keras's
/// Optimizer._apply_weight_decay, before the update), then takes the Adam step.
class Adam final : public Optimizer {
 public:
  Adam(std::vector<torch::Tensor> params, double learning_rate, double beta_1, double beta_2,
       double epsilon, double weight_decay = 0);
  void step() override;
  double learning_rate() const override { return lr_; }
  void set_learning_rate(double lr) override { lr_ = lr; }
  std::map<std::string, torch::Tensor> slots(std::size_t i) override {
    return {{"m", m_.at(i)}, {"v", v_.at(i)}};
  }
  void set_slot(std::size_t i, const std::string& slot, const torch::Tensor& t) override;
  void set_iterations(std::int64_t t) override { iterations_ = t; }

 private:
  std::vector<torch::Tensor> params_, m_, v_;
  double lr_, b1_, b2_, eps_, weight_decay_;
  std::int64_t iterations_ = 0;
};

/// Keras 3's RMSprop (keras/src/optimizers/rmsprop.py), with torch ops:
///   velocity = rho velocity + (1 - rho) g^2
///   centered: average_gradient = rho average_gradient + (1 - rho) g,
///             denominator = velocity - average_gradient^2 + epsilon; else velocity + epsilon
///   increment = lr g / sqrt(denominator)        (epsilon inside the sqrt, unlike torch)
///   momentum > 0: momentum = momentum_coef momentum + increment; p -= momentum
///   else p -= increment.
/// Slots "velocity" (always), "momentum" (momentum > 0), "average_gradient" (centered), all
/// starting at zero.
class RMSprop final : public Optimizer {
 public:
  RMSprop(std::vector<torch::Tensor> params, double learning_rate, double rho, double momentum,
          double epsilon, bool centered);
  void step() override;
  double learning_rate() const override { return lr_; }
  void set_learning_rate(double lr) override { lr_ = lr; }
  std::map<std::string, torch::Tensor> slots(std::size_t i) override;
  void set_slot(std::size_t i, const std::string& slot, const torch::Tensor& t) override;

 private:
  std::vector<torch::Tensor> params_, velocity_, momentum_, average_gradient_;
  double lr_, rho_, momentum_coef_, eps_;
  bool centered_;
};

/// Any torch::optim optimizer (SGD).
class TorchOptimizer final : public Optimizer {
 public:
  explicit TorchOptimizer(std::unique_ptr<torch::optim::Optimizer> optimizer);
  void step() override;
  double learning_rate() const override {
    return optimizer_->param_groups().at(0).options().get_lr();
  }
  void set_learning_rate(double lr) override {
    for (auto& g : optimizer_->param_groups()) g.options().set_lr(lr);
  }
  std::map<std::string, torch::Tensor> slots(std::size_t i) override {
    const auto& p = optimizer_->param_groups().at(0).params().at(i);
    auto it = optimizer_->state().find(c10::guts::to_string(p.unsafeGetTensorImpl()));
    if (it == optimizer_->state().end()) return {};
    auto* sgd = dynamic_cast<torch::optim::SGDParamState*>(it->second.get());
    if (!sgd || !sgd->momentum_buffer().defined()) return {};
    return {{"momentum", sgd->momentum_buffer()}};
  }
  void set_slot(std::size_t i, const std::string& slot, const torch::Tensor& t) override {
    if (slot != "momentum") throw_unknown_slot("SGD", slot, "momentum");
    const auto& p = optimizer_->param_groups().at(0).params().at(i);
    auto state = std::make_unique<torch::optim::SGDParamState>();
    state->momentum_buffer(t.clone());
    optimizer_->state()[c10::guts::to_string(p.unsafeGetTensorImpl())] = std::move(state);
  }

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
  detail::LossKind loss = detail::LossKind::kSparseCategoricalCrossentropy;
  std::int64_t num_classes = 0;          // classes of a classifier; 0 for other outputs
  std::vector<std::int64_t> output_shape;  // per example, e.g. [10]; [] for a scalar
  std::shared_ptr<detail::Network> net;
  std::unique_ptr<detail::Optimizer> optimizer;
  std::int64_t iterations = 0;    // optimizer steps taken (state.json "step")
  int epochs_done = 0;            // epochs completed by fit (state.json "epoch")
  int resume_epoch = -1;          // set by BackupAndRestore in on_train_begin; fit starts there
  bool stop_training = false;     // Keras's model.stop_training
};

namespace detail {
/// Converts a libtorch error escaping from `what` into tensorhub::Internal.
[[noreturn]] void rethrow_torch_error(const std::string& what, const c10::Error& e);
/// A copy of `src` (any dtype, any layout) as an F32 row-major Tensor of the same shape: how
/// weights and optimizer slots leave libtorch.
Tensor f32_tensor_of(const torch::Tensor& src);
}  // namespace detail

}  // namespace tensorhub
