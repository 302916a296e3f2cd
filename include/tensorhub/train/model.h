// A neural network built from a Keras-style layer list, trained with fit(), saved as
// model.json + weights.safetensors. This header does not include libtorch: the network lives
// behind a pointer, so code that only saves, loads or evaluates models builds fast.
//
// model.json (the "config"), Keras names and semantics:
//   {"name": "mlp",
//    "input_shape": [784],
//    "layers": [{"type": "Dropout", "rate": 0.2},
//               {"type": "Dense", "units": 800, "activation": "relu"},
//               ...
//               {"type": "Dense", "units": 10}],
//    "loss": "sparse_categorical_crossentropy",   // the last Dense yields logits
//    "optimizer": {"type": "Adam", "learning_rate": 0.0001}}
// Weight names in weights.safetensors are "<layer name>.<param>", layer names as Keras
// assigns them ("dense", "dense_1", ...), params torch's ("weight" [out, in], "bias" [out]).
//
// The config in detail (an unknown field in a layer or the optimizer is an error, so a typo
// is never ignored; other top-level fields are kept as they are):
//   input_shape  shape of one example, without the batch dimension ([] for scalars); or give it as an
//                {"type": "Input", "shape": [...]} first layer (named "input_1"), or as
//                "input_shape" on the first layer. Required one way or another.
//   layers       Input {shape}, Dense {units, activation = "linear", use_bias = true},
//                Dropout {rate in [0, 1)}, Flatten {}, Activation {activation},
//                Rescaling {scale, offset = 0} (x * scale + offset, any shape); each may carry
//                a "name" (no '.'); activations relu, sigmoid, tanh, softmax, linear.
//                Dense kernels start glorot_uniform, biases zero (Keras's defaults).
//   loss         null for an inference-only model (any output shape; predict() only), or
//                "sparse_categorical_crossentropy" (the default), computed from logits; a
//                model whose last layer ends in softmax is trained on its pre-softmax values,
//                as Keras does, and predict() returns the probabilities.
//   metrics      optional, ["accuracy"] (accuracy is always reported).
//   optimizer    {"type": "Adam", learning_rate = 0.001, beta_1 = 0.9, beta_2 = 0.999,
//                epsilon = 1e-7} (the default; Keras's update: epsilon added to sqrt(v)), or
//                {"type": "SGD", learning_rate = 0.01, momentum = 0, nesterov = false};
//                a bare name ("Adam") takes the defaults.
//   seed         optional non-negative integer seeding the weight initialisation.
//   dtype        optional, "float32" only.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tensorhub/core/named_tensors.h"

namespace tensorhub::train {

class Callback;  // tensorhub/train/callbacks.h

/// Metric values of one epoch, e.g. {"loss": 0.41, "accuracy": 0.85, "val_loss": ...}.
using Logs = std::map<std::string, double>;

/// What fit() returns: one Logs per epoch, in order (Keras's History.history, transposed).
struct History {
  std::vector<Logs> epochs;
};

/// Settings of one fit() call; defaults are Keras's where Keras has one.
struct FitOptions {
  std::int64_t batch_size = 32;
  int epochs = 1;
  int initial_epoch = 0;
  bool shuffle = true;
  /// Seeds shuffling and dropout when != 0 (fit is then reproducible for a given config
  /// "seed", whatever the thread count); weight init is seeded by the config's "seed".
  /// Epoch e's shuffle and dropout masks depend on (seed, e) only, so a fit resumed at epoch
  /// e (initial_epoch after Model::load, or BackupAndRestore) draws what an uninterrupted
  /// fit draws.
  std::uint64_t seed = 0;
  /// 0 silent; 1 a progress bar on stderr if it is a terminal, else a line per epoch;
  /// 2 a line per epoch.
  int verbose = 1;
  /// Called after every epoch with its 0-based index and logs; return false to stop.
  std::function<bool(int epoch, const Logs& logs)> on_epoch_end;
  /// Keras callbacks (tensorhub/train/callbacks.h), called in this order at Keras's hook
  /// points. With verbose > 0 and no ProgressBar among them, fit puts one first (as Keras
  /// adds its ProgbarLogger).
  std::vector<std::shared_ptr<Callback>> callbacks;
};

/// Result of evaluate(): the loss and accuracy over the whole set.
struct Evaluation {
  double loss = 0;
  double accuracy = 0;
};

/// A model: its config (model.json) and its network. Copies share the network.
/// Not thread-safe: use one Model from one thread at a time.
class Model {
 public:
  /// Builds a freshly initialised network from a config (see above). Throws InvalidArgument
  /// naming the field and the allowed values for an unknown layer, activation, loss or
  /// optimizer, or a shape that does not fit.
  static Model from_config(const nlohmann::json& config);

  /// Rebuilds a network from its config and loads `weights`. Throws what from_config throws,
  /// and InvalidArgument naming the tensor if a weight is missing, extra, not F32, or of
  /// another shape (a checkpoint of another architecture).
  static Model from_parts(const nlohmann::json& config, const NamedTensors& weights);

  /// The config this model was built from, with the layer names filled in.
  const nlohmann::json& config() const;

  /// All parameters and buffers as F32 tensors, named as described above.
  NamedTensors weights() const;

  /// Trains on x (F32 [n, input_shape...], n >= 1) and y (I64 [n] class indices in
  /// [0, outputs) for sparse categorical cross-entropy), optionally validating on
  /// (x_val, y_val) after every epoch (keys "val_loss", "val_accuracy"). Runs epochs
  /// initial_epoch .. epochs - 1; "loss" and "accuracy" are averages over the epoch's samples.
  /// Calls options.callbacks at Keras's hook points (tensorhub/train/callbacks.h); a callback
  /// setting stop_training ends the fit after the current batch.
  /// Uses the optimizer and loss of the config; optimizer state carries over between calls.
  /// Throws InvalidArgument for shapes, dtypes or labels that do not fit the model, or bad
  /// options (batch_size < 1, negative epochs); Internal if libtorch fails.
  History fit(const Tensor& x, const Tensor& y, const FitOptions& options,
              const Tensor* x_val = nullptr, const Tensor* y_val = nullptr);

  /// Loss and accuracy on (x, y) (F32 [n, input_shape...] with n >= 1, I64 [n]) in inference
  /// mode (dropout off), in batches of `batch_size`. Throws InvalidArgument as fit() does.
  Evaluation evaluate(const Tensor& x, const Tensor& y, std::int64_t batch_size = 1024) const;

  /// Model outputs for x (F32 [n, input_shape...]) in inference mode: F32 [n, output shape...]
  /// (logits for a model whose last Dense has no activation, probabilities if it ends in
  /// softmax). Throws InvalidArgument if x does not fit the model.
  Tensor predict(const Tensor& x, std::int64_t batch_size = 1024) const;

  /// Number of trainable parameters.
  std::int64_t count_params() const;

  /// evaluate() and predict() calling the callbacks' on_test_* / on_predict_* hooks (batch
  /// logs of evaluate: the batch's "loss" and "accuracy"; of predict: none).
  Evaluation evaluate(const Tensor& x, const Tensor& y, std::int64_t batch_size,
                      const std::vector<std::shared_ptr<Callback>>& callbacks) const;
  Tensor predict(const Tensor& x, std::int64_t batch_size,
                 const std::vector<std::shared_ptr<Callback>>& callbacks) const;

  /// The optimizer's current learning rate; set_learning_rate changes it for the next steps
  /// (callbacks such as LearningRateScheduler use these). Throws InvalidArgument if lr <= 0
  /// or not finite.
  double learning_rate() const;
  void set_learning_rate(double lr);

  /// Keras's model.stop_training: a callback sets it to end fit() after the current batch
  /// (the epoch's end hooks still run). fit() clears it when it starts.
  bool stop_training() const;
  void set_stop_training(bool stop);

  /// Epochs completed by fit() on this model (the next epoch's index), and optimizer steps
  /// taken; both are saved in state.json.
  int epochs_done() const;
  std::int64_t steps_done() const;

  /// Saves the model as a directory (created if missing): model.json (the config),
  /// weights.safetensors, optimizer.safetensors ("<param>.<slot>": Adam's "m"/"v", SGD's
  /// "momentum") and state.json {"epoch", "step", "learning_rate"}. Files are replaced
  /// atomically one by one. Throws Unavailable if the directory cannot be written.
  void save(const std::string& dir) const;

  /// A model saved by save(), with its optimizer state, so that fit(initial_epoch =
  /// epochs_done()) continues exactly where the saved run was. Throws Unavailable / DataLoss
  /// for missing or malformed files.
  static Model load(const std::string& dir);

  /// Loads weights, optimizer state and state.json of a saved model into this model in place.
  /// Throws InvalidArgument if the saved model is of another architecture (its config's
  /// layers or input shape differ, or a weight does not fit).
  void load_state(const std::string& dir);

  /// Keras's set_weights: copies `weights` (as weights() returns them) into the network.
  /// Throws InvalidArgument as from_parts does for a missing, extra or misshapen tensor.
  void set_weights(const NamedTensors& weights);

  /// Makes the next fit() start at `epoch` whatever its initial_epoch (BackupAndRestore sets it
  /// in on_train_begin); -1 clears it.
  void set_resume_epoch(int epoch);

  struct Impl;

 private:
  explicit Model(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

/// Sets libtorch's intra-op threads (torch::set_num_threads; OpenBLAS follows, being built
/// on OpenMP). 0 picks the value of OMP_NUM_THREADS if set (a positive integer), otherwise
/// the number of cores. Throws InvalidArgument if n < 0.
void set_num_threads(int n);

/// Call first thing in main() of a program that trains: if OpenBLAS (libtorch's BLAS) did not
/// recognise the CPU and fell back to its generic "Prescott" kernels although the CPU has
/// AVX2 or AVX-512 (Debian's OpenBLAS 0.3.21 on Sapphire/Emerald Rapids: matrix products ~5x
/// slower), sets OPENBLAS_CORETYPE to Haswell or SkylakeX and re-executes the program
/// (/proc/self/exe, same argv, same pid) so that OpenBLAS loads with those kernels; child
/// processes inherit the variable. Returns without doing anything if OPENBLAS_CORETYPE is
/// already set, OpenBLAS chose other kernels, or libtorch does not use OpenBLAS.
/// REQUIRES: argv is main's argv (NULL-terminated).
void reexec_for_fast_blas(char** argv);

/// libtorch's current number of intra-op threads (torch::get_num_threads), e.g. to report
/// what set_num_threads(0) chose.
int get_num_threads();

/// The original TensorLayer MLP for MNIST: Dropout 0.2 -> Dense n_units1 relu -> Dropout 0.5
/// -> Dense n_units2 relu -> Dropout 0.5 -> Dense 10, Adam with `learning_rate`.
nlohmann::json mlp_config(int n_units1, int n_units2, double learning_rate = 1e-4);

}  // namespace tensorhub::train
