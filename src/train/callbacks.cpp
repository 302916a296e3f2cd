// Keras callbacks: EarlyStopping, TerminateOnNaN, CSVLogger, LearningRateScheduler,
// ReduceLROnPlateau, ProgressBar, TensorBoard, HubLogger. (ModelCheckpoint and
// BackupAndRestore are in checkpoint.cpp.)
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
#include "tensorhub/summary/event_file_writer.h"
#include "tensorhub/train/callbacks.h"

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

bool has_experiment(const fs::path& dir) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.find("tfevents") != std::string::npos && name.ends_with(kExperimentSuffix)) return true;
  }
  return false;
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

}  // namespace

TensorBoard::TensorBoard(TensorBoardOptions options) : o_(std::move(options)) {
  if (o_.histogram_freq < 0 || o_.update_freq < 0)
    throw InvalidArgument("TensorBoard: histogram_freq and update_freq must not be negative");
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
  if (o_.hparams.empty()) return;
  w_->session = std::make_unique<EventFileWriter>(fs::path(o_.log_dir));
  w_->session->add_hparams_session_start(hparam_values(o_.hparams), group_name_);
  w_->session->flush();
  if (!o_.hparam_metrics.empty()) write_experiment(nullptr);
}

// The experiment summary, unless the experiment directory already has one.
void TensorBoard::write_experiment(const Logs* first_epoch_logs) {
  experiment_done_ = true;
  const fs::path dir = experiment_dir(o_);
  if (has_experiment(dir)) return;
  std::vector<HParam> infos;
  std::set<std::string> with_domain;
  for (const auto& d : o_.hparam_domains) with_domain.insert(d.name);
  for (const auto& [name, v] : o_.hparams.items())
    if (!with_domain.contains(name)) infos.push_back(HParam{.name = name});
  infos.insert(infos.end(), o_.hparam_domains.begin(), o_.hparam_domains.end());
  EventFileWriter writer(dir, {.filename_suffix = kExperimentSuffix});
  writer.add_hparams_config(infos, first_epoch_logs ? metrics_of(*first_epoch_logs) : o_.hparam_metrics);
  writer.close();
}

void TensorBoard::on_epoch_begin(int epoch, const Logs&) {
  // The first epoch is known only here: BackupAndRestore may set it in its on_train_begin,
  // after ours.
  if (!w_ || start_epoch_ >= 0) return;
  start_epoch_ = epoch;
  global_batch_ = static_cast<std::int64_t>(epoch) * params().steps;
  w_->train->add_session_log(SessionLogStatus::kStart, epoch);
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
