// Spec tasks: a declarative training job (JSON) that a runner trains without user code, through
// the CLI's trainer entry point `tensorhub train-spec` (DESIGN.md, "Tasks and runners").
//
// The format, docs/spec-format.md: sections "model" (a model.json config), "data" (a hub
// dataset and its tensor names), "fit", "callbacks" (Keras callbacks by class name),
// "initial_model" and "save_model", with ${name} placeholders for hyperparameters:
//   {"model": {"input_shape": [784], "layers": [{"type": "Dense", "units": "${units}"}, ...]},
//    "data": {"dataset": "fashion_mnist", "validation": {"x": "X_val", "y": "y_val"}},
//    "fit": {"epochs": 10}}
// An unknown field anywhere is InvalidArgument naming it and the allowed ones, so a typo is
// never ignored.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tensorhub/store/document.h"

namespace tensorhub {
class Hub;
class Dataset;  // tensorhub/data/dataset.h
}

namespace tensorhub {

/// Names of an (x, y) pair of tensors in a dataset.
struct TensorNames {
  std::string x, y;
};

/// One input pipeline of the "data" section (docs/spec-format.md, "Pipelines"): a source, the
/// features that become x and y, and tf.data's transformations, applied in this order:
/// skip, take, shard, parse, cache, shuffle, repeat, batch, prefetch. Its batches hold "x"
/// and "y".
struct PipelineSpec {
  std::vector<std::string> tfrecord;  ///< TFRecord file names or glob patterns (or empty)
  std::string compression;            ///< of the TFRecord files: "", "NONE", "GZIP", "ZLIB"
  std::string hub;                    ///< or a hub dataset_name (tensors or TFRecord shards)
  Json filter = Json::object();       ///< hub filter for `hub`
  Json features;                      ///< feature specs (JSON); null: a sharded hub dataset's own
  std::map<std::string, std::string> decode_raw;  ///< bytes feature -> decode_raw dtype name
  std::string x, y;                   ///< the features (or hub tensors) fit reads
  std::int64_t skip = 0, take = -1;   ///< tf.data's skip / take (-1: all) of the records
  std::int64_t num_shards = 1, shard_index = 0;  ///< tf.data's shard
  std::optional<std::string> cache;   ///< "" in memory, else a file prefix; none: no cache
  std::int64_t shuffle_buffer = 0;    ///< 0: no shuffle
  std::optional<std::uint64_t> shuffle_seed;
  bool reshuffle_each_iteration = true;
  std::int64_t repeat = 0;            ///< 0: no repeat; -1: forever; n: n passes
  std::int64_t batch_size = 0;        ///< 0: fit.batch_size
  bool drop_remainder = false;
  std::int64_t prefetch = 0;          ///< buffer size; -1: AUTOTUNE; 0: none
  std::int64_t num_parallel_calls = 0;  ///< of the parsing map; -1: AUTOTUNE
};

/// The "data" section: tensors of one hub dataset (`dataset`, train / validation / test
/// names), or pipelines (train_pipeline set; validation_pipeline, test_pipeline optional).
struct DataSpec {
  std::string dataset;
  Json filter = Json::object();
  TensorNames train{"X_train", "y_train"};
  std::optional<TensorNames> validation;
  std::optional<TensorNames> test;
  std::optional<PipelineSpec> train_pipeline, validation_pipeline, test_pipeline;
};

/// The "fit" section (FitOptions without callbacks); initial_epoch is empty when not given.
struct FitSpec {
  std::int64_t batch_size = 32;
  int epochs = 1;
  std::optional<int> initial_epoch;
  bool shuffle = true;
  std::uint64_t seed = 0;
  int verbose = 1;
  std::int64_t steps_per_epoch = 0;   ///< pipelines only (FitOptions): 0 = a whole pass
  std::int64_t validation_steps = 0;  ///< pipelines only: 0 = a whole pass
};

/// The "initial_model" section: a model id, or a name with filter and sort.
struct InitialModelSpec {
  std::int64_t model_id = 0;  ///< > 0: this document; else the query below
  std::string model_name;
  Json filter = Json::object();
  SortSpec sort;
};

/// The "save_model" section.
struct SaveModelSpec {
  bool enabled = true;
  std::string model_name;  ///< empty: the config's "name", else "model"
  Json tags = Json::object();
  /// A metric of the epoch logs ("val_accuracy"): when set, the model tested and saved is the
  /// one of the epoch with the best value (Keras's ModelCheckpoint(save_best_only=True), and
  /// Keras Tuner's rule for a trial's model), weights and optimizer state; empty: the last.
  std::string monitor;
  std::string mode = "auto";  ///< "auto", "min" or "max" for monitor (Keras's mode)
};

/// A parsed, substituted and validated spec.
struct TrainSpec {
  Json model;       ///< model config; null when taken from initial_model
  DataSpec data;
  FitSpec fit;
  Json callbacks = Json::array();  ///< validated callback objects, built by run_train_spec
  std::optional<InitialModelSpec> initial_model;
  SaveModelSpec save_model;
  Json hyper_parameters = Json::object();
  Json substituted;  ///< the whole spec after substitution
};

/// What run_train_spec needs from its caller besides the hub.
struct TrainSpecContext {
  /// The runner's task id (0 outside a runner); saved as the model's task_id tag.
  std::int64_t task_id = 0;
  /// Called after each epoch with its 0-based index and logs (e.g. TaskContext::report_epoch),
  /// after the spec's callbacks have added their entries.
  std::function<void(int epoch, const Json& logs)> on_epoch_end;
  /// How to make a missing dataset `name`, added to the NotFound error (the CLI names its
  /// import command); null: "save one with Hub::save_dataset".
  std::function<std::string(const std::string& name)> missing_dataset_advice;
};

/// Reads one pipeline object of the "data" section (`where` names it in errors, e.g.
/// "spec.data.train"). Throws InvalidArgument naming the field: unknown fields, no source or
/// two, invalid feature specs, x or y missing from them, an unknown decode_raw dtype, bad
/// sizes.
PipelineSpec parse_pipeline_spec(const Json& json, const std::string& where);

/// The Dataset `spec` describes: batches {"x", "y"} (of `default_batch_size` when the spec
/// gives none). Hub sources are looked up in `hub` now (NotFound naming the dataset); a
/// sharded one streams its shards through hub's blob cache when it has one, over a
/// connection of its own per pass. TFRecord patterns are matched now (InvalidArgument when
/// one matches nothing). Records are parsed as tf.io.parse_single_example does with the
/// specs of x and y; bytes features listed in decode_raw become numbers (tf.io.decode_raw).
Dataset make_pipeline(const PipelineSpec& spec, Hub& hub, std::int64_t default_batch_size);

/// Replaces ${name} placeholders in every string of `spec` (docs/spec-format.md,
/// "Placeholders": "${units}" alone becomes the value with its type, inside a longer string its
/// text); `path` names the position in error messages. Throws InvalidArgument naming an
/// unknown placeholder and the known hyperparameters, or a non-object `hyper_parameters`.
Json substitute_placeholders(const Json& spec, const Json& hyper_parameters,
                             const std::string& path = "spec");

/// Substitutes placeholders in `spec` and validates it: sections, field names and types,
/// callbacks, and the model config (Model::from_config). Throws InvalidArgument naming the
/// field and the allowed values.
TrainSpec parse_train_spec(const Json& spec, const Json& hyper_parameters);

/// Runs a parsed spec: loads the data from `hub` (NotFound for a missing dataset, tensor or
/// initial model), builds the model (or loads initial_model), adds the callbacks, fits,
/// evaluates the test data, saves the model, and returns the results: the last epoch's logs
/// (loss; accuracy unless the loss is mse; val_loss and val_accuracy with validation data; "lr"
/// only when the spec has a ReduceLROnPlateau callback, since fit itself does not log the
/// learning rate), test_loss and test_accuracy (with test data), "epochs" (epochs completed,
/// counting those of an initial model), "model_id" (when saved) and "history" (a list of
/// per-epoch logs, each with its 0-based "epoch").
/// Throws what Model::fit and the hub throw.
Json run_train_spec(const TrainSpec& spec, Hub& hub, const TrainSpecContext& context = {});

// ---- Editing a spec ----------------------------------------------------------------------------
// Typed edits of an unparsed spec (JSON), for programs that generate tasks from one spec, such
// as the tuner (tune/tuner.cpp). They live here, next to the parser, so that a change of the
// spec's format changes them too. Inline: tune/ uses them without linking train/'s libtorch.

namespace detail {
/// spec[section], made an object if absent or not one.
inline Json& spec_section(Json& spec, const char* name) {
  if (!spec.contains(name) || !spec[name].is_object()) spec[name] = Json::object();
  return spec[name];
}
}  // namespace detail

/// Sets fit.epochs (the epoch to stop at, counted from the start of training).
inline void set_epochs(Json& spec, std::int64_t epochs) { detail::spec_section(spec, "fit")["epochs"] = epochs; }

/// Sets fit.initial_epoch (the epoch training starts at, e.g. a Hyperband trial's parent's).
inline void set_initial_epoch(Json& spec, std::int64_t epoch) {
  detail::spec_section(spec, "fit")["initial_epoch"] = epoch;
}

/// Makes training start from hub model `model_id`: initial_model = {"model_id": id}, replacing
/// any initial_model query.
inline void set_initial_model(Json& spec, std::int64_t model_id) {
  spec["initial_model"] = {{"model_id", model_id}};
}

/// Sets save_model.tags[key] = value, making save_model an object if it is absent or a boolean.
inline void set_save_model_tag(Json& spec, const std::string& key, const Json& value) {
  detail::spec_section(detail::spec_section(spec, "save_model"), "tags")[key] = value;
}

/// Sets save_model.monitor and .mode (the saved model is the best epoch's by that metric)
/// unless save_model names a monitor already; makes save_model an object as set_save_model_tag.
inline void set_save_model_monitor(Json& spec, const std::string& monitor, const std::string& mode) {
  Json& save = detail::spec_section(spec, "save_model");
  if (save.contains("monitor")) return;
  save["monitor"] = monitor;
  save["mode"] = mode;
}

/// Sets trial_id on every TensorBoard callback that has none (TensorBoard's HPARAMS tab names
/// each session by it).
inline void set_tensorboard_trial_id(Json& spec, const std::string& trial_id) {
  if (!spec.contains("callbacks") || !spec["callbacks"].is_array()) return;
  for (auto& cb : spec["callbacks"])
    if (cb.is_object() && cb.value("type", "") == "TensorBoard" && !cb.contains("trial_id"))
      cb["trial_id"] = trial_id;
}

}  // namespace tensorhub
