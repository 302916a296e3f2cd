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
// assigns them ("dense", "dense_1", "conv2d", "max_pooling2d", "batch_normalization", ...):
//   Dense               "weight" [units, in], "bias" [units]            (torch's layout)
//   Conv2D              "weight" [filters, in_channels, kernel_h, kernel_w], "bias" [filters]
//                       (torch's layout; Keras's kernel [kh, kw, in, filters] is
//                       weight.permute(2, 3, 1, 0))
//   BatchNormalization  "gamma", "beta", "moving_mean", "moving_variance", each [channels]
//                       (Keras's names: the moving variance is the biased one, as in Keras, so
//                       torch's "running_var" would be a misleading name)
//
// The config in detail (an unknown field in a layer or the optimizer is an error, so a typo
// is never ignored; other top-level fields are kept as they are):
//   input_shape  shape of one example, without the batch dimension ([] for scalars); or give it as an
//                {"type": "Input", "shape": [...]} first layer (named "input_1"), or as
//                "input_shape" on the first layer. Required one way or another.
//   layers       Input {shape}, Dense {units, activation = "linear", use_bias = true},
//                Dropout {rate in [0, 1)}, Flatten {}, Activation {activation},
//                Rescaling {scale, offset = 0} (x * scale + offset, any shape),
//                Conv2D {filters, kernel_size (n or [h, w]), strides = 1 (n or [h, w]),
//                  padding = "valid" | "same", activation = "linear", use_bias = true},
//                MaxPooling2D {pool_size = 2 (n or [h, w]), strides = pool_size,
//                  padding = "valid" | "same"},
//                BatchNormalization {momentum = 0.99, epsilon = 0.001, center = true,
//                  scale = true, axis = -1 (the only axis supported)},
//                Reshape {target_shape} (the shape of one example, without the batch
//                  dimension; one entry may be -1, inferred from the input's size as Keras
//                  does; the sizes' products must match, else InvalidArgument naming the
//                  layer and both shapes; values keep their row-major order, as Keras's and
//                  numpy's reshape: Reshape [28, 28, 1] after input_shape [784] turns the
//                  [n, 784] rows that `tensorhub dataset import` stores into images for a
//                  Conv2D);
//                each may carry a "name" (no '.'); activations relu, sigmoid, tanh, softmax,
//                linear. Dense and Conv2D kernels start glorot_uniform, biases zero (Keras's
//                defaults).
//                Images are channels_last (Keras's default data_format): Conv2D and
//                MaxPooling2D take [height, width, channels] and give [out_h, out_w, filters
//                | channels]; "valid" gives floor((in - k) / s) + 1 and refuses a window larger
//                than its input, "same" gives ceil(in / s) with TensorFlow's padding (the odd
//                row / column at the bottom / right; zeros for Conv2D, ignored by the max).
//                Flatten of [h, w, c] orders values as Keras does (h, then w, then c).
//                BatchNormalization normalises the last axis: in fit() with the batch's mean
//                and biased variance, moving_x = momentum * moving_x + (1 - momentum) * batch_x
//                after every batch (Keras's momentum 0.99 is torch's momentum 0.01); in
//                evaluate() and predict() with the moving averages, which are saved with the
//                weights. A shape that does not fit (Conv2D on [784], a kernel larger than its
//                input) is InvalidArgument naming the layer and the shapes.
//   loss         what fit() minimises and what y must be (n examples):
//                "sparse_categorical_crossentropy" (the default): y I64 [n] class indices;
//                "categorical_crossentropy": y F32 [n, classes], one-hot or probabilities;
//                  both need an output [classes] and compute from logits: a model whose last
//                  layer ends in softmax is trained on its pre-softmax values, as Keras does,
//                  and predict() returns the probabilities;
//                "binary_crossentropy": y F32 [n] or [n, 1] (or [n, k] for an output [k] of
//                  independent labels), values in [0, 1]; the last layer is sigmoid (trained on
//                  its pre-sigmoid values, predict() gives probabilities) or linear (logits);
//                "mse" (or "mean_squared_error"): y F32 [n, output shape...]; the output is
//                  taken as it is, activation included.
//                A last activation other than the loss's own (e.g. relu before a
//                cross-entropy) is treated as giving logits, where Keras would read
//                probabilities. Per-example losses are means over the last axis (Keras).
//                null: an inference-only model (any output shape; predict() only).
//   metrics      optional, ["accuracy"]. Accuracy is reported for every loss but mse, as
//                Keras resolves "accuracy": argmax match for the categorical losses, output >
//                0.5 as probability (logit > 0; Keras would threshold a linear output at 0.5)
//                for binary_crossentropy. mse reports none: logs have no "accuracy" /
//                "val_accuracy", Evaluation::accuracy is NaN, and metrics ["accuracy"] with
//                mse is InvalidArgument.
//   optimizer    {"type": "Adam", learning_rate = 0.001, beta_1 = 0.9, beta_2 = 0.999,
//                epsilon = 1e-7} (the default; Keras's update: epsilon added to sqrt(v)), or
//                {"type": "AdamW", learning_rate = 0.001, weight_decay = 0.004, beta_1, beta_2,
//                epsilon = 1e-7} (Keras 3's defaults; decoupled weight decay, Loshchilov &
//                Hutter 2019: w -= lr * weight_decay * w before each Adam step, every weight
//                decayed as Keras does by default), or
//                {"type": "RMSprop", learning_rate = 0.001, rho = 0.9, momentum = 0,
//                epsilon = 1e-7, centered = false} (Keras's update: w -= lr g / sqrt(v + eps),
//                epsilon inside the sqrt, where torch adds it to sqrt(v); centered subtracts
//                the squared moving mean of g from v; slots start at zero), or
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

namespace tensorhub {

class Callback;  // tensorhub/train/callbacks.h
class Dataset;   // tensorhub/data/dataset.h

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
  /// Keras callbacks (tensorhub/train/callbacks.h), called in this order at Keras's hook
  /// points. With verbose > 0 and no ProgressBar among them, fit puts one first (as Keras
  /// adds its ProgbarLogger).
  std::vector<std::shared_ptr<Callback>> callbacks;

  // fit(Dataset) only (Keras's arguments of these names; fit(Tensor...) ignores them).
  /// Batches per epoch. 0 (Keras's None): each epoch is one whole new pass over the dataset.
  /// N > 0: N batches per epoch from one pass that continues across epochs (so a dataset
  /// with repeat() or at least N * epochs batches is expected); as in Keras, a dataset whose
  /// pass holds exactly N batches is restarted every epoch instead, and one that ends earlier
  /// ends training after that epoch (a warning on stderr when verbose > 0).
  std::int64_t steps_per_epoch = 0;
  /// Batches of each validation pass (a new pass every epoch); 0: until it ends.
  std::int64_t validation_steps = 0;
  /// The element keys of the inputs and targets in the dataset's batches.
  std::string x_key = "x";
  std::string y_key = "y";
};

/// Settings of evaluate(Dataset); Keras's arguments.
struct EvaluateOptions {
  /// Batches to evaluate from a new pass; 0 (Keras's None): until the dataset ends.
  std::int64_t steps = 0;
  /// The element keys of the inputs and targets in the dataset's batches.
  std::string x_key = "x";
  std::string y_key = "y";
  /// Their on_test_* hooks are called (batch logs: the batch's "loss" and "accuracy").
  std::vector<std::shared_ptr<Callback>> callbacks;
};

/// Result of evaluate(): the loss and accuracy over the whole set (accuracy NaN for a model
/// with loss mse, which has none).
struct Evaluation {
  double loss = 0;
  double accuracy = 0;
};

/// The files of a saved model by name ("model.json", "weights.safetensors",
/// "optimizer.safetensors", "state.json"): Model::to_parts / from_parts, and the same type as
/// store's Parts, so that a hub stores them as they are.
using ModelParts = std::map<std::string, std::vector<std::byte>>;

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

  /// Trains on x (F32 [n, input_shape...], n >= 1) and y (as the config's loss needs it, see
  /// "loss" above; e.g. I64 [n] class indices in [0, outputs) for
  /// sparse_categorical_crossentropy), optionally validating on (x_val, y_val) after every
  /// epoch (keys "val_loss", "val_accuracy"). Runs epochs initial_epoch .. epochs - 1; "loss"
  /// and "accuracy" are averages over the epoch's samples (no accuracy for mse).
  /// BatchNormalization runs in training mode (batch statistics, moving averages updated).
  /// Calls options.callbacks at Keras's hook points (tensorhub/train/callbacks.h); a callback
  /// setting stop_training ends the fit after the current batch.
  /// Uses the optimizer and loss of the config; optimizer state carries over between calls.
  /// Throws InvalidArgument for shapes, dtypes or labels that do not fit the model, or bad
  /// options (batch_size < 1, negative epochs); Internal if libtorch fails.
  History fit(const Tensor& x, const Tensor& y, const FitOptions& options,
              const Tensor* x_val = nullptr, const Tensor* y_val = nullptr);

  /// Trains on a Dataset (tensorhub/data/dataset.h) whose elements are batches: x_key holds
  /// the inputs [b, input_shape...] (F32 is used in place, without a copy; another numeric
  /// dtype is converted to F32 as it is, unscaled), y_key the targets for b examples as fit()
  /// above takes them (integer class indices of any integer dtype for
  /// sparse_categorical_crossentropy). Epochs, logs, callbacks and the progress bar behave as
  /// above; epochs last options.steps_per_epoch batches, or one whole pass when it is 0 (the
  /// progress bar then shows the steps as unknown until the first epoch has ended).
  /// batch_size and shuffle are the dataset's business (Keras ignores them for datasets too).
  /// With `validation_data`, every epoch ends with evaluate(*validation_data) over
  /// validation_steps batches (0: a whole pass). Throws InvalidArgument naming the batch for a
  /// missing key or a tensor that does not fit, and for a first epoch without any batch;
  /// what the dataset throws (the pass is then closed).
  History fit(const Dataset& dataset, const FitOptions& options,
              const Dataset* validation_data = nullptr);

  /// Loss and accuracy over the batches of a new pass of `dataset` (options.steps of them, or
  /// all), in inference mode; x and y as fit(Dataset) takes them. Throws InvalidArgument as
  /// fit(Dataset) does, and when the dataset yields no batch; FailedPrecondition for
  /// "loss": null.
  Evaluation evaluate(const Dataset& dataset, const EvaluateOptions& options = {}) const;

  /// Loss and accuracy on (x, y) (F32 [n, input_shape...] with n >= 1, y as fit() takes it) in
  /// inference mode (dropout off, BatchNormalization on its moving averages), in batches of
  /// `batch_size`. Throws InvalidArgument as fit() does; FailedPrecondition for "loss": null.
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

  /// The saved model as in-memory files, by name: model.json (the config, indented JSON),
  /// weights.safetensors, optimizer.safetensors and state.json, each as save() describes it.
  /// Hub::save_model stores the last two as extra parts. Throws InvalidArgument if a tensor
  /// cannot be serialised.
  ModelParts to_parts() const;

  /// A model from to_parts()'s files, with its optimizer state (what load() does with a
  /// directory's files). `source` names the files in errors (a directory, "model 12").
  /// Throws DataLoss for a missing or malformed part, and what load_state throws.
  static Model from_parts(const ModelParts& parts, const std::string& source);

  /// load_state from in-memory parts (to_parts()'s four files); `source` as in from_parts.
  void load_state(const ModelParts& parts, const std::string& source);

  /// Saves the model as a directory (created if missing): model.json (the config),
  /// weights.safetensors (BatchNormalization's moving averages included),
  /// optimizer.safetensors ("<param>.<slot>": Adam's and AdamW's "m"/"v", SGD's "momentum",
  /// RMSprop's "velocity", "momentum" (momentum > 0), "average_gradient" (centered)) and
  /// state.json {"epoch", "step", "learning_rate"}. Files are replaced
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

}  // namespace tensorhub
