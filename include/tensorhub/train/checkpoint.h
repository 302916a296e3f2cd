// Checkpointing callbacks: ModelCheckpoint (Keras's, writing our saved-model directory, see
// Model::save in model.h) and BackupAndRestore (fault tolerance: resume an interrupted fit),
// with format_filepath for checkpoint names. Torch-free. Included by callbacks.h.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tensorhub/train/callbacks.h"

namespace tensorhub {

/// Python's str.format with named fields, as Keras's ModelCheckpoint uses it: "{name}",
/// "{name:02d}", "{name:.2f}", "{name:>8.4e}" (Python's format-spec grammar, which fmt
/// implements: fill, alignment, sign, width, precision; types d, f, e, E, g, G only), "{{" and
/// "}}". Values come from `values`; an integral value without a type prints as an integer
/// ("{epoch}"), a fraction as %.12g; d needs an integral value. Throws InvalidArgument naming
/// the pattern and the cause (an unknown key, a malformed spec).
std::string format_filepath(const std::string& pattern, const std::map<std::string, double>& values);

/// keras.callbacks.ModelCheckpoint. filepath is a template for format_filepath with keys
/// "epoch" (1-based, as Keras), "batch" (with save_freq > 0) and the epoch logs. What it
/// writes is our saved-model directory (Model::save: model.json, weights.safetensors,
/// optimizer.safetensors, state.json); with save_weights_only, the directory holds
/// weights.safetensors only (Keras writes a weights file; we keep the directory layout).
/// save_freq 0 means "epoch"; N > 0 saves every N batches (logs then are the batch's).
/// The directory part of filepath is created and tested for writing in on_train_begin:
/// Unavailable is thrown there, before any training step.
struct ModelCheckpointOptions {
  std::string filepath;
  std::string monitor = "val_loss";
  int verbose = 0;
  bool save_best_only = false;
  bool save_weights_only = false;
  Mode mode = Mode::kAuto;
  std::int64_t save_freq = 0;  // 0 = "epoch"
  std::optional<double> initial_value_threshold;
};
class ModelCheckpoint : public Callback {
 public:
  explicit ModelCheckpoint(ModelCheckpointOptions options);
  void on_train_begin(const Logs& logs) override;
  void on_epoch_begin(int epoch, const Logs& logs) override;
  void on_train_batch_end(std::int64_t batch, const Logs& logs) override;
  void on_epoch_end(int epoch, Logs& logs) override;
  /// Paths written so far, in order.
  const std::vector<std::string>& saved() const { return saved_; }
  double best() const { return best_; }

 private:
  void save(int epoch, std::int64_t batch, const Logs& logs);
  ModelCheckpointOptions o_;
  Mode mode_;
  double best_;
  int epoch_ = 0;
  std::int64_t batches_seen_ = 0;
  std::vector<std::string> saved_;
};

/// keras.callbacks.BackupAndRestore(backup_dir): saves the model (Model::save, with optimizer
/// state and the epoch) into backup_dir/chief at every epoch end; on_train_begin restores a
/// backup left by an interrupted run and makes fit continue from the epoch after it; a
/// successful on_train_end deletes the backup. Exact resumption also needs FitOptions::seed
/// (shuffling and dropout of an epoch depend on seed and epoch only).
class BackupAndRestore : public Callback {
 public:
  explicit BackupAndRestore(std::string backup_dir, bool delete_checkpoint = true);
  void on_train_begin(const Logs& logs) override;
  void on_epoch_end(int epoch, Logs& logs) override;
  void on_train_end(const Logs& logs) override;
  /// The epoch training resumed at, or -1 if nothing was restored.
  int restored_epoch() const { return restored_epoch_; }

 private:
  std::string dir_;
  bool delete_;
  int restored_epoch_ = -1;
};

}  // namespace tensorhub
