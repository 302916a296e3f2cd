// Private to src/train: what fit.cpp's loops share with fit_dataset.cpp (Model::fit and
// evaluate over a Dataset), so that both compute the same loss, accuracy and seeds.
#pragma once

#include <cstdint>
#include <vector>

#include "model_impl.h"

namespace tensorhub::detail {

/// The shape of y the model's loss needs for n examples: sparse [n]; categorical [n, classes];
/// binary [n, outputs]; mse [n, output shape...].
std::vector<std::int64_t> loss_target_shape(const Model::Impl& m, std::int64_t n);

/// The loss of a batch from the network's logits: the batch mean (sum = false) or the sum of
/// the examples' losses (sum = true), as fit.cpp's loss_of computes it.
torch::Tensor batch_loss(LossKind loss, const torch::Tensor& logits, const torch::Tensor& y, bool sum);

/// Keras's "accuracy" summed over the batch's examples (0 for mse).
double batch_correct(LossKind loss, const torch::Tensor& logits, const torch::Tensor& y);

/// The seed of epoch `epoch`'s shuffle (stream 1) or dropout (stream 2) for fit's `seed`.
std::uint64_t fit_epoch_seed(std::uint64_t seed, int epoch, std::uint64_t stream);

/// Sets the network's train/eval mode and restores the previous one on scope exit.
class TrainingMode {
 public:
  TrainingMode(Network& net, bool training) : net_(net), was_(net.is_training()) { net_.train(training); }
  ~TrainingMode() { net_.train(was_); }
  TrainingMode(const TrainingMode&) = delete;
  TrainingMode& operator=(const TrainingMode&) = delete;

 private:
  Network& net_;
  bool was_;
};

}  // namespace tensorhub::detail
