// Keras callbacks: EarlyStopping, TerminateOnNaN, CSVLogger, LearningRateScheduler,
// ReduceLROnPlateau, ProgressBar, TensorBoard, HubLogger. (ModelCheckpoint and
// BackupAndRestore are in checkpoint.cpp.)
#include <sys/file.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "tensorhub/core/error.h"
#include "tensorhub/core/hash.h"
#include "tensorhub/core/log.h"
#include "tensorhub/store/hub.h"
#include "tensorhub/summary/event_file_reader.h"
#include "tensorhub/summary/event_file_writer.h"
#include "tensorhub/summary/projector.h"
#include "tensorhub/train/callbacks.h"
#include "tensorhub/train/keras_model_json.h"

namespace tensorhub {

bool improves(Mode mode, double current, double reference, double min_delta);  // checkpoint.cpp

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string format_logs(const Logs& logs) {
  std::string s;
  char buf[96];
  // Keras's order: loss, metrics, then val_*, then anything else callbacks added ("lr").
  for (const char* key : {"loss", "accuracy", "val_loss", "val_accuracy"}) {
    auto it = logs.find(key);
    if (it == logs.end()) continue;
    std::snprintf(buf, sizeof buf, " - %s: %.4f", key, it->second);
    s += buf;
  }
  for (const auto& [key, v] : logs) {
    if (key == "loss" || key == "accuracy" || key == "val_loss" || key == "val_accuracy") continue;
    std::snprintf(buf, sizeof buf, " - %s: %.4g", key.c_str(), v);
    s += buf;
  }
  return s;
}

}  // namespace

Mode resolve_mode(Mode mode, const std::string& monitor) {
  if (mode != Mode::kAuto) return mode;
  return monitor.find("acc") != std::string::npos ? Mode::kMax : Mode::kMin;
}

// ---- EarlyStopping -------------------------------------------------------------------------------

EarlyStopping::EarlyStopping(EarlyStoppingOptions options)
    : o_(std::move(options)), mode_(resolve_mode(o_.mode, o_.monitor)) {
  if (o_.patience < 0) throw InvalidArgument("EarlyStopping: patience must not be negative");
  delta_ = std::fabs(o_.min_delta);
}

bool EarlyStopping::improved(double current, double reference) const {
  return improves(mode_, current, reference, delta_);
}

void EarlyStopping::on_train_begin(const Logs&) {
  wait_ = 0;
  stopped_epoch_ = 0;
  best_ = mode_ == Mode::kMax ? -INFINITY : INFINITY;
  best_weights_.clear();
  have_best_weights_ = false;
  best_epoch_ = 0;
}

void EarlyStopping::on_epoch_end(int epoch, Logs& logs) {
  auto it = logs.find(o_.monitor);
  if (it == logs.end()) {
    std::string keys;
    for (const auto& [k, v] : logs) keys += (keys.empty() ? "" : ",") + k;
    log_warning(fmt::format("Early stopping conditioned on metric `{}` which is not available. Available "
                            "metrics are: {}",
                            o_.monitor, keys));
    return;
  }
  if (epoch < o_.start_from_epoch) return;
  const double current = it->second;
  last_epoch_ = epoch;
  if (o_.restore_best_weights && !have_best_weights_) {
    // Keras 2.12: the first epoch's weights are the best until something beats them.
    best_weights_ = model()->weights();
    have_best_weights_ = true;
  }
  ++wait_;
  if (improved(current, best_)) {
    best_ = current;
    best_epoch_ = epoch;
    if (o_.restore_best_weights) best_weights_ = model()->weights();
    // Only restart wait if we beat both the baseline and our previous best.
    if (!o_.baseline || improved(current, *o_.baseline)) wait_ = 0;
    return;
  }
  if (wait_ >= o_.patience && epoch > 0) {
    stopped_epoch_ = epoch;
    model()->set_stop_training(true);
    if (o_.restore_best_weights && have_best_weights_) {
      if (o_.verbose > 0) log_info(fmt::format("Restoring model weights from the end of the best epoch: {}.", best_epoch_ + 1));
      model()->set_weights(best_weights_);
    }
  }
}

void EarlyStopping::on_train_end(const Logs&) {
  // Keras 3 also restores when training ran to the end and the best epoch was not the last.
  if (stopped_epoch_ == 0 && o_.restore_best_weights && have_best_weights_ &&
      best_epoch_ != last_epoch_) {
    if (o_.verbose > 0) log_info(fmt::format("Restoring model weights from the end of the best epoch: {}.", best_epoch_ + 1));
    model()->set_weights(best_weights_);
  }
  if (stopped_epoch_ > 0 && o_.verbose > 0) log_info(fmt::format("Epoch {}: early stopping", stopped_epoch_ + 1));
}

// ---- TerminateOnNaN ------------------------------------------------------------------------------

void TerminateOnNaN::on_train_batch_end(std::int64_t batch, const Logs& logs) {
  auto it = logs.find("loss");
  if (it == logs.end() || std::isfinite(it->second)) return;
  log_warning(fmt::format("Batch {}: Invalid loss, terminating training", batch));
  batch_ = batch;
  model()->set_stop_training(true);
}

// ---- CSVLogger -----------------------------------------------------------------------------------

CSVLogger::CSVLogger(std::string filename, char separator, bool append)
    : filename_(std::move(filename)), sep_(separator), append_(append) {}

CSVLogger::~CSVLogger() {
  if (file_) std::fclose(file_);
}

void CSVLogger::on_train_begin(const Logs&) {
  header_written_ = false;
  if (append_) {
    std::FILE* f = std::fopen(filename_.c_str(), "r");
    if (f) {
      header_written_ = std::fgetc(f) != EOF;  // a non-empty file has its header
      std::fclose(f);
    }
  }
  if (file_) std::fclose(file_);
  file_ = std::fopen(filename_.c_str(), append_ ? "a" : "w");
  if (!file_)
    throw Unavailable("CSVLogger: cannot open " + filename_ + ": " + std::strerror(errno));
  keys_.clear();
}

void CSVLogger::on_epoch_end(int epoch, Logs& logs) {
  if (!file_) return;
  if (keys_.empty())
    for (const auto& [k, v] : logs) keys_.push_back(k);  // sorted, as Keras's sorted(logs)
  if (!header_written_) {
    std::fputs("epoch", file_);
    for (const auto& k : keys_) std::fprintf(file_, "%c%s", sep_, k.c_str());
    std::fputc('\n', file_);
    header_written_ = true;
  }
  std::fprintf(file_, "%d", epoch);
  for (const auto& k : keys_) {
    auto it = logs.find(k);
    if (it == logs.end())
      std::fprintf(file_, "%cNA", sep_);
    else
      std::fprintf(file_, "%c%.17g", sep_, it->second);  // repr-exact
  }
  std::fputc('\n', file_);
  std::fflush(file_);
}

void CSVLogger::on_train_end(const Logs&) {
  if (file_) std::fclose(file_);
  file_ = nullptr;
}

// ---- LearningRateScheduler -----------------------------------------------------------------------

LearningRateScheduler::LearningRateScheduler(std::function<double(int, double)> schedule,
                                             int verbose)
    : schedule_(std::move(schedule)), verbose_(verbose) {
  if (!schedule_) throw InvalidArgument("LearningRateScheduler: schedule is empty");
}

void LearningRateScheduler::on_epoch_begin(int epoch, const Logs&) {
  const double lr = schedule_(epoch, model()->learning_rate());
  if (!std::isfinite(lr) || lr <= 0)
    throw InvalidArgument("LearningRateScheduler: the schedule returned " + std::to_string(lr) +
                          " for epoch " + std::to_string(epoch) + "; it must be positive");
  model()->set_learning_rate(lr);
  if (verbose_ > 0) log_info(fmt::format("\nEpoch {}: LearningRateScheduler setting learning rate to {}.", epoch + 1, lr));
}

void LearningRateScheduler::on_epoch_end(int, Logs& logs) { logs["lr"] = model()->learning_rate(); }

// ---- ReduceLROnPlateau ---------------------------------------------------------------------------

ReduceLROnPlateau::ReduceLROnPlateau(ReduceLROnPlateauOptions options)
    : o_(std::move(options)), mode_(resolve_mode(o_.mode, o_.monitor)) {
  if (!(o_.factor < 1.0))
    throw InvalidArgument("ReduceLROnPlateau does not support a factor >= 1.0; got " +
                          std::to_string(o_.factor));
}

void ReduceLROnPlateau::on_train_begin(const Logs&) {
  best_ = mode_ == Mode::kMax ? -INFINITY : INFINITY;
  wait_ = 0;
  cooldown_counter_ = 0;
}

void ReduceLROnPlateau::on_epoch_end(int epoch, Logs& logs) {
  logs["lr"] = model()->learning_rate();
  auto it = logs.find(o_.monitor);
  if (it == logs.end()) {
    log_warning(fmt::format("Learning rate reduction is conditioned on metric `{}` which is not available.",
                            o_.monitor));
    return;
  }
  const double current = it->second;
  if (cooldown_counter_ > 0) {
    --cooldown_counter_;
    wait_ = 0;
  }
  if (improves(mode_, current, best_, o_.min_delta)) {
    best_ = current;
    wait_ = 0;
  } else if (cooldown_counter_ <= 0) {
    ++wait_;
    if (wait_ >= o_.patience) {
      const double old_lr = model()->learning_rate();
      if (old_lr > o_.min_lr) {
        const double new_lr = std::max(old_lr * o_.factor, o_.min_lr);
        // Keras compares in float32 (np.float32(old_lr) > np.float32(min_lr)).
        if (static_cast<float>(new_lr) < static_cast<float>(old_lr)) {
          model()->set_learning_rate(new_lr);
          if (o_.verbose > 0)
            log_info(fmt::format("\nEpoch {}: ReduceLROnPlateau reducing learning rate to {}.", epoch + 1, new_lr));
        }
        cooldown_counter_ = o_.cooldown;
        wait_ = 0;
      }
    }
  }
}

// ---- ProgressBar ---------------------------------------------------------------------------------

ProgressBar::ProgressBar(int verbose) : verbose_(verbose) {}

void ProgressBar::on_epoch_begin(int epoch, const Logs&) {
  bar_ = verbose_ == 1 && ::isatty(2);
  epoch_ = epoch;
  loss_sum_ = acc_sum_ = 0;
  seen_ = 0;
  start_ = last_draw_ = now_seconds();
}

void ProgressBar::on_train_batch_end(std::int64_t batch, const Logs& logs) {
  if (!bar_) return;
  auto l = logs.find("loss"), a = logs.find("accuracy");
  loss_sum_ += l == logs.end() ? 0 : l->second;
  acc_sum_ += a == logs.end() ? 0 : a->second;
  ++seen_;
  const std::int64_t step = batch + 1, steps = params().steps;
  const double now = now_seconds();
  if ((steps == 0 || step < steps) && now - last_draw_ < 0.1) return;
  last_draw_ = now;
  constexpr int kWidth = 30;
  // steps 0: a dataset's first pass, whose length is not known yet (Keras's "Unknown").
  const int filled = steps > 0 ? static_cast<int>(kWidth * step / steps) : 0;
  std::string bar(kWidth, '.');
  for (int i = 0; i < filled && i < kWidth; ++i) bar[i] = '=';
  if (filled < kWidth) bar[filled] = '>';
  const std::string target = steps > 0 ? std::to_string(steps) : "Unknown";
  // Means of the batch values so far (batches of equal size but maybe the last).
  std::fprintf(stderr, "\rEpoch %d/%d %lld/%s [%s] - loss: %.4f - accuracy: %.4f", epoch_ + 1,
               params().epochs, static_cast<long long>(step), target.c_str(),
               bar.c_str(), loss_sum_ / static_cast<double>(seen_),
               acc_sum_ / static_cast<double>(seen_));
  std::fflush(stderr);
}

void ProgressBar::on_epoch_end(int epoch, Logs& logs) {
  if (verbose_ <= 0) return;
  const double s = now_seconds() - start_;
  std::fprintf(stderr, "%sEpoch %d/%d %lld/%lld - %.1fs%s\n", bar_ ? "\r\033[K" : "", epoch + 1,
               params().epochs, static_cast<long long>(params().steps),
               static_cast<long long>(params().steps), s, format_logs(logs).c_str());
  std::fflush(stderr);
}

// ---- TensorBoard ---------------------------------------------------------------------------------

struct TensorBoard::Writers {
  // `session` (log_dir itself) holds the hparams session records; null without hparams.
  std::unique_ptr<EventFileWriter> train, validation, session;
};

namespace {

namespace fs = std::filesystem;

// The file-name suffix that marks an experiment summary, so a later run sees one is there.
constexpr const char* kExperimentSuffix = ".hparams_experiment";

void check_hparams(const nlohmann::json& hparams) {
  if (!hparams.is_object())
    throw InvalidArgument("TensorBoardOptions.hparams must be a JSON object of name -> number, boolean or string, got " +
                          hparams.dump());
  for (const auto& [name, v] : hparams.items())
    if (!v.is_number() && !v.is_boolean() && !v.is_string())
      throw InvalidArgument("TensorBoardOptions.hparams[\"" + name +
                            "\"] must be a number, a boolean or a string (TensorBoard's hparam types), got " + v.dump());
}

std::map<std::string, HParamValue> hparam_values(const nlohmann::json& hparams) {
  std::map<std::string, HParamValue> out;
  for (const auto& [name, v] : hparams.items()) {
    if (v.is_boolean())
      out.emplace(name, HParamValue(v.get<bool>()));
    else if (v.is_number())
      out.emplace(name, HParamValue(v.get<double>()));
    else
      out.emplace(name, HParamValue(v.get<std::string>()));
  }
  return out;
}

// TensorBoard's _derive_session_group_name: sha256(json.dumps(hparams, sort_keys=True,
// separators=(",", ":"))). nlohmann's compact dump sorts keys and, with ensure_ascii, escapes
// non-ASCII as Python does; integers stay integers, doubles print shortest round-trip.
std::string derived_group_name(const nlohmann::json& hparams) {
  return sha256_hex(hparams.dump(-1, ' ', /*ensure_ascii=*/true));
}

fs::path experiment_dir(const TensorBoardOptions& o) {
  if (!o.hparams_experiment_dir.empty()) return o.hparams_experiment_dir;
  const fs::path log_dir = fs::path(o.log_dir).lexically_normal();
  fs::path parent = log_dir.has_filename() ? log_dir.parent_path() : log_dir.parent_path().parent_path();
  return parent.empty() ? log_dir : parent;
}

// Metric infos for the epoch scalars TensorBoard::on_epoch_end writes from these logs.
std::vector<HParamMetric> metrics_of(const Logs& logs) {
  std::vector<HParamMetric> out;
  for (const auto& [k, v] : logs) {
    if (k == "lr") continue;
    const bool val = k.rfind("val_", 0) == 0;
    HParamMetric m;
    m.tag = "epoch_" + (val ? k.substr(4) : k);
    m.group = val ? "validation" : "train";
    m.display_name = k;
    m.dataset_type = val ? DatasetType::kValidation : DatasetType::kTraining;
    out.push_back(std::move(m));
  }
  return out;
}

void check_embeddings_metadata(const nlohmann::json& m) {
  bool ok = m.is_null() || m.is_string() || m.is_object();
  if (m.is_object())
    for (const auto& [k, v] : m.items()) ok = ok && v.is_string();
  if (!ok)
    throw InvalidArgument("TensorBoardOptions.embeddings_metadata must be null, a metadata file's path (for every "
                          "Embedding layer) or an object {layer name: path}, got " + m.dump());
}

// Keras's rule for embeddings_metadata: relative to log_dir if the file is there, else as given.
fs::path metadata_source(const std::string& path, const std::string& log_dir) {
  const fs::path p(path);
  std::error_code ec;
  if (p.is_relative() && fs::exists(fs::path(log_dir) / p, ec)) return fs::path(log_dir) / p;
  return p;
}

// Holds an exclusive flock on <dir>/.hparams_experiment.lock while alive (best effort: no
// lock where the file system refuses one).
class ExperimentLock {
 public:
  explicit ExperimentLock(const fs::path& dir) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    fd_ = ::open((dir / ".hparams_experiment.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ >= 0) ::flock(fd_, LOCK_EX);
  }
  ~ExperimentLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the lock
  }
  ExperimentLock(const ExperimentLock&) = delete;
  ExperimentLock& operator=(const ExperimentLock&) = delete;

 private:
  int fd_ = -1;
};

// Our experiment summaries in `dir` (files named *.hparams_experiment), oldest first.
std::vector<fs::path> experiment_files(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    // EventFileWriter appends ".1", ".2", ... to a name already taken (same second and pid).
    if (name.find("tfevents") != std::string::npos && name.find(kExperimentSuffix) != std::string::npos)
      out.push_back(it->path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Appends to `into` the hparams and metrics of `add` whose names it lacks; true if any.
bool merge_experiment(HParamsExperiment& into, const HParamsExperiment& add) {
  bool changed = false;
  std::set<std::string> names;
  for (const auto& h : into.hparams) names.insert(h.name);
  for (const auto& h : add.hparams)
    if (names.insert(h.name).second) {
      into.hparams.push_back(h);
      changed = true;
    }
  std::set<std::pair<std::string, std::string>> metrics;
  for (const auto& m : into.metrics) metrics.insert({m.group, m.tag});
  for (const auto& m : add.metrics)
    if (metrics.insert({m.group, m.tag}).second) {
      into.metrics.push_back(m);
      changed = true;
    }
  return changed;
}

}  // namespace

TensorBoard::TensorBoard(TensorBoardOptions options) : o_(std::move(options)) {
  if (o_.histogram_freq < 0 || o_.update_freq < 0 || o_.embeddings_freq < 0)
    throw InvalidArgument("TensorBoard: histogram_freq, update_freq and embeddings_freq must not be negative");
  check_embeddings_metadata(o_.embeddings_metadata);
  check_hparams(o_.hparams);
  std::set<std::string> names;
  for (const auto& d : o_.hparam_domains)
    if (!names.insert(d.name).second)
      throw InvalidArgument("TensorBoardOptions.hparam_domains names \"" + d.name + "\" twice");
  if (!o_.hparams.empty()) group_name_ = o_.trial_id.empty() ? derived_group_name(o_.hparams) : o_.trial_id;
}

TensorBoard::~TensorBoard() {
  if (!w_ || !w_->session) return;
  try {  // begun and never ended: fit threw
    w_->session->add_hparams_session_end(SessionStatus::kFailure);
    w_->session->close();
  } catch (...) {
  }
}

void TensorBoard::on_train_begin(const Logs&) {
  w_ = std::make_unique<Writers>();
  w_->train = std::make_unique<EventFileWriter>(fs::path(o_.log_dir) / "train");
  global_batch_ = 0;
  start_epoch_ = -1;
  invalid_loss_ = false;
  experiment_done_ = false;
  prepare_embeddings();
  if (o_.hparams.empty()) return;
  w_->session = std::make_unique<EventFileWriter>(fs::path(o_.log_dir));
  w_->session->add_hparams_session_start(hparam_values(o_.hparams), group_name_);
  w_->session->flush();
  if (!o_.hparam_metrics.empty()) write_experiment(nullptr);
}

// The experiment summary where one is needed (see callbacks.h): none when neither this run
// nor an earlier one gave an explicit config (TensorBoard then builds the experiment from every
// session), else the union of the existing summary and this run's, replacing the old file.
void TensorBoard::write_experiment(const Logs* first_epoch_logs) {
  experiment_done_ = true;
  const fs::path dir = experiment_dir(o_);
  const bool explicit_config = !o_.hparam_domains.empty() || !o_.hparam_metrics.empty();
  ExperimentLock lock(dir);
  const std::vector<fs::path> old_files = experiment_files(dir);
  if (old_files.empty() && !explicit_config) return;
  HParamsExperiment ours;
  std::set<std::string> with_domain;
  for (const auto& d : o_.hparam_domains) with_domain.insert(d.name);
  for (const auto& [name, v] : o_.hparams.items())
    if (!with_domain.contains(name)) ours.hparams.push_back(HParam{.name = name});
  ours.hparams.insert(ours.hparams.end(), o_.hparam_domains.begin(), o_.hparam_domains.end());
  ours.metrics = first_epoch_logs ? metrics_of(*first_epoch_logs) : o_.hparam_metrics;
  HParamsExperiment merged;
  for (const fs::path& f : old_files) {
    try {
      if (auto e = read_event_file(f).experiment) merge_experiment(merged, *e);
    } catch (const Error& e) {
      log_warning(fmt::format("TensorBoard: skipping unreadable experiment summary {}: {}", f.string(), e.message()));
    }
  }
  if (!merge_experiment(merged, ours) && old_files.size() == 1) return;  // nothing new
  EventFileWriter writer(dir, {.filename_suffix = kExperimentSuffix});
  writer.add_hparams_config(merged.hparams, merged.metrics);
  writer.close();
  std::error_code ec;
  for (const fs::path& f : old_files)
    if (f != writer.path()) fs::remove(f, ec);
}

void TensorBoard::on_epoch_begin(int epoch, const Logs&) {
  // The first epoch is known only here: BackupAndRestore may set it in its on_train_begin,
  // after ours.
  if (!w_ || start_epoch_ >= 0) return;
  start_epoch_ = epoch;
  global_batch_ = static_cast<std::int64_t>(epoch) * params().steps;
  w_->train->add_session_log(SessionLogStatus::kStart, epoch);
  // After the START: TensorBoard drops what a run holds at steps >= a START's step, and the
  // graph's step is 0.
  if (o_.write_graph) {
    nlohmann::json graph;
    try {
      graph = keras_model_json(model()->config());
    } catch (const Error& e) {  // as Keras: a model that does not serialise loses its graph only
      log_warning(fmt::format("TensorBoard: the model's graph is not written: {}", e.message()));
    }
    if (!graph.is_null()) {
      w_->train->add_keras_model("keras", graph.dump(), 0);
      // The op graph as well, which GRAPHS opens on (Keras writes TensorFlow's there).
      try {
        w_->train->add_graph(keras_graph_nodes(graph));
      } catch (const Error& e) {  // e.g. two layers of one name: the op graph only is lost
        if (e.kind() != ErrorKind::kInvalidArgument) throw;
        log_warning(fmt::format("TensorBoard: the model's op graph is not written: {}", e.message()));
      }
    }
    w_->train->flush();
  }
}

void TensorBoard::on_train_batch_end(std::int64_t, const Logs& logs) {
  ++global_batch_;
  if (!o_.hparams.empty()) {
    auto it = logs.find("loss");
    if (it != logs.end() && !std::isfinite(it->second)) invalid_loss_ = true;
  }
  if (o_.update_freq <= 0 || global_batch_ % o_.update_freq != 0) return;
  for (const char* k : {"loss", "accuracy"}) {
    auto it = logs.find(k);
    if (it != logs.end()) w_->train->add_scalar(std::string("batch_") + k, it->second, global_batch_);
  }
}

void TensorBoard::on_epoch_end(int epoch, Logs& logs) {
  if (!w_) return;
  for (const auto& [k, v] : logs) {
    if (k.rfind("val_", 0) == 0) continue;
    w_->train->add_scalar("epoch_" + (k == "lr" ? std::string("learning_rate") : k), v, epoch);
  }
  if (logs.find("lr") == logs.end())
    w_->train->add_scalar("epoch_learning_rate", model()->learning_rate(), epoch);
  bool has_val = false;
  for (const auto& [k, v] : logs) has_val = has_val || k.rfind("val_", 0) == 0;
  if (has_val) {
    if (!w_->validation) {
      w_->validation =
          std::make_unique<EventFileWriter>(fs::path(o_.log_dir) / "validation");
      w_->validation->add_session_log(SessionLogStatus::kStart, std::max(start_epoch_, 0));
    }
    for (const auto& [k, v] : logs)
      if (k.rfind("val_", 0) == 0) w_->validation->add_scalar("epoch_" + k.substr(4), v, epoch);
  }
  if (o_.histogram_freq > 0 && epoch % o_.histogram_freq == 0) {
    for (const auto& [name, t] : model()->weights())
      if (t.dtype == DType::kF32)
        w_->train->add_histogram(name, reinterpret_cast<const float*>(t.data.data()),
                                 t.data.size() / sizeof(float), epoch);
  }
  if (o_.embeddings_freq > 0 && epoch % o_.embeddings_freq == 0) write_embeddings();
  w_->train->flush();
  if (w_->validation) w_->validation->flush();
  if (w_->session) {
    auto it = logs.find("loss");
    if (it != logs.end() && !std::isfinite(it->second)) invalid_loss_ = true;
    if (!experiment_done_) write_experiment(&logs);
  }
}

void TensorBoard::on_train_end(const Logs&) {
  if (!w_) return;
  w_->train->close();
  if (w_->validation) w_->validation->close();
  if (w_->session) {
    w_->session->add_hparams_session_end(invalid_loss_ ? SessionStatus::kFailure
                                                       : SessionStatus::kSuccess);
    w_->session->close();
  }
  w_.reset();
}

// The model's Embedding layers, found in its config (type "Embedding", names filled in), and
// their metadata files, checked and copied into the train run.
void TensorBoard::prepare_embeddings() {
  embedding_layers_.clear();
  if (o_.embeddings_freq <= 0 && o_.embeddings_metadata.is_null()) return;
  const nlohmann::json& config = model()->config();
  std::map<std::string, std::int64_t> input_dims;
  for (const auto& layer : config.value("layers", nlohmann::json::array())) {
    if (layer.value("type", "") != "Embedding") continue;
    const std::string name = layer.value("name", "embedding");
    embedding_layers_.push_back({name, name + ".weight", false});
    input_dims[name] = layer.value("input_dim", std::int64_t{0});
  }
  std::map<std::string, std::string> sources;  // layer -> metadata file
  if (o_.embeddings_metadata.is_string()) {
    for (const auto& l : embedding_layers_) sources[l.name] = o_.embeddings_metadata.get<std::string>();
  } else if (o_.embeddings_metadata.is_object()) {
    for (const auto& [layer, path] : o_.embeddings_metadata.items()) {
      if (!input_dims.contains(layer))
        throw InvalidArgument("TensorBoard: embeddings_metadata names \"" + layer +
                              "\", which is not an Embedding layer of the model (Embedding layers: " +
                              [&] {
                                std::string names;
                                for (const auto& l : embedding_layers_) names += (names.empty() ? "" : ", ") + l.name;
                                return names.empty() ? std::string("none") : names;
                              }() + ")");
      sources[layer] = path.get<std::string>();
    }
  }
  for (auto& l : embedding_layers_) {
    auto it = sources.find(l.name);
    if (it == sources.end()) continue;
    const fs::path src = metadata_source(it->second, o_.log_dir);
    std::error_code ec;
    if (!fs::is_regular_file(src, ec))
      throw NotFound("TensorBoard: embeddings_metadata for Embedding layer " + l.name + ": no file " + it->second +
                     " (a relative path is looked up in log_dir " + o_.log_dir + ", then in the working directory " +
                     fs::current_path(ec).string() + ")");
    const ProjectorMetadata m = read_metadata_tsv(src);
    if (static_cast<std::int64_t>(m.rows.size()) != input_dims[l.name])
      throw InvalidArgument("TensorBoard: embeddings_metadata " + src.string() + " has " + std::to_string(m.rows.size()) +
                            " labels for Embedding layer " + l.name + " of input_dim " +
                            std::to_string(input_dims[l.name]) + " (one per id; " +
                            (m.columns.size() > 1 ? "its first line has a tab, so it was taken as a header"
                                                  : "its first line has no tab, so it is not a header") +
                            ", TensorBoard's rule; blank lines are skipped)");
    write_metadata_tsv(fs::path(o_.log_dir) / "train" / (l.name + "_metadata.tsv"), m);
    l.has_metadata = true;
  }
  if (o_.embeddings_freq > 0 && embedding_layers_.empty())
    log_warning("TensorBoard: embeddings_freq is set but the model has no Embedding layer; no projector files are written");
}

// Each Embedding layer's weights as a TSV and the projector config naming them (callbacks.h).
void TensorBoard::write_embeddings() {
  if (embedding_layers_.empty()) return;
  const fs::path dir = fs::path(o_.log_dir) / "train";
  const NamedTensors weights = model()->weights();
  ProjectorConfig config;
  for (const auto& l : embedding_layers_) {
    auto it = weights.find(l.weight);
    if (it == weights.end() || it->second.dtype != DType::kF32 || it->second.shape.size() != 2)
      throw Internal("TensorBoard: Embedding layer " + l.name + " has no F32 [input_dim, output_dim] weight " + l.weight);
    const Tensor& t = it->second;
    const float* values = reinterpret_cast<const float*>(t.data.data());
    if (!std::all_of(values, values + t.numel(), [](float v) { return std::isfinite(v); })) {
      // A diverged run (TerminateOnNaN's case) keeps training and its other files; the
      // projector cannot place a NaN point, so this epoch's vectors are left out.
      log_warning("TensorBoard: Embedding layer " + l.name + " holds NaN or infinite weights at this epoch; its "
                  "projector files are not written");
      return;
    }
    write_tensor_tsv(dir / (l.name + ".tsv"), values, t.shape[0], t.shape[1]);
    ProjectorEmbedding e{.tensor_name = l.name + "/embeddings", .tensor_path = l.name + ".tsv"};
    if (l.has_metadata) e.metadata_path = l.name + "_metadata.tsv";
    e.tensor_shape = {static_cast<std::uint32_t>(t.shape[0]), static_cast<std::uint32_t>(t.shape[1])};
    config.embeddings.push_back(std::move(e));
  }
  write_projector_config(dir, config);
}

// ---- HubLogger -----------------------------------------------------------------------------------

HubLogger::HubLogger(Hub& hub, nlohmann::json tags) : hub_(&hub), tags_(std::move(tags)) {
  if (!tags_.is_object()) throw InvalidArgument("HubLogger: tags must be a JSON object");
}

HubLogger::HubLogger(const std::string& uri, const std::string& project, nlohmann::json tags)
    : owned_(std::make_unique<Hub>(uri, project)), hub_(owned_.get()), tags_(std::move(tags)) {
  if (!tags_.is_object()) throw InvalidArgument("HubLogger: tags must be a JSON object");
}

HubLogger::~HubLogger() = default;

void HubLogger::on_epoch_end(int epoch, Logs& logs) {
  nlohmann::json train = tags_, val = tags_;
  train["epoch"] = epoch;
  val["epoch"] = epoch;
  bool has_val = false;
  for (const auto& [k, v] : logs) {
    if (k.rfind("val_", 0) == 0) {
      val[k.substr(4)] = v;
      has_val = true;
    } else {
      train[k] = v;
    }
  }
  hub_->save_training_log(train);
  if (has_val) hub_->save_validation_log(val);
}

}  // namespace tensorhub
