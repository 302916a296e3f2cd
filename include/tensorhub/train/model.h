// A neural network built from a Keras-style layer list, trained with fit(), saved as
// model.json + weights.safetensors. This header does not include libtorch: the network lives
// behind a pointer, so code that only saves, loads or evaluates models builds fast.
//
// model.json (the "config"): a Keras-style layer list with the loss and the optimizer, e.g.
//   {"name": "mlp", "input_shape": [784],
//    "layers": [{"type": "Dense", "units": 800, "activation": "relu"}, {"type": "Dense", "units": 10}],
//    "loss": "sparse_categorical_crossentropy", "optimizer": {"type": "Adam", "learning_rate": 0.0001}}
// docs/model-json.md describes every field: the layers and their shapes (channels_last
// images), the losses and what y each needs, the optimizers' updates, and the weight names in
// weights.safetensors ("<layer name>.<param>" with Keras's layer names, e.g. "dense.weight"
// [units, in] in torch's layout). An unknown field in a layer or the optimizer is an error, so
// a typo is never ignored.
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
  /// Builds a freshly initialised network from a config (docs/model-json.md). Throws InvalidArgument
  /// naming the field and the allowed values for an unknown layer, activation, loss or
  /// optimizer, or a shape that does not fit.
  static Model from_config(const nlohmann::json& config);

  /// Rebuilds a network from its config and loads `weights`. Throws what from_config throws,
  /// and InvalidArgument naming the tensor if a weight is missing, extra, not F32, or of
  /// another shape (a checkpoint of another architecture).
  static Model from_parts(const nlohmann::json& config, const NamedTensors& weights);

  /// The config this model was built from, with the layer names filled in.
  const nlohmann::json& config() const;

  /// All parameters and buffers as F32 tensors, named as docs/model-json.md says.
  NamedTensors weights() const;

  /// Trains on x (F32 [n, input_shape...], n >= 1) and y (as the config's loss needs it, see
  /// "loss" in docs/model-json.md; e.g. I64 [n] class indices in [0, outputs) for
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
  /// progress bar then shows Dataset::cardinality() steps, or unknown steps until the first
  /// epoch has ended when the dataset does not know its length).
  /// batch_size and shuffle are the dataset's business (Keras ignores them for datasets too).
  /// With `validation_data`, every epoch ends with evaluate(*validation_data) over
  /// validation_steps batches (0: a whole pass). Throws InvalidArgument naming the batch for a
  /// missing key or a tensor that does not fit, for a first epoch without any batch, and
  /// (before training, as tf.keras) for an infinite dataset (cardinality()
  /// kInfiniteCardinality, e.g. repeat() forever) with steps_per_epoch 0, or an infinite
  /// validation_data with validation_steps 0; what the dataset throws (the pass is then closed).
  History fit(const Dataset& dataset, const FitOptions& options,
              const Dataset* validation_data = nullptr);

  /// Loss and accuracy over the batches of a new pass of `dataset` (options.steps of them, or
  /// all), in inference mode; x and y as fit(Dataset) takes them. Throws InvalidArgument as
  /// fit(Dataset) does, and when the dataset yields no batch or is infinite with steps 0;
  /// FailedPrecondition for
  /// "loss": null.
  Evaluation evaluate(const Dataset& dataset, const EvaluateOptions& options = {}) const;

  /// Loss and accuracy on (x, y) (F32 [n, input_shape...] with n >= 1, y as fit() takes it) in
  /// inference mode (dropout off, BatchNormalization on its moving averages), in batches of
  /// `batch_size`. Throws InvalidArgument as fit() does; FailedPrecondition for "loss": null.
  Evaluation evaluate(const Tensor& x, const Tensor& y, std::int64_t batch_size = 1024) const;

  /// Model outputs for x (F32 [n, input_shape...]) in inference mode: F32 [n, output shape...]
  /// (logits for a model whose last Dense has no activation, probabilities if it ends in
  /// softmax). Throws InvalidArgument if x does not fit the model, or (for an Embedding)
  /// holds an id that is not an integer in [0, input_dim).
  /// Models whose first layer is an Embedding also take their ids (in x here, in fit() and
  /// in evaluate()) as F64, I64, I32, U8 or I8, each checked in its own dtype.
  Tensor predict(const Tensor& x, std::int64_t batch_size = 1024) const;

  /// The output of the layer named `layer` (a name of config()'s layers, e.g. "embedding")
  /// for x, in inference mode (dropout off, BatchNormalization on its moving averages), in
  /// batches of `batch_size`: F32 [n, that layer's output shape...], its activation applied.
  /// An Input layer's name gives x itself (as F32). `tensorhub embed` writes these as
  /// embeddings. x as predict() takes it. Throws NotFound naming the model's layers for an
  /// unknown name, InvalidArgument as predict() does.
  Tensor layer_output(const std::string& layer, const Tensor& x, std::int64_t batch_size = 1024) const;

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

/// The libraries training and serving compute with, for `tensorhub --version`: "libtorch
/// 1.13.0" and the BLAS loaded, e.g. "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Haswell
/// MAX_THREADS=64 (/usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3)", as OpenBLAS
/// reports itself (openblas_get_config) and the file the dynamic loader took it from; a BLAS
/// that is not OpenBLAS is named by its file alone. One line each.
std::string runtime_libraries();

/// libtorch's current number of intra-op threads (torch::get_num_threads), e.g. to report
/// what set_num_threads(0) chose.
int get_num_threads();

/// The original TensorLayer MLP for MNIST: Dropout 0.2 -> Dense n_units1 relu -> Dropout 0.5
/// -> Dense n_units2 relu -> Dropout 0.5 -> Dense 10, Adam with `learning_rate`.
nlohmann::json mlp_config(int n_units1, int n_units2, double learning_rate = 1e-4);

}  // namespace tensorhub
