// Spec tasks: parse, substitute, validate and run a declarative training job (spec.h).
#include "tensorhub/train/spec.h"

#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "tensorhub/core/config_object.h"
#include "tensorhub/core/error.h"
#include "tensorhub/core/named_tensors.h"
#include "tensorhub/data/dataset.h"
#include "tensorhub/store/hub.h"
#include "tensorhub/train/callbacks.h"
#include "tensorhub/train/model.h"

namespace tensorhub {
namespace {

// "auto", "min" or "max" as a Mode; nullopt for anything else.
std::optional<Mode> mode_of(const std::string& m) {
  if (m == "auto") return Mode::kAuto;
  if (m == "min") return Mode::kMin;
  if (m == "max") return Mode::kMax;
  return std::nullopt;
}

// Callback "mode": auto, min or max.
Mode read_mode(const ConfigObject& s, const std::string& key) {
  const std::string m = s.string(key, "auto");
  if (const auto mode = mode_of(m)) return *mode;
  throw InvalidArgument(s.name(key) + " is \"" + m + "\"; allowed: auto, min, max");
}

// "epoch" -> 0, "batch" -> 1 (when allowed), or a positive number of batches.
std::int64_t read_frequency(const ConfigObject& s, const std::string& key, bool batch_allowed) {
  if (!s.has(key)) return 0;
  const Json& v = s.at(key);
  if (v.is_string()) {
    if (v == "epoch") return 0;
    if (v == "batch" && batch_allowed) return 1;
  } else if (v.is_number_integer() && v.get<std::int64_t>() >= 1) {
    return v.get<std::int64_t>();
  }
  throw InvalidArgument(s.name(key) + " must be \"epoch\"" + (batch_allowed ? ", \"batch\"" : "") +
                        " or a positive number of batches, got " + v.dump());
}

TensorNames tensor_names(const Json& j, const std::string& where) {
  ConfigObject s(j, where, {"x", "y"});
  return {s.string("x", "", true), s.string("y", "", true)};
}

// A task's hyperparameters as TensorBoard hparams: numbers, booleans and strings as they are,
// lists and objects as their JSON text (the plugin has no nested values), nulls left out.
Json tensorboard_hparams(const Json& hyper_parameters) {
  Json out = Json::object();
  for (const auto& [k, v] : hyper_parameters.items()) {
    if (v.is_null()) continue;
    out[k] = v.is_number() || v.is_boolean() || v.is_string() ? v : Json(v.dump());
  }
  return out;
}

// The callbacks a spec may name, one builder each: with `build` false they only validate
// (nothing is created: constructors of file-writing callbacks must not run at parse time).
struct CallbackSource {
  const Json& json;
  const std::string& where;
  Hub* hub;  // nullptr: validate only
  std::int64_t task_id;
  const Json& hyper_parameters;
  bool build() const { return hub != nullptr; }
};

std::shared_ptr<Callback> early_stopping(const CallbackSource& c) {
  ConfigObject s(c.json, c.where, {"type", "monitor", "min_delta", "patience", "verbose", "mode", "baseline",
                                   "restore_best_weights", "start_from_epoch"});
  EarlyStoppingOptions o;
  o.monitor = s.string("monitor", o.monitor);
  o.min_delta = s.number("min_delta", o.min_delta);
  o.patience = static_cast<int>(s.integer("patience", o.patience, 0, 1 << 30));
  o.verbose = static_cast<int>(s.integer("verbose", o.verbose, 0, 2));
  o.mode = read_mode(s, "mode");
  if (s.has("baseline")) o.baseline = s.number("baseline", 0);
  o.restore_best_weights = s.boolean("restore_best_weights", o.restore_best_weights);
  o.start_from_epoch = static_cast<int>(s.integer("start_from_epoch", o.start_from_epoch, 0, 1 << 30));
  return c.build() ? std::make_shared<EarlyStopping>(o) : nullptr;
}

std::shared_ptr<Callback> reduce_lr_on_plateau(const CallbackSource& c) {
  ConfigObject s(c.json, c.where, {"type", "monitor", "factor", "patience", "verbose", "mode", "min_delta",
                                   "cooldown", "min_lr"});
  ReduceLROnPlateauOptions o;
  o.monitor = s.string("monitor", o.monitor);
  o.factor = s.number("factor", o.factor);
  if (o.factor >= 1.0) throw InvalidArgument(s.name("factor") + " must be < 1 (Keras's rule), got " + std::to_string(o.factor));
  o.patience = static_cast<int>(s.integer("patience", o.patience, 0, 1 << 30));
  o.verbose = static_cast<int>(s.integer("verbose", o.verbose, 0, 2));
  o.mode = read_mode(s, "mode");
  o.min_delta = s.number("min_delta", o.min_delta);
  o.cooldown = static_cast<int>(s.integer("cooldown", o.cooldown, 0, 1 << 30));
  o.min_lr = s.number("min_lr", o.min_lr);
  return c.build() ? std::make_shared<ReduceLROnPlateau>(o) : nullptr;
}

std::shared_ptr<Callback> model_checkpoint(const CallbackSource& c) {
  ConfigObject s(c.json, c.where, {"type", "filepath", "monitor", "verbose", "save_best_only", "save_weights_only",
                                   "mode", "save_freq", "initial_value_threshold"});
  ModelCheckpointOptions o;
  o.filepath = s.string("filepath", "", true);
  o.monitor = s.string("monitor", o.monitor);
  o.verbose = static_cast<int>(s.integer("verbose", o.verbose, 0, 2));
  o.save_best_only = s.boolean("save_best_only", o.save_best_only);
  o.save_weights_only = s.boolean("save_weights_only", o.save_weights_only);
  o.mode = read_mode(s, "mode");
  o.save_freq = read_frequency(s, "save_freq", false);
  if (s.has("initial_value_threshold")) o.initial_value_threshold = s.number("initial_value_threshold", 0);
  return c.build() ? std::make_shared<ModelCheckpoint>(o) : nullptr;
}

std::shared_ptr<Callback> backup_and_restore(const CallbackSource& c) {
  ConfigObject s(c.json, c.where, {"type", "backup_dir", "delete_checkpoint"});
  const std::string dir = s.string("backup_dir", "", true);
  const bool del = s.boolean("delete_checkpoint", true);
  return c.build() ? std::make_shared<BackupAndRestore>(dir, del) : nullptr;
}

std::shared_ptr<Callback> csv_logger(const CallbackSource& c) {
  ConfigObject s(c.json, c.where, {"type", "filename", "separator", "append"});
  const std::string filename = s.string("filename", "", true);
  const std::string sep = s.string("separator", ",");
  if (sep.size() != 1) throw InvalidArgument(s.name("separator") + " must be one character, got \"" + sep + "\"");
  const bool append = s.boolean("append", false);
  return c.build() ? std::make_shared<CSVLogger>(filename, sep[0], append) : nullptr;
}

std::shared_ptr<Callback> tensorboard(const CallbackSource& c) {
  ConfigObject s(c.json, c.where,
                 {"type", "log_dir", "histogram_freq", "update_freq", "hparams", "trial_id", "write_graph",
                  "embeddings_freq", "embeddings_metadata"});
  TensorBoardOptions o;
  o.log_dir = s.string("log_dir", o.log_dir);
  o.histogram_freq = static_cast<int>(s.integer("histogram_freq", o.histogram_freq, 0, 1 << 30));
  o.write_graph = s.boolean("write_graph", o.write_graph);
  o.embeddings_freq = static_cast<int>(s.integer("embeddings_freq", o.embeddings_freq, 0, 1 << 30));
  if (s.has("embeddings_metadata")) {
    o.embeddings_metadata = s.at("embeddings_metadata");
    try {
      TensorBoard check(o);  // validates its shape (writes nothing before on_train_begin)
    } catch (const Error& e) {
      throw InvalidArgument(s.name("embeddings_metadata") + ": " + e.message());
    }
  }
  o.update_freq = read_frequency(s, "update_freq", true);
  o.trial_id = s.string("trial_id", "");
  if (!s.has("hparams")) {
    o.hparams = tensorboard_hparams(c.hyper_parameters);
  } else if (s.at("hparams").is_boolean()) {
    if (s.at("hparams") == true) o.hparams = tensorboard_hparams(c.hyper_parameters);
  } else {
    o.hparams = s.object("hparams");
    try {
      TensorBoard check(o);  // validates the values (writes nothing before on_train_begin)
    } catch (const Error& e) {
      throw InvalidArgument(s.name("hparams") + ": " + e.message());
    }
  }
  return c.build() ? std::make_shared<TensorBoard>(o) : nullptr;
}

std::shared_ptr<Callback> terminate_on_nan(const CallbackSource& c) {
  ConfigObject s(c.json, c.where, {"type"});
  return c.build() ? std::make_shared<TerminateOnNaN>() : nullptr;
}

std::shared_ptr<Callback> hub_logger(const CallbackSource& c) {
  ConfigObject s(c.json, c.where, {"type", "tags"});
  Json tags = s.object("tags");
  if (c.task_id != 0) tags["task_id"] = c.task_id;
  return c.build() ? std::make_shared<HubLogger>(*c.hub, tags) : nullptr;
}

// Builds one callback from its JSON object, or with hub == nullptr only validates it.
std::shared_ptr<Callback> make_callback(const Json& j, const std::string& where, Hub* hub,
                                        std::int64_t task_id, const Json& hyper_parameters) {
  if (!j.is_object() || !j.contains("type") || !j.at("type").is_string())
    throw InvalidArgument(where + " must be an object with a string \"type\", got " + j.dump());
  using Builder = std::shared_ptr<Callback> (*)(const CallbackSource&);
  static const std::map<std::string, Builder> builders = {
      {"EarlyStopping", early_stopping}, {"ReduceLROnPlateau", reduce_lr_on_plateau},
      {"ModelCheckpoint", model_checkpoint}, {"BackupAndRestore", backup_and_restore},
      {"CSVLogger", csv_logger}, {"TensorBoard", tensorboard},
      {"TerminateOnNaN", terminate_on_nan}, {"HubLogger", hub_logger}};
  const std::string type = j.at("type").get<std::string>();
  const auto it = builders.find(type);
  if (it == builders.end())
    throw InvalidArgument(where + ".type is \"" + type +
                          "\"; allowed: EarlyStopping, ReduceLROnPlateau, ModelCheckpoint, BackupAndRestore, "
                          "CSVLogger, TensorBoard, TerminateOnNaN, HubLogger (LearningRateScheduler takes a "
                          "function: write a command task for it)");
  return it->second(CallbackSource{j, where, hub, task_id, hyper_parameters});
}

// "${name}" occurrences of one string.
Json substitute_string(const std::string& s, const Json& hp, const std::string& path) {
  auto lookup = [&](const std::string& name) -> const Json& {
    if (!hp.contains(name)) {
      std::vector<std::string> known;
      for (const auto& [k, v] : hp.items()) known.push_back(k);
      throw InvalidArgument(path + ": unknown placeholder ${" + name + "}; known hyperparameters: " +
                            (known.empty() ? "(none)" : join_names(known)));
    }
    return hp.at(name);
  };
  if (s.size() > 3 && s.starts_with("${") && s.back() == '}' && s.find('}') == s.size() - 1)
    return lookup(s.substr(2, s.size() - 3));  // the whole string: keep the value's type
  std::string out;
  std::size_t i = 0;
  while (true) {
    const std::size_t open = s.find("${", i);
    if (open == std::string::npos) break;
    const std::size_t close = s.find('}', open + 2);
    if (close == std::string::npos) break;
    const Json& v = lookup(s.substr(open + 2, close - open - 2));
    out += s.substr(i, open - i) + (v.is_string() ? v.get<std::string>() : v.dump());
    i = close + 1;
  }
  return out + s.substr(i);
}

// Converts inputs to F32 and labels to I64 (what Model::fit takes), element by element.
template <typename From, typename To>
Tensor convert(const Tensor& t, DType to) {
  Tensor out;
  out.dtype = to;
  out.shape = t.shape;
  out.data.resize(static_cast<std::size_t>(t.numel()) * sizeof(To));
  const From* src = t.as<From>();
  To* dst = out.as<To>();
  for (std::int64_t i = 0; i < t.numel(); ++i) dst[i] = static_cast<To>(src[i]);
  return out;
}

template <typename To>
Tensor convert_to(const Tensor& t, DType to) {
  switch (t.dtype) {
    case DType::kF32: return convert<float, To>(t, to);
    case DType::kF64: return convert<double, To>(t, to);
    case DType::kI64: return convert<std::int64_t, To>(t, to);
    case DType::kI32: return convert<std::int32_t, To>(t, to);
    case DType::kU8: return convert<std::uint8_t, To>(t, to);
    case DType::kI8: return convert<std::int8_t, To>(t, to);
    case DType::kBool: return convert<std::uint8_t, To>(t, to);
  }
  throw Internal("unknown dtype");
}

const Tensor& tensor_of(const NamedTensors& tensors, const std::string& name, const DataSpec& data) {
  auto it = tensors.find(name);
  if (it == tensors.end()) {
    std::vector<std::string> names;
    for (const auto& [k, v] : tensors) names.push_back(k);
    throw NotFound("dataset \"" + data.dataset + "\" has no tensor \"" + name + "\"; it has: " + join_names(names));
  }
  return it->second;
}

Tensor inputs(const NamedTensors& tensors, const std::string& name, const DataSpec& data) {
  const Tensor& t = tensor_of(tensors, name, data);
  return t.dtype == DType::kF32 ? t : convert_to<float>(t, DType::kF32);
}

Tensor labels(const NamedTensors& tensors, const std::string& name, const DataSpec& data) {
  const Tensor& t = tensor_of(tensors, name, data);
  if (t.dtype == DType::kI64) return t;
  if (t.dtype == DType::kF32 || t.dtype == DType::kF64)
    throw InvalidArgument("dataset \"" + data.dataset + "\" tensor \"" + name + "\" holds " + dtype_name(t.dtype) +
                          " labels; class labels must be integers (I64, I32, U8, ...)");
  return convert_to<std::int64_t>(t, DType::kI64);
}

Json logs_json(const Logs& logs) {
  Json j = Json::object();
  for (const auto& [k, v] : logs) j[k] = std::isfinite(v) ? Json(v) : Json(nullptr);
  return j;
}

std::vector<std::byte> bytes_of(const std::string& text) {
  const auto* p = reinterpret_cast<const std::byte*>(text.data());
  return {p, p + text.size()};
}

Document find_initial_model(const InitialModelSpec& im, Hub& hub) {
  if (im.model_id > 0) {
    auto docs = hub.find_models({{"id", im.model_id}}, {}, 1);
    if (docs.empty()) throw NotFound("initial_model: no model with id " + std::to_string(im.model_id) + " in project \"" + hub.project_name() + "\"");
    return docs[0];
  }
  auto docs = hub.find_models(with_name(im.filter, "model_name", im.model_name), im.sort, 1);
  if (docs.empty())
    throw NotFound("initial_model: no model named \"" + im.model_name + "\" matches " + im.filter.dump() +
                   " in project \"" + hub.project_name() + "\"");
  return docs[0];
}

// The spec's model, or the initial model with its weights and (if saved) optimizer state.
Model build_model(const TrainSpec& spec, Hub& hub, std::int64_t* initial_model_id) {
  if (!spec.initial_model) return Model::from_config(spec.model);
  const Document doc = find_initial_model(*spec.initial_model, hub);
  *initial_model_id = doc.id;
  ModelRecord record = hub.load_model(doc);
  Model model = Model::from_config(spec.model.is_null() ? record.architecture : spec.model);
  const auto optimizer = hub.load_model_part(doc, "optimizer.safetensors");
  const auto state = hub.load_model_part(doc, "state.json");
  if (!optimizer || !state) {
    model.set_weights(record.weights);  // saved without training state: weights only
    return model;
  }
  const ModelParts parts{{"model.json", bytes_of(record.architecture.dump())},
                         {"weights.safetensors", to_safetensors(record.weights)},
                         {"optimizer.safetensors", *optimizer},
                         {"state.json", *state}};
  model.load_state(parts, "initial_model (model " + std::to_string(doc.id) + ")");
  return model;
}

// Saves the model with its optimizer state (Model::save's optimizer.safetensors, state.json).
std::int64_t save(const Model& model, const TrainSpec& spec, const Json& tags, Hub& hub) {
  std::string name = spec.save_model.model_name;
  if (name.empty()) {
    const Json& c = model.config();
    name = c.contains("name") && c.at("name").is_string() ? c.at("name").get<std::string>() : "model";
  }
  ModelParts parts = model.to_parts();
  const Parts extra{{"optimizer.safetensors", std::move(parts.at("optimizer.safetensors"))},
                    {"state.json", std::move(parts.at("state.json"))}};
  return hub.save_model(model.config(), model.weights(), name, tags, extra);
}

// The best epoch by save_model.monitor: its state (weights, optimizer, counters) and logs,
// kept in memory as training goes (Keras's ModelCheckpoint(save_best_only=True) in memory).
struct BestEpoch {
  std::string monitor;
  Mode mode = Mode::kAuto;
  std::optional<double> value;
  int epoch = -1;  // 0-based index in this fit's history
  ModelParts parts;
  Logs logs;
  int trained_to = 0;  // the model's epoch count when training ended
};

// A callback filling `best` from each epoch's logs: strictly better values win (the first of
// equal ones stays, as Keras's save_best_only).
std::shared_ptr<Callback> best_epoch_keeper(const std::shared_ptr<BestEpoch>& best, Model& model) {
  auto keep = std::make_shared<LambdaCallback>();
  int seen = 0;
  keep->epoch_end = [best, &model, seen](int, Logs& logs) mutable {
    const int index = seen++;
    const auto v = logs.find(best->monitor);
    if (v == logs.end() || !std::isfinite(v->second)) return;
    const bool better = !best->value || (best->mode == Mode::kMax ? v->second > *best->value : v->second < *best->value);
    if (!better) return;
    best->value = v->second;
    best->epoch = index;
    best->parts = model.to_parts();
    best->logs = logs;
  };
  return keep;
}

// FitOptions of the spec: its fit section, its callbacks, and last a callback reporting each
// epoch's logs to `context`.
FitOptions fit_options(const TrainSpec& spec, Model& model, Hub& hub, const TrainSpecContext& context,
                       const std::shared_ptr<BestEpoch>& best) {
  FitOptions fit;
  fit.batch_size = spec.fit.batch_size;
  fit.epochs = spec.fit.epochs;
  fit.initial_epoch = spec.fit.initial_epoch.value_or(model.epochs_done());
  fit.shuffle = spec.fit.shuffle;
  fit.seed = spec.fit.seed;
  fit.verbose = spec.fit.verbose;
  fit.steps_per_epoch = spec.fit.steps_per_epoch;
  fit.validation_steps = spec.fit.validation_steps;
  for (std::size_t i = 0; i < spec.callbacks.size(); ++i)
    fit.callbacks.push_back(make_callback(spec.callbacks[i], "spec.callbacks[" + std::to_string(i) + "]", &hub,
                                          context.task_id, spec.hyper_parameters));
  if (best) fit.callbacks.push_back(best_epoch_keeper(best, model));
  // Last, so that the reported logs carry what the spec's callbacks added ("lr").
  auto report = std::make_shared<LambdaCallback>();
  report->epoch_end = [on_epoch_end = context.on_epoch_end](int epoch, Logs& logs) {
    if (on_epoch_end) on_epoch_end(epoch, logs_json(logs));
  };
  fit.callbacks.push_back(report);
  return fit;
}

// The model's "log_dir" tag: the first TensorBoard callback's log_dir as an absolute path,
// which links the saved model to its run for the dashboard's Graph view (src/ui/graph_api.h:
// the weight histograms over the epochs). A log_dir in save_model.tags is kept.
void tag_tensorboard_log_dir(const TrainSpec& spec, Json& tags) {
  if (tags.contains("log_dir")) return;
  for (const auto& cb : spec.callbacks)
    if (cb.value("type", "") == "TensorBoard") {
      const std::string dir = cb.value("log_dir", TensorBoardOptions{}.log_dir);
      tags["log_dir"] = std::filesystem::absolute(dir).lexically_normal().string();
      return;
    }
}

// The results run_train_spec returns (and saves the model with, when the spec saves it).
Json results_of(const TrainSpec& spec, const Model& model, const History& history,
                const std::optional<Evaluation>& tested, std::int64_t initial_model_id, Hub& hub,
                const TrainSpecContext& context, const BestEpoch* best) {
  Json results = Json::object();
  Json epochs = Json::array();
  // The epochs trained; with a best epoch restored the model's own count is that epoch's.
  const int trained_to = best ? best->trained_to : model.epochs_done();
  const int first = trained_to - static_cast<int>(history.epochs.size());
  for (std::size_t i = 0; i < history.epochs.size(); ++i) {
    Json e = logs_json(history.epochs[i]);
    e["epoch"] = first + static_cast<int>(i);
    epochs.push_back(e);
  }
  // The metrics of the model tested and saved: the best epoch's when one was restored.
  if (best) results = logs_json(best->logs);
  else if (!history.epochs.empty()) results = logs_json(history.epochs.back());
  if (tested) {
    results["test_loss"] = tested->loss;
    results["test_accuracy"] = tested->accuracy;
  }
  results["epochs"] = trained_to;
  if (best) results["best_epoch"] = first + best->epoch;
  if (initial_model_id) results["initial_model_id"] = initial_model_id;
  if (spec.save_model.enabled) {
    Json tags = spec.save_model.tags;
    for (const auto& [k, v] : results.items()) tags[k] = v;
    tags["hyper_parameters"] = spec.hyper_parameters;
    if (context.task_id) tags["task_id"] = context.task_id;
    tag_tensorboard_log_dir(spec, tags);
    results["model_id"] = save(model, spec, tags, hub);
  }
  results["history"] = epochs;
  return results;
}

}  // namespace

Json substitute_placeholders(const Json& spec, const Json& hyper_parameters, const std::string& path) {
  if (!hyper_parameters.is_object())
    throw InvalidArgument("hyper_parameters must be a JSON object, got " + hyper_parameters.dump());
  if (spec.is_string()) return substitute_string(spec.get<std::string>(), hyper_parameters, path);
  if (spec.is_object()) {
    Json out = Json::object();
    for (const auto& [k, v] : spec.items()) out[k] = substitute_placeholders(v, hyper_parameters, path + "." + k);
    return out;
  }
  if (spec.is_array()) {
    Json out = Json::array();
    for (std::size_t i = 0; i < spec.size(); ++i)
      out.push_back(substitute_placeholders(spec[i], hyper_parameters, path + "[" + std::to_string(i) + "]"));
    return out;
  }
  return spec;
}

namespace {

InitialModelSpec parse_initial_model(const Json& raw) {
  const ConfigObject s(raw, "spec.initial_model", {"model_id", "model_name", "filter", "sort"});
  InitialModelSpec im;
  im.model_id = s.integer("model_id", 0, 1);
  im.model_name = s.string("model_name", "");
  if ((im.model_id > 0) == !im.model_name.empty())
    throw InvalidArgument("spec.initial_model needs either model_id or model_name (with optional filter and sort)");
  if (im.model_id > 0 && (s.has("filter") || s.has("sort")))
    throw InvalidArgument("spec.initial_model: filter and sort go with model_name, not model_id");
  im.filter = s.object("filter");
  if (!s.has("sort")) return im;
  const Json& sort = s.at("sort");
  if (!sort.is_array()) throw InvalidArgument("spec.initial_model.sort must be a list like [[\"test_accuracy\", -1]]");
  for (const Json& key : sort) {
    if (!key.is_array() || key.size() != 2 || !key[0].is_string() || !key[1].is_number_integer() ||
        (key[1] != 1 && key[1] != -1))
      throw InvalidArgument("spec.initial_model.sort entry " + key.dump() +
                            " must be [\"field\", 1 or -1], e.g. [\"test_accuracy\", -1]");
    im.sort.emplace_back(key[0].get<std::string>(), key[1].get<int>());
  }
  return im;
}

// The data section: pipelines ({"train": ..., "validation": ..., "test": ...}) or a hub
// dataset of tensors ({"dataset": ..., "x": ..., "y": ...}).
DataSpec parse_data(const Json& raw) {
  DataSpec data;
  if (raw.is_object() && raw.contains("train")) {
    const ConfigObject s(raw, "spec.data", {"train", "validation", "test"});
    data.train_pipeline = parse_pipeline_spec(s.at("train"), "spec.data.train");
    if (s.has("validation")) data.validation_pipeline = parse_pipeline_spec(s.at("validation"), "spec.data.validation");
    if (s.has("test")) data.test_pipeline = parse_pipeline_spec(s.at("test"), "spec.data.test");
    return data;
  }
  const ConfigObject s(raw, "spec.data", {"dataset", "filter", "x", "y", "validation", "test"});
  data.dataset = s.string("dataset", "", true);
  data.filter = s.object("filter");
  data.train = {s.string("x", "X_train"), s.string("y", "y_train")};
  if (s.has("validation")) data.validation = tensor_names(s.at("validation"), "spec.data.validation");
  if (s.has("test")) data.test = tensor_names(s.at("test"), "spec.data.test");
  return data;
}

// The fit section over `fit`'s defaults; steps_per_epoch and validation_steps need pipelines.
void parse_fit(const Json& raw, bool pipelines, FitSpec& fit) {
  const ConfigObject s(raw, "spec.fit",
                       {"batch_size", "epochs", "initial_epoch", "shuffle", "seed", "verbose", "steps_per_epoch",
                        "validation_steps"});
  fit.batch_size = s.integer("batch_size", fit.batch_size, 1);
  fit.epochs = static_cast<int>(s.integer("epochs", fit.epochs, 0, 1 << 30));
  if (s.has("initial_epoch")) fit.initial_epoch = static_cast<int>(s.integer("initial_epoch", 0, 0, 1 << 30));
  fit.shuffle = s.boolean("shuffle", fit.shuffle);
  fit.seed = static_cast<std::uint64_t>(s.integer("seed", 0, 0));
  fit.verbose = static_cast<int>(s.integer("verbose", fit.verbose, 0, 2));
  fit.steps_per_epoch = s.integer("steps_per_epoch", 0, 0);
  fit.validation_steps = s.integer("validation_steps", 0, 0);
  for (const char* key : {"steps_per_epoch", "validation_steps"})
    if (s.has(key) && !pipelines)
      throw InvalidArgument(s.name(key) + " goes with pipelines (spec.data.train); a dataset of tensors is one "
                            "whole pass per epoch");
}

void parse_save_model(const Json& raw, SaveModelSpec& save_model) {
  if (raw.is_boolean()) {
    save_model.enabled = raw.get<bool>();
    return;
  }
  const ConfigObject s(raw, "spec.save_model", {"model_name", "tags", "monitor", "mode"});
  save_model.model_name = s.string("model_name", "");
  save_model.tags = s.object("tags");
  save_model.monitor = s.string("monitor", "");
  read_mode(s, "mode");  // checked here; kept as text
  save_model.mode = s.string("mode", "auto");
}

}  // namespace

TrainSpec parse_train_spec(const Json& raw, const Json& hyper_parameters) {
  TrainSpec spec;
  spec.hyper_parameters = hyper_parameters.is_null() ? Json::object() : hyper_parameters;
  spec.substituted = substitute_placeholders(raw, spec.hyper_parameters);
  const ConfigObject top(spec.substituted, "spec", {"model", "data", "fit", "callbacks", "initial_model", "save_model"});

  if (top.has("initial_model")) spec.initial_model = parse_initial_model(top.at("initial_model"));
  if (top.has("model")) {
    spec.model = top.at("model");
    try {
      Model::from_config(spec.model);  // validates layers, optimizer, loss
    } catch (const Error& e) {
      throw Error(e.kind(), "spec.model: " + e.message());
    }
  } else if (!spec.initial_model) {
    throw InvalidArgument("spec.model is required (a model.json config) unless initial_model is given");
  }
  if (!top.has("data")) throw InvalidArgument("spec.data is required, e.g. {\"dataset\": \"fashion_mnist\"}");
  spec.data = parse_data(top.at("data"));
  if (top.has("fit")) parse_fit(top.at("fit"), spec.data.train_pipeline.has_value(), spec.fit);
  if (top.has("callbacks")) {
    const Json& cbs = top.at("callbacks");
    if (!cbs.is_array()) throw InvalidArgument("spec.callbacks must be a list of {\"type\": ...} objects");
    for (std::size_t i = 0; i < cbs.size(); ++i)
      make_callback(cbs[i], "spec.callbacks[" + std::to_string(i) + "]", nullptr, 0, spec.hyper_parameters);
    spec.callbacks = cbs;
  }
  if (top.has("save_model")) parse_save_model(top.at("save_model"), spec.save_model);
  return spec;
}

Json run_train_spec(const TrainSpec& spec, Hub& hub, const TrainSpecContext& context) {
  const DataSpec& data = spec.data;
  std::optional<NamedTensors> tensors;  // a dataset of tensors, loaded whole
  std::optional<Dataset> train, validation, test;  // or pipelines
  if (data.train_pipeline) {
    train = make_pipeline(*data.train_pipeline, hub, spec.fit.batch_size);
    if (data.validation_pipeline) validation = make_pipeline(*data.validation_pipeline, hub, spec.fit.batch_size);
    if (data.test_pipeline) test = make_pipeline(*data.test_pipeline, hub, spec.fit.batch_size);
  } else {
    auto record = hub.find_top_dataset(data.dataset, data.filter);
    if (!record)
      throw NotFound("no dataset named \"" + data.dataset + "\" matches " + data.filter.dump() + " in project \"" +
                     hub.project_name() + "\"; " +
                     (context.missing_dataset_advice ? context.missing_dataset_advice(data.dataset)
                                                     : "save one with Hub::save_dataset"));
    tensors = std::move(record->tensors);
  }

  std::int64_t initial_model_id = 0;
  Model model = build_model(spec, hub, &initial_model_id);
  auto best = spec.save_model.monitor.empty() ? nullptr : std::make_shared<BestEpoch>();
  if (best) {
    best->monitor = spec.save_model.monitor;
    best->mode = resolve_mode(mode_of(spec.save_model.mode).value_or(Mode::kAuto), best->monitor);
  }
  const FitOptions fit = fit_options(spec, model, hub, context, best);

  History history;
  std::optional<Evaluation> tested;
  // With save_model.monitor, the best epoch's state replaces the last before testing and saving.
  auto restore_best = [&] {
    if (!best) return;
    best->trained_to = model.epochs_done();
    if (!best->value) {  // no epoch logged the monitor: keep the last, and say so in the results
      best.reset();
      return;
    }
    if (best->epoch + 1 != static_cast<int>(history.epochs.size())) model.load_state(best->parts, "the best epoch");
  };
  if (train) {
    history = model.fit(*train, fit, validation ? &*validation : nullptr);
    restore_best();
    if (test) tested = model.evaluate(*test);
  } else {
    const Tensor x = inputs(*tensors, data.train.x, data), y = labels(*tensors, data.train.y, data);
    std::optional<Tensor> x_val, y_val;
    if (data.validation) {
      x_val = inputs(*tensors, data.validation->x, data);
      y_val = labels(*tensors, data.validation->y, data);
    }
    history = model.fit(x, y, fit, x_val ? &*x_val : nullptr, y_val ? &*y_val : nullptr);
    restore_best();
    if (data.test)
      tested = model.evaluate(inputs(*tensors, data.test->x, data), labels(*tensors, data.test->y, data),
                              std::max<std::int64_t>(spec.fit.batch_size, 1024));
  }
  return results_of(spec, model, history, tested, initial_model_id, hub, context, best.get());
}

}  // namespace tensorhub
