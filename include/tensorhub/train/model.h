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
  std::uint64_t seed = 0;   ///< seeds shuffling, dropout and weight init when != 0
  int verbose = 1;          ///< 0 silent, 1 progress bar on a terminal / a line per epoch
  /// Called after every epoch with its 0-based index and logs; return false to stop.
  std::function<bool(int epoch, const Logs& logs)> on_epoch_end;
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

  /// Rebuilds a network from its config and loads `weights`. Throws InvalidArgument if a
  /// weight is missing, extra, or of another shape (a checkpoint of another architecture).
  static Model from_parts(const nlohmann::json& config, const NamedTensors& weights);

  /// The config this model was built from, with the layer names filled in.
  const nlohmann::json& config() const;

  /// All parameters and buffers as F32 tensors, named as described above.
  NamedTensors weights() const;

  /// Trains on x (F32 [n, input_shape...]) and y (I64 [n] class indices for sparse
  /// categorical cross-entropy), optionally validating on (x_val, y_val) after every epoch
  /// (keys "val_loss", "val_accuracy"). Uses the optimizer and loss of the config.
  /// Throws InvalidArgument for shapes or dtypes that do not fit the model.
  History fit(const Tensor& x, const Tensor& y, const FitOptions& options,
              const Tensor* x_val = nullptr, const Tensor* y_val = nullptr);

  /// Loss and accuracy on (x, y) in inference mode (dropout off), in batches.
  Evaluation evaluate(const Tensor& x, const Tensor& y, std::int64_t batch_size = 1024) const;

  /// Model outputs for x in inference mode: F32 [n, outputs] (logits for a
  /// sparse_categorical_crossentropy model).
  Tensor predict(const Tensor& x, std::int64_t batch_size = 1024) const;

  /// Number of trainable parameters.
  std::int64_t count_params() const;

  struct Impl;

 private:
  explicit Model(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

/// Sets libtorch's intra-op threads (torch::set_num_threads). 0 picks the value of
/// OMP_NUM_THREADS if set, otherwise the number of cores.
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
