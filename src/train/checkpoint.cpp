// The saved-model directory with optimizer state (Model::save / load / load_state), the
// learning-rate and stop_training accessors, and the callbacks that write it: ModelCheckpoint
// and BackupAndRestore; format_filepath (checkpoint names from Python format strings, by fmt).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <unistd.h>

#include <fmt/args.h>
#include <fmt/format.h>

#include "model_impl.h"
#include "tensorhub/core/error.h"
#include "tensorhub/core/log.h"
#include "tensorhub/train/checkpoint.h"

namespace tensorhub {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

torch::Tensor from_tensor(const Tensor& t, const std::string& what) {
  if (t.dtype != DType::kF32) throw DataLoss(what + " is not F32");
  if (t.data.size() != static_cast<std::size_t>(t.numel()) * sizeof(float))
    throw DataLoss(what + ": size does not match its shape");
  return torch::from_blob(const_cast<std::byte*>(t.data.data()), t.shape, torch::kFloat).clone();
}

// A saved model's files, in the order save() writes them.
const char* const kPartNames[] = {"model.json", "weights.safetensors", "optimizer.safetensors",
                                  "state.json"};

std::vector<std::byte> text_bytes(const std::string& text) {
  std::vector<std::byte> bytes(text.size());
  std::memcpy(bytes.data(), text.data(), text.size());
  return bytes;
}

// parts[name], or DataLoss naming "<source>/<name>".
const std::vector<std::byte>& part(const ModelParts& parts, const std::string& name,
                                   const std::string& source) {
  auto it = parts.find(name);
  if (it == parts.end()) throw DataLoss((fs::path(source) / name).string() + " is missing");
  return it->second;
}

json part_json(const ModelParts& parts, const std::string& name, const std::string& source) {
  const std::vector<std::byte>& bytes = part(parts, name, source);
  std::string text(bytes.size(), '\0');
  std::memcpy(text.data(), bytes.data(), bytes.size());
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw DataLoss((fs::path(source) / name).string() + " is not valid JSON: " + e.what());
  }
}

NamedTensors part_tensors(const ModelParts& parts, const std::string& name, const std::string& source) {
  return from_safetensors(part(parts, name, source), (fs::path(source) / name).string());
}

// A saved model directory's files. Throws Unavailable naming a file that cannot be read.
ModelParts read_parts(const fs::path& dir) {
  ModelParts parts;
  for (const char* name : kPartNames) parts[name] = read_file_bytes(dir / name);
  return parts;
}

std::string optimizer_type(const json& config) {
  if (!config.contains("optimizer")) return "adam";
  const json& o = config.at("optimizer");
  std::string t = o.is_string() ? o.get<std::string>()
                  : (o.is_object() && o.contains("type") && o.at("type").is_string())
                      ? o.at("type").get<std::string>()
                      : "";
  for (char& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return t;
}

void make_dirs(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Unavailable("cannot create directory " + dir.string() + ": " + ec.message());
}

}  // namespace

// Keras 2.x's improvement test (min_delta >= 0): current - d > best (max), current + d < best (min).
bool improves(Mode mode, double current, double reference, double min_delta) {
  return mode == Mode::kMax ? current - min_delta > reference : current + min_delta < reference;
}

// ---- Model accessors -------------------------------------------------------------------------

double Model::learning_rate() const { return impl_->optimizer->learning_rate(); }

void Model::set_learning_rate(double lr) {
  if (!std::isfinite(lr) || lr <= 0)
    throw InvalidArgument("learning rate " + std::to_string(lr) + " must be positive and finite");
  impl_->optimizer->set_learning_rate(lr);
}

bool Model::stop_training() const { return impl_->stop_training; }
void Model::set_stop_training(bool stop) { impl_->stop_training = stop; }
int Model::epochs_done() const { return impl_->epochs_done; }
std::int64_t Model::steps_done() const { return impl_->iterations; }
void Model::set_resume_epoch(int epoch) { impl_->resume_epoch = epoch; }

// ---- save / load ------------------------------------------------------------------------------

ModelParts Model::to_parts() const {
  NamedTensors opt;
  try {
    const auto named = impl_->net->named_parameters(/*recurse=*/true);
    for (std::size_t i = 0; i < named.size(); ++i)
      for (const auto& [slot, t] : impl_->optimizer->slots(i))
        opt.emplace(named[i].key() + "." + slot, detail::f32_tensor_of(t));
  } catch (const c10::Error& e) {
    detail::rethrow_torch_error("Model::save", e);
  }
  const json state = {{"epoch", impl_->epochs_done},
                      {"step", impl_->iterations},
                      {"learning_rate", learning_rate()}};
  return {{"model.json", text_bytes(impl_->config.dump(2) + "\n")},
          {"weights.safetensors", to_safetensors(weights())},
          {"optimizer.safetensors", to_safetensors(opt, {{"optimizer", optimizer_type(impl_->config)}})},
          {"state.json", text_bytes(state.dump(2) + "\n")}};
}

void Model::save(const std::string& dir_name) const {
  const fs::path dir(dir_name);
  make_dirs(dir);
  const ModelParts parts = to_parts();
  for (const char* name : kPartNames) write_file_bytes(dir / name, parts.at(name));
}

void Model::set_weights(const NamedTensors& weights) {
  const Model checked = from_parts(impl_->config, weights);  // validates names and shapes
  try {
    torch::NoGradGuard no_grad;
    auto params = impl_->net->named_parameters(true);
    auto buffers = impl_->net->named_buffers(true);
    for (const auto& [name, w] : weights) {
      torch::Tensor* t = params.find(name);
      if (!t) t = buffers.find(name);
      if (t && t->numel()) t->copy_(from_tensor(w, name));
    }
  } catch (const c10::Error& e) {
    detail::rethrow_torch_error("Model::set_weights", e);
  }
}

Model Model::load(const std::string& dir) { return from_parts(read_parts(dir), dir); }

Model Model::from_parts(const ModelParts& parts, const std::string& source) {
  Model model = from_config(part_json(parts, "model.json", source));
  model.load_state(parts, source);
  return model;
}

void Model::load_state(const std::string& dir) { load_state(read_parts(dir), dir); }

void Model::load_state(const ModelParts& parts, const std::string& source) {
  const fs::path dir(source);
  const json saved = part_json(parts, "model.json", source);
  const json& mine = impl_->config;
  auto field = [](const json& c, const char* k) { return c.contains(k) ? c.at(k) : json(); };
  if (field(saved, "layers") != field(mine, "layers") ||
      field(saved, "input_shape") != field(mine, "input_shape"))
    throw InvalidArgument("checkpoint " + dir.string() +
                          " is of another architecture: its layers " +
                          field(saved, "layers").dump() + " with input_shape " +
                          field(saved, "input_shape").dump() + " differ from this model's " +
                          field(mine, "layers").dump() + " with input_shape " +
                          field(mine, "input_shape").dump());
  if (optimizer_type(saved) != optimizer_type(mine))
    throw InvalidArgument("checkpoint " + dir.string() + " holds " + optimizer_type(saved) +
                          " optimizer state; this model uses " + optimizer_type(mine));
  set_weights(part_tensors(parts, "weights.safetensors", source));
  const NamedTensors opt = part_tensors(parts, "optimizer.safetensors", source);
  const json state = part_json(parts, "state.json", source);
  try {
    torch::NoGradGuard no_grad;
    auto named = impl_->net->named_parameters(true);
    std::map<std::string, std::size_t> index;
    for (std::size_t i = 0; i < named.size(); ++i) index[named[i].key()] = i;
    for (const auto& [key, t] : opt) {
      const auto dot = key.rfind('.');
      auto it = dot == std::string::npos ? index.end() : index.find(key.substr(0, dot));
      if (it == index.end())
        throw InvalidArgument("checkpoint " + dir.string() + ": optimizer state " + key +
                              " belongs to no parameter of this model");
      torch::Tensor v = from_tensor(t, key);
      if (!v.sizes().equals(named[it->second].value().sizes()))
        throw InvalidArgument("checkpoint " + dir.string() + ": optimizer state " + key +
                              " does not have its parameter's shape");
      impl_->optimizer->set_slot(it->second, key.substr(dot + 1), v);
    }
  } catch (const c10::Error& e) {
    detail::rethrow_torch_error("Model::load_state", e);
  }
  try {
    impl_->epochs_done = state.at("epoch").get<int>();
    impl_->iterations = state.at("step").get<std::int64_t>();
    impl_->optimizer->set_iterations(impl_->iterations);
    impl_->optimizer->set_learning_rate(state.at("learning_rate").get<double>());
  } catch (const json::exception& e) {
    throw DataLoss((dir / "state.json").string() + ": " + e.what());
  }
}

// ---- format_filepath -----------------------------------------------------------------------------

namespace {

// One value of a filepath template. Its formatter keeps Keras's choices on top of fmt (which
// implements Python's format-spec grammar): a bare integral value prints as an integer, a bare
// fraction with 12 significant digits (close to Python's repr), and only the types d, f, e, E,
// g and G are accepted, d only for integral values.
struct FilepathValue {
  std::string name;
  double value;
};

}  // namespace
}  // namespace tensorhub

template <>
struct fmt::formatter<tensorhub::FilepathValue> {
  std::string spec;  // the text between ':' and '}'

  auto parse(format_parse_context& ctx) -> format_parse_context::iterator {
    auto it = ctx.begin();
    while (it != ctx.end() && *it != '}') ++it;
    spec.assign(ctx.begin(), it);
    const char type = spec.empty() ? '\0' : spec.back();
    if ((std::isalpha(static_cast<unsigned char>(type)) || type == '%') && !std::strchr("dfeEgG", type))
      throw format_error("format spec '" + spec + "' is not of the supported form [0][width][.precision][d|f|e|g]");
    return it;
  }

  auto format(const tensorhub::FilepathValue& v, format_context& ctx) const -> format_context::iterator {
    const bool integral = std::floor(v.value) == v.value && std::fabs(v.value) < 9e15;
    const char type = spec.empty() ? '\0' : spec.back();
    const bool has_type = std::strchr("dfeEgG", type) && type != '\0';
    const bool precision = spec.find('.') != std::string::npos;
    if (type == 'd' || (!has_type && integral && !precision)) {
      if (!integral || precision)
        throw format_error("{" + v.name + ":" + spec + "} needs an integer, " + v.name + " is " +
                           std::to_string(v.value));
      return fmt::format_to(ctx.out(), fmt::runtime("{:" + spec + "}"), static_cast<long long>(v.value));
    }
    const std::string full = has_type ? spec : spec.empty() ? ".12g" : spec + "g";
    return fmt::format_to(ctx.out(), fmt::runtime("{:" + full + "}"), v.value);
  }
};

namespace tensorhub {

std::string format_filepath(const std::string& pattern, const std::map<std::string, double>& values) {
  fmt::dynamic_format_arg_store<fmt::format_context> args;
  for (const auto& [name, value] : values) args.push_back(fmt::arg(name.c_str(), FilepathValue{name, value}));
  try {
    return fmt::vformat(pattern, args);
  } catch (const fmt::format_error& e) {
    std::string keys;
    for (const auto& [k, v] : values) keys += (keys.empty() ? "" : ", ") + k;
    throw InvalidArgument("filepath " + pattern + ": " + e.what() + " (known values: " + keys + ")");
  }
}

// ---- ModelCheckpoint ------------------------------------------------------------------------------

ModelCheckpoint::ModelCheckpoint(ModelCheckpointOptions options)
    : o_(std::move(options)), mode_(resolve_mode(o_.mode, o_.monitor)) {
  if (o_.filepath.empty()) throw InvalidArgument("ModelCheckpoint: filepath is empty");
  if (o_.save_freq < 0)
    throw InvalidArgument("ModelCheckpoint: save_freq = " + std::to_string(o_.save_freq) +
                          " must be 0 (\"epoch\") or a positive number of batches");
  best_ = o_.initial_value_threshold ? *o_.initial_value_threshold
                                     : (mode_ == Mode::kMax ? -INFINITY : INFINITY);
}

void ModelCheckpoint::on_train_begin(const Logs&) {
  // Report an unwritable destination now, not after the first epoch's work.
  fs::path parent = fs::path(o_.filepath).parent_path();
  if (parent.empty()) parent = ".";
  make_dirs(parent);
  const fs::path probe = parent / (".tensorhub-write-test-" + std::to_string(::getpid()));
  std::FILE* f = std::fopen(probe.c_str(), "w");
  if (!f)
    throw Unavailable("ModelCheckpoint: cannot write into " + parent.string() + ": " +
                      std::strerror(errno));
  std::fclose(f);
  std::error_code ec;
  fs::remove(probe, ec);
}

void ModelCheckpoint::on_epoch_begin(int epoch, const Logs&) { epoch_ = epoch; }

void ModelCheckpoint::on_train_batch_end(std::int64_t batch, const Logs& logs) {
  if (o_.save_freq <= 0) return;
  if (++batches_seen_ % o_.save_freq == 0) save(epoch_, batch, logs);
}

void ModelCheckpoint::on_epoch_end(int epoch, Logs& logs) {
  if (o_.save_freq == 0) save(epoch, -1, logs);
}

void ModelCheckpoint::save(int epoch, std::int64_t batch, const Logs& logs) {
  std::map<std::string, double> values(logs.begin(), logs.end());
  values["epoch"] = epoch + 1;
  if (batch >= 0) values["batch"] = static_cast<double>(batch + 1);
  const std::string path = format_filepath(o_.filepath, values);
  if (o_.save_best_only) {
    auto it = logs.find(o_.monitor);
    if (it == logs.end()) {
      log_warning(fmt::format("Can save best model only with {} available, skipping.", o_.monitor));
      return;
    }
    if (!improves(mode_, it->second, best_, 0)) {
      if (o_.verbose > 0) log_info(fmt::format("\nEpoch {}: {} did not improve from {:.5f}", epoch + 1, o_.monitor, best_));
      return;
    }
    if (o_.verbose > 0)
      log_info(fmt::format("\nEpoch {}: {} improved from {:.5f} to {:.5f}, saving model to {}", epoch + 1, o_.monitor,
                           best_, it->second, path));
    best_ = it->second;
  } else if (o_.verbose > 0) {
    log_info(fmt::format("\nEpoch {}: saving model to {}", epoch + 1, path));
  }
  if (o_.save_weights_only) {
    make_dirs(path);
    write_safetensors(fs::path(path) / "weights.safetensors", model()->weights());
  } else {
    model()->save(path);
  }
  saved_.push_back(path);
}

// ---- BackupAndRestore ----------------------------------------------------------------------------

BackupAndRestore::BackupAndRestore(std::string backup_dir, bool delete_checkpoint)
    : dir_(std::move(backup_dir)), delete_(delete_checkpoint) {
  if (dir_.empty()) throw InvalidArgument("BackupAndRestore: backup_dir is empty");
}

// The backup lives in backup_dir/chief; a new one is written to chief.tmp and swapped in with
// renames, so a kill at any moment leaves either the old or the new backup complete.
void BackupAndRestore::on_train_begin(const Logs&) {
  const fs::path dir(dir_);
  make_dirs(dir);
  fs::path chief = dir / "chief";
  std::error_code ec;
  if (!fs::exists(chief / "state.json") && fs::exists(dir / "chief.old" / "state.json"))
    chief = dir / "chief.old";
  restored_epoch_ = -1;
  if (!fs::exists(chief / "state.json")) return;
  model()->load_state(chief.string());
  restored_epoch_ = model()->epochs_done();
  model()->set_resume_epoch(restored_epoch_);
}

void BackupAndRestore::on_epoch_end(int, Logs&) {
  const fs::path dir(dir_);
  const fs::path tmp = dir / "chief.tmp", chief = dir / "chief", old = dir / "chief.old";
  std::error_code ec;
  fs::remove_all(tmp, ec);
  model()->save(tmp.string());
  fs::remove_all(old, ec);
  if (fs::exists(chief)) {
    fs::rename(chief, old, ec);
    if (ec) throw Unavailable("BackupAndRestore: cannot rename " + chief.string() + ": " + ec.message());
  }
  fs::rename(tmp, chief, ec);
  if (ec) throw Unavailable("BackupAndRestore: cannot rename " + tmp.string() + ": " + ec.message());
  fs::remove_all(old, ec);
}

void BackupAndRestore::on_train_end(const Logs&) {
  if (!delete_) return;
  std::error_code ec;
  fs::remove_all(fs::path(dir_), ec);
}

}  // namespace tensorhub
