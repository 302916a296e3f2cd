// Private to src/train: what fit.cpp's loops share with fit_dataset.cpp (Model::fit and
// evaluate over a Dataset), so that both compute the same loss, accuracy and seeds.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "model_impl.h"
#include "tensorhub/train/callbacks.h"

namespace tensorhub::detail {

/// The shape of y the model's loss needs for n examples: sparse [n]; categorical [n, classes];
/// binary [n, outputs]; mse [n, output shape...].
std::vector<std::int64_t> loss_target_shape(const Model::Impl& m, std::int64_t n);

/// The loss of a batch from the network's logits: the batch mean (sum = false) or the sum of
/// the examples' losses (sum = true), as fit.cpp's loss_of computes it.
torch::Tensor batch_loss(LossKind loss, const torch::Tensor& logits, const torch::Tensor& y, bool sum);

/// The seed of epoch `epoch`'s shuffle (stream 1) or dropout (stream 2) for fit's `seed`.
std::uint64_t fit_epoch_seed(std::uint64_t seed, int epoch, std::uint64_t stream);

/// What Model::fit over tensors and over a Dataset share around their own batching: the
/// callbacks, the epoch's running loss and accuracy, and the History.
class FitRun {
 public:
  using Callbacks = std::vector<std::shared_ptr<Callback>>;

  /// Warns about a slow BLAS when verbose; takes options.callbacks, with Keras's progress bar
  /// first when verbose and none was given, tells each `model` and `params`, and calls
  /// on_train_begin. first_epoch() is options.initial_epoch, or the epoch a callback's
  /// on_train_begin asked to resume at (m.resume_epoch).
  FitRun(Model* model, Model::Impl& m, const FitOptions& options, const CallbackParams& params);

  const Callbacks& callbacks() const { return cbs_; }
  int first_epoch() const { return first_epoch_; }
  /// Whether the loss has Keras's "accuracy" metric (every loss but mse).
  bool accuracy() const { return accuracy_; }

  /// on_train_batch_begin, when there are callbacks.
  void begin_batch(std::int64_t step);
  /// Backpropagates a training batch's mean `loss` (from `logits` for targets `y`, `size`
  /// examples), steps the optimizer, adds the batch to the epoch's sums and calls
  /// on_train_batch_end with its loss (and accuracy).
  void end_batch(std::int64_t step, const torch::Tensor& loss, const torch::Tensor& logits,
                 const torch::Tensor& y, std::int64_t size);
  /// The epoch's mean "loss" (and "accuracy") over its batches into `logs`; restarts the sums.
  void put_epoch_metrics(Logs& logs);
  /// Ends epoch `epoch`: `validation`'s val_loss (and val_accuracy) join `logs`, which go to
  /// on_epoch_end and the History.
  void end_epoch(int epoch, Logs logs, const std::optional<Evaluation>& validation);
  /// on_train_end with the last epoch's logs; returns the History.
  History finish();

 private:
  Model::Impl& m_;
  Callbacks cbs_;
  int first_epoch_ = 0;
  bool accuracy_ = false;
  double loss_sum_ = 0, correct_ = 0;
  std::int64_t seen_ = 0;
  History history_;
  Logs last_logs_;
};

/// What Model::evaluate over tensors and over a Dataset share around their own batching: the
/// callbacks' test hooks and the running loss and accuracy. Run it under NoGradGuard.
class EvaluateRun {
 public:
  /// Tells each callback that has no model yet `model`, then calls on_test_begin.
  EvaluateRun(const Model* model, const Model::Impl& m, const FitRun::Callbacks& cbs);

  /// on_test_batch_begin.
  void begin_batch(std::int64_t batch);
  /// Adds a batch of `size` examples (the network's `logits` for targets `y`) to the sums and
  /// calls on_test_batch_end with its mean loss (and accuracy).
  void end_batch(std::int64_t batch, const torch::Tensor& logits, const torch::Tensor& y, std::int64_t size);
  /// Examples added so far.
  std::int64_t seen() const { return seen_; }
  /// The mean loss and accuracy (NaN for mse) over the examples added; calls on_test_end with them.
  Evaluation finish();

 private:
  const Model::Impl& m_;
  const FitRun::Callbacks& cbs_;
  bool accuracy_;
  double loss_sum_ = 0, correct_ = 0;
  std::int64_t seen_ = 0;
};

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
