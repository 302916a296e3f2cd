// Keras callbacks for Model::fit (FitOptions::callbacks). Torch-free.
//
// Hooks are Keras's, called by fit() at the same points:
//   on_train_begin, then per epoch on_epoch_begin, per batch on_train_batch_begin/end
//   (batch logs: "loss" and "accuracy" of that batch alone — Keras 2.x reports running means
//   of the epoch; ours show the batch-to-batch noise), validation as on_test_begin,
//   on_test_batch_begin/end, on_test_end (logs "loss", "accuracy"), then on_epoch_end with the
//   epoch logs ("loss", "accuracy", "val_loss", "val_accuracy"), and on_train_end with the
//   last epoch's logs. evaluate()/predict() with callbacks call on_test_* / on_predict_*.
// on_epoch_end gets the logs by reference: a callback may add entries (ReduceLROnPlateau and
// LearningRateScheduler add "lr", as Keras does), which later callbacks and History see.
// A callback stops training with model()->set_stop_training(true) (fit breaks after the
// current batch; the epoch's end hooks still run, as in Keras 2.x).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tensorhub/summary/hparams.h"
#include "tensorhub/train/model.h"

namespace tensorhub {
class Hub;
}

namespace tensorhub {

/// What Keras passes as callback.params.
struct CallbackParams {
  int epochs = 0;
  std::int64_t steps = 0;  // batches per epoch
  int verbose = 0;
};

class Callback {
 public:
  virtual ~Callback() = default;

  void set_model(Model* model) { model_ = model; }
  Model* model() const { return model_; }
  void set_params(const CallbackParams& params) { params_ = params; }
  const CallbackParams& params() const { return params_; }

  virtual void on_train_begin(const Logs& logs) {}
  virtual void on_train_end(const Logs& logs) {}
  virtual void on_epoch_begin(int epoch, const Logs& logs) {}
  virtual void on_epoch_end(int epoch, Logs& logs) {}
  virtual void on_train_batch_begin(std::int64_t batch, const Logs& logs) {}
  virtual void on_train_batch_end(std::int64_t batch, const Logs& logs) {}
  virtual void on_test_begin(const Logs& logs) {}
  virtual void on_test_end(const Logs& logs) {}
  virtual void on_test_batch_begin(std::int64_t batch, const Logs& logs) {}
  virtual void on_test_batch_end(std::int64_t batch, const Logs& logs) {}
  virtual void on_predict_begin(const Logs& logs) {}
  virtual void on_predict_end(const Logs& logs) {}
  virtual void on_predict_batch_begin(std::int64_t batch, const Logs& logs) {}
  virtual void on_predict_batch_end(std::int64_t batch, const Logs& logs) {}

 private:
  Model* model_ = nullptr;
  CallbackParams params_;
};

/// Keras's mode argument. kAuto: max if the monitored name contains "acc" (accuracy), else
/// min (Keras 2.x's rule; "auc" etc. are not metrics of ours).
enum class Mode { kAuto, kMin, kMax };

/// Resolves kAuto for `monitor`.
Mode resolve_mode(Mode mode, const std::string& monitor);

/// keras.callbacks.EarlyStopping (Keras 2.x semantics: wait counter reset on improvement,
/// stop when wait >= patience; improvement means monitor - min_delta < best (min) or
/// monitor + min_delta > best (max) with min_delta's sign set by mode; baseline is the
/// initial best (and training stops after patience epochs not beating it); epochs before
/// start_from_epoch are not counted; restore_best_weights restores the best epoch's weights
/// when stopping, or at the end of training if the best epoch was not the last, as Keras 2.12).
/// A monitor missing from the logs warns on stderr and is skipped (Keras warns too).
struct EarlyStoppingOptions {
  std::string monitor = "val_loss";
  double min_delta = 0;
  int patience = 0;
  int verbose = 0;
  Mode mode = Mode::kAuto;
  std::optional<double> baseline;
  bool restore_best_weights = false;
  int start_from_epoch = 0;
};
class EarlyStopping : public Callback {
 public:
  explicit EarlyStopping(EarlyStoppingOptions options = {});
  void on_train_begin(const Logs& logs) override;
  void on_epoch_end(int epoch, Logs& logs) override;
  void on_train_end(const Logs& logs) override;
  /// 0-based epoch at which training was stopped (Keras's stopped_epoch), 0 if it was not.
  int stopped_epoch() const { return stopped_epoch_; }
  int best_epoch() const { return best_epoch_; }
  double best() const { return best_; }
  int wait() const { return wait_; }

 private:
  bool improved(double current, double reference) const;
  EarlyStoppingOptions o_;
  Mode mode_;
  double delta_ = 0, best_ = 0;
  int wait_ = 0, stopped_epoch_ = 0, best_epoch_ = 0, last_epoch_ = -1;
  NamedTensors best_weights_;
  bool have_best_weights_ = false;
};

/// keras.callbacks.TerminateOnNaN: stops training when a batch loss is NaN or infinite,
/// printing "Batch <b>: Invalid loss, terminating training" on stderr (Keras's message).
class TerminateOnNaN : public Callback {
 public:
  void on_train_batch_end(std::int64_t batch, const Logs& logs) override;
  /// The batch that had the invalid loss, -1 if none.
  std::int64_t terminated_batch() const { return batch_; }

 private:
  std::int64_t batch_ = -1;
};

/// keras.callbacks.CSVLogger: a header "epoch<sep>key..." (keys sorted, as Keras) and one row
/// per epoch; append keeps an existing file and writes no second header.
class CSVLogger : public Callback {
 public:
  explicit CSVLogger(std::string filename, char separator = ',', bool append = false);
  ~CSVLogger() override;
  void on_train_begin(const Logs& logs) override;
  void on_epoch_end(int epoch, Logs& logs) override;
  void on_train_end(const Logs& logs) override;

 private:
  std::string filename_;
  char sep_;
  bool append_;
  std::vector<std::string> keys_;
  bool header_written_ = false;
  std::FILE* file_ = nullptr;
};

/// keras.callbacks.LearningRateScheduler: at each epoch begin sets the learning rate to
/// schedule(epoch, current lr); adds "lr" to the epoch logs.
class LearningRateScheduler : public Callback {
 public:
  explicit LearningRateScheduler(std::function<double(int epoch, double lr)> schedule,
                                 int verbose = 0);
  void on_epoch_begin(int epoch, const Logs& logs) override;
  void on_epoch_end(int epoch, Logs& logs) override;

 private:
  std::function<double(int, double)> schedule_;
  int verbose_;
};

/// keras.callbacks.ReduceLROnPlateau (Keras 2.x): after `patience` epochs without improvement
/// (by min_delta, relative to mode) and outside cooldown, lr = max(lr * factor, min_lr) if
/// that lowers it by more than a rounding error; adds "lr" to the epoch logs. factor must be
/// < 1 (InvalidArgument otherwise, as Keras raises ValueError).
struct ReduceLROnPlateauOptions {
  std::string monitor = "val_loss";
  double factor = 0.1;
  int patience = 10;
  int verbose = 0;
  Mode mode = Mode::kAuto;
  double min_delta = 1e-4;
  int cooldown = 0;
  double min_lr = 0;
};
class ReduceLROnPlateau : public Callback {
 public:
  explicit ReduceLROnPlateau(ReduceLROnPlateauOptions options = {});
  void on_train_begin(const Logs& logs) override;
  void on_epoch_end(int epoch, Logs& logs) override;

 private:
  ReduceLROnPlateauOptions o_;
  Mode mode_;
  double best_ = 0;
  int wait_ = 0, cooldown_counter_ = 0;
};

/// Progress output on stderr (Keras's ProgbarLogger): verbose 1 draws a bar redrawn with '\r'
/// when stderr is a terminal, else (or with verbose 2) one line per epoch:
/// "Epoch 3/10 20/20 - 0.4s - loss: 0.1234 - accuracy: 0.9500 - val_loss: ...".
class ProgressBar : public Callback {
 public:
  explicit ProgressBar(int verbose = 1);
  void on_epoch_begin(int epoch, const Logs& logs) override;
  void on_train_batch_end(std::int64_t batch, const Logs& logs) override;
  void on_epoch_end(int epoch, Logs& logs) override;

 private:
  int verbose_;
  bool bar_ = false;
  int epoch_ = 0;
  double loss_sum_ = 0, acc_sum_ = 0;
  std::int64_t seen_ = 0;
  double start_ = 0, last_draw_ = 0;
};

/// keras.callbacks.TensorBoard: event files in log_dir/train (scalars "epoch_loss",
/// "epoch_accuracy", "epoch_learning_rate", step = epoch; with update_freq N > 0 also
/// "batch_loss"/"batch_accuracy" every N batches, step = global batch) and log_dir/validation
/// ("epoch_loss", "epoch_accuracy" from val_*), and with histogram_freq N > 0 a histogram of
/// every weight ("dense.weight", ...) every N epochs in log_dir/train. Keras names its weight
/// histograms "dense/kernel_0"; ours carry our weight names.
///
/// With `hparams` set it also does what TensorBoard's Keras hparams callback
/// (tensorboard.plugins.hparams.api.KerasCallback, plugins/hparams/_keras.py) does, so that runs
/// with different hyperparameters line up in TensorBoard's HPARAMS tab:
///   - on_train_begin: the session start info (hparams, group name = trial_id, start time) in
///     an event file of log_dir itself (the session's run; its train/ and validation/
///     sub-runs are the metric groups);
///   - on_train_end: the session end info, STATUS_SUCCESS, or STATUS_FAILURE when a batch or
///     epoch loss was NaN or infinite (TerminateOnNaN stops such a run); a TensorBoard
///     destroyed after on_train_begin without on_train_end (fit threw) writes STATUS_FAILURE.
///     STATUS_RUNNING is never written: a session without an end record is still running.
///   - the experiment summary (hp.hparams_config: hparam infos and metric infos), in the
///     experiment directory (the directory TensorBoard is pointed at, see
///     hparams_experiment_dir), only where one is needed. TensorBoard's HParams view shows
///     the hyperparameters of the experiment summary it finds first, and only those; with
///     none, it builds the experiment from every session's start info (the union of all
///     runs' keys, each key's type and domain from the values the runs have) and its metrics
///     from the scalars of the sessions' runs (backend_context.py
///     _compute_experiment_from_runs). So:
///       * without hparam_domains and hparam_metrics no experiment summary is written:
///         TensorBoard then lists every key of every run, also of runs written later, even
///         while it is running;
///       * with either (an explicit experiment config), or when the experiment directory
///         already holds one of ours (events.out.tfevents.*.hparams_experiment, e.g. of an
///         earlier run with domains), the summary written is the union of the existing one's
///         and this run's hyperparameters and metrics (existing entries kept as they are,
///         new names appended; a new file replaces the old, under an flock on
///         <dir>/.hparams_experiment.lock so that concurrent runs keep each other's keys).
///         Nothing is rewritten when this run adds nothing. A TensorBoard that already read
///         an experiment summary keeps showing it (it keeps the first metadata of a tag)
///         until restarted. Experiment summaries of other writers are left alone.
///     Metrics without hparam_metrics: one per epoch log of the first epoch (not "lr"):
///     "loss" -> group "train", tag "epoch_loss", DATASET_TRAINING; "val_loss" -> group
///     "validation", tag "epoch_loss", DATASET_VALIDATION (display names "loss", "val_loss").
/// Format source: tensorboard/plugins/hparams/summary_v2.py, metadata.py and
/// backend_context.py (tensorflow/tensorboard).
///
/// write_graph (default true, as Keras): once per fit, after the SessionLog START below, the
/// model's graph in log_dir/train as Keras writes it: EventFileWriter::add_keras_model with tag
/// "keras", step 0, and the model as Keras's Model.to_json() (keras_model_json.h), which
/// TensorBoard's GRAPHS tab draws layer by layer (run "train", tag "keras", conceptual graph);
/// and the same layers as the run's op graph (EventFileWriter::add_graph of keras_graph_nodes),
/// which GRAPHS opens on ("Op graph"; Keras writes TensorFlow's graph there). TensorBoard keeps
/// a run's newest graph_def and never purges it on a START, so a second fit's graph replaces
/// the first's.
///
/// embeddings_freq N > 0 (Keras's): at the end of every epoch e with e % N == 0, for every
/// Embedding layer L of the model, its weights [input_dim, output_dim] as the tensor TSV
/// log_dir/train/L.tsv, and log_dir/train/projector_config.pbtxt with one embedding per layer
/// (tensor_name "L/embeddings", Keras's variable name; tensor_path "L.tsv"; tensor_shape;
/// metadata_path "L_metadata.tsv" where embeddings_metadata gives one), each file replaced.
/// Keras writes its config into log_dir itself beside a TensorFlow checkpoint; ours goes into
/// the train run because TensorBoard's projector plugin reads projector_config.pbtxt from run
/// directories (directories with event files) and from the directory TensorBoard is pointed
/// at (projector_plugin.py _update_configs): log_dir/train is a run whether TensorBoard is
/// pointed at log_dir or at its parent, log_dir itself is one only with hparams. TensorBoard
/// reads tensor_path TSVs without TensorFlow. projector.h has the formats.
/// embeddings_metadata (Keras's): the path of a metadata file for every Embedding layer, or a
/// JSON object {layer name: path}; a relative path is taken relative to log_dir if the file is
/// there, else to the working directory. Read at on_train_begin with TensorBoard's rules
/// (projector.h read_metadata_tsv) and copied to log_dir/train/L_metadata.tsv; its number of
/// data rows must be the layer's input_dim.
///
///
/// Resumed training: at the first epoch of every fit (initial_epoch, the epoch BackupAndRestore
/// restores, a promoted Hyperband trial's tuner/initial_epoch) the callback writes a
/// SessionLog START at that epoch's step into train/ (and validation/), as TensorFlow's
/// SummarySaverHook does at the global step a session starts at (Keras's TensorBoard writes
/// none). TensorBoard then drops the points an earlier, interrupted or longer fit left in
/// these runs at steps >= that epoch (EventFileWriter::add_session_log), so a fit resumed
/// into the same log_dir continues the curves instead of drawing a zig-zag over stale points;
/// a second fit from epoch 0 into the same log_dir replaces the first one's curves. Batch
/// scalars continue at global batch epoch * steps. With update_freq > 0, train/ holds steps
/// of two units (epochs and batches, as in Keras), and the START at epoch e also drops the
/// earlier fit's batch points at batches >= e, not only the stale ones.
struct TensorBoardOptions {
  std::string log_dir = "logs";
  int histogram_freq = 0;
  std::int64_t update_freq = 0;  // 0 = "epoch"
  /// Writes the model's graph for TensorBoard's GRAPHS tab (see above).
  bool write_graph = true;
  /// Writes the Embedding layers' weights for TensorBoard's PROJECTOR every this many epochs;
  /// 0: never (see above).
  int embeddings_freq = 0;
  /// null (none), a metadata file's path for every Embedding layer, or {layer name: path}.
  nlohmann::json embeddings_metadata = nullptr;
  /// This run's hyperparameters: a JSON object of name -> number, boolean or string, e.g.
  /// {{"units", 256}, {"optimizer", "adam"}}. Empty (the default): no hparams records.
  nlohmann::json hparams = nlohmann::json::object();
  /// The session group (hp.KerasCallback's trial_id); sessions of one group are averaged.
  /// Empty: TensorBoard's default, the SHA-256 hex digest of the hparams as Python's
  /// json.dumps(hparams, sort_keys=True, separators=(",", ":")) writes them.
  std::string trial_id{};
  /// Optional domains for the experiment's hparam infos (hp.Discrete, hp.RealInterval).
  /// A hyperparameter without one is listed without a domain (DATA_TYPE_UNSET), which lets
  /// every run's value in; a domain named here but absent from hparams is listed as well.
  std::vector<HParam> hparam_domains{};
  /// Optional metric infos of the experiment; empty: derived from the first epoch's logs
  /// (see above).
  std::vector<HParamMetric> hparam_metrics{};
  /// Where the experiment summary goes: the log directory TensorBoard is pointed at, whose
  /// sub-directories are the sessions' runs. Empty: the parent of log_dir (log_dir itself when
  /// it has no parent), as in TensorBoard's hparams tutorial (hparams_config in
  /// "logs/hparam_tuning", each session in "logs/hparam_tuning/run-N").
  std::string hparams_experiment_dir{};
};
class TensorBoard : public Callback {
 public:
  /// Throws InvalidArgument for a negative histogram_freq, update_freq or embeddings_freq,
  /// hparams that are not an object of numbers, booleans and strings, two hparam_domains of
  /// one name, or embeddings_metadata that is not null, a string or an object of strings.
  /// on_train_begin throws InvalidArgument when embeddings_metadata names a layer that is not
  /// an Embedding layer of the model (Keras raises ValueError), or a metadata file whose data
  /// rows are not the layer's input_dim (the message says which rule TensorBoard applied),
  /// Unavailable when it cannot be read.
  explicit TensorBoard(TensorBoardOptions options = {});
  /// Writes STATUS_FAILURE for a session begun but not ended (errors are swallowed).
  ~TensorBoard() override;
  void on_train_begin(const Logs& logs) override;
  /// At the fit's first epoch: the SessionLog START (see above).
  void on_epoch_begin(int epoch, const Logs& logs) override;
  void on_train_batch_end(std::int64_t batch, const Logs& logs) override;
  void on_epoch_end(int epoch, Logs& logs) override;
  void on_train_end(const Logs& logs) override;

  /// The session group name written with the hparams (trial_id, or the derived hash); empty
  /// without hparams.
  const std::string& group_name() const { return group_name_; }

 private:
  struct Writers;
  struct EmbeddingLayer {
    std::string name;      // the layer's name, e.g. "embedding"
    std::string weight;    // its weight's name in Model::weights(), e.g. "embedding.weight"
    bool has_metadata = false;
  };
  void write_experiment(const Logs* first_epoch_logs);
  void prepare_embeddings();
  void write_embeddings();
  std::vector<EmbeddingLayer> embedding_layers_;
  TensorBoardOptions o_;
  std::unique_ptr<Writers> w_;
  std::int64_t global_batch_ = 0;
  int start_epoch_ = -1;  // the fit's first epoch; -1 until on_epoch_begin
  std::string group_name_;
  bool invalid_loss_ = false;
  bool experiment_done_ = false;
};

/// Saves each epoch's metrics into a hub's logs (TensorHub's save_training_log /
/// save_validation_log): training {"epoch", "loss", "accuracy", ...extra tags}, validation
/// {"epoch", "loss": val_loss, "accuracy": val_accuracy, ...tags} when validation ran.
class HubLogger : public Callback {
 public:
  /// `hub` must outlive the callback.
  HubLogger(Hub& hub, nlohmann::json tags = nlohmann::json::object());
  /// Opens Hub(uri, project) itself.
  HubLogger(const std::string& uri, const std::string& project,
            nlohmann::json tags = nlohmann::json::object());
  ~HubLogger() override;
  void on_epoch_end(int epoch, Logs& logs) override;

 private:
  std::unique_ptr<Hub> owned_;
  Hub* hub_;
  nlohmann::json tags_;
};

/// A callback from lambdas (Keras's LambdaCallback: on_epoch_begin, on_epoch_end, on_batch_end,
/// on_train_begin, on_train_end); unset members do nothing. A lambda stops training the way
/// every callback does, with model()->set_stop_training(true) (capture the callback's raw
/// pointer, not its shared_ptr, to ask for model()):
///   auto cb = std::make_shared<LambdaCallback>();
///   cb->epoch_end = [c = cb.get()](int epoch, Logs& logs) { if (epoch == 2) c->model()->set_stop_training(true); };
///   options.callbacks.push_back(cb);
class LambdaCallback : public Callback {
 public:
  std::function<void(int, const Logs&)> epoch_begin;
  std::function<void(int, Logs&)> epoch_end;
  std::function<void(std::int64_t, const Logs&)> batch_end;
  std::function<void(const Logs&)> train_begin, train_end;
  void on_epoch_begin(int epoch, const Logs& logs) override {
    if (epoch_begin) epoch_begin(epoch, logs);
  }
  void on_epoch_end(int epoch, Logs& logs) override {
    if (epoch_end) epoch_end(epoch, logs);
  }
  void on_train_batch_end(std::int64_t batch, const Logs& logs) override {
    if (batch_end) batch_end(batch, logs);
  }
  void on_train_begin(const Logs& logs) override {
    if (train_begin) train_begin(logs);
  }
  void on_train_end(const Logs& logs) override {
    if (train_end) train_end(logs);
  }
};

}  // namespace tensorhub

// ModelCheckpoint, BackupAndRestore and format_filepath.
#include "tensorhub/train/checkpoint.h"  // IWYU pragma: export
