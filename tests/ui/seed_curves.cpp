// The seed of the Curves view (tests/ui/curves.test.mjs, bench/ui_curves.mjs):
//   - DIR/logs/big: one event file (EventFileWriter, the TensorBoard callback's writer) with a
//     100,000-point scalar "loss" holding a NaN, +Inf, -Inf, a zero, a negative value and one
//     spike, so that the reduction, the marks and the log scale can be checked;
//   - DIR/logs/fit: a real fit of a small classifier with the TensorBoard callback (train/ and
//     validation/ scalars, weight histograms every epoch, an hparams session; the experiment
//     summary lands in DIR/logs);
//   - 20 epoch reports of the tasks "finished", "failed" and "cancelled" of seed_tasks.cpp (no
//     new task: the Tasks view's tests count them), and training logs of "finished".
// Returns {"curves": {...}}: the facts the tests check, written here once.
#include <cmath>
#include <limits>
#include <random>

#include "seed.h"
#include "tensorhub/queue/task_queue.h"
#include "tensorhub/queue/epoch_report.h"
#include "tensorhub/summary/event_file_writer.h"
#include "tensorhub/train/callbacks.h"
#include "tensorhub/train/model.h"

namespace tensorhub::testing {
namespace {

namespace fs = std::filesystem;

constexpr std::int64_t kPoints = 100000;
constexpr std::int64_t kSpikeStep = 61234, kNanStep = 20000, kInfStep = 40000, kNegInfStep = 80000;
constexpr std::int64_t kZeroStep = 90000, kNegativeStep = 95000;
constexpr double kSpike = 50.0;

// The big series: a decaying loss with a ripple, always in (0, 2.1) except the points above.
double big_value(std::int64_t step) {
  switch (step) {
    case kSpikeStep: return kSpike;
    case kNanStep: return std::numeric_limits<double>::quiet_NaN();
    case kInfStep: return std::numeric_limits<double>::infinity();
    case kNegInfStep: return -std::numeric_limits<double>::infinity();
    case kZeroStep: return 0.0;
    case kNegativeStep: return -0.5;
    default: return 2.0 * std::exp(-static_cast<double>(step) / 30000.0) + 0.05 * std::sin(static_cast<double>(step) / 50.0) + 0.06;
  }
}

Json write_big_series(const fs::path& logs) {
  EventFileWriter writer(logs / "big");
  for (std::int64_t step = 0; step < kPoints; ++step) writer.add_scalar("loss", big_value(step), step);
  writer.close();
  return {{"run", "big"}, {"tag", "loss"}, {"points", kPoints}, {"spike_step", kSpikeStep}, {"spike", kSpike},
          {"nan_step", kNanStep}, {"inf_step", kInfStep}, {"neg_inf_step", kNegInfStep},
          {"nonpositive_steps", {kZeroStep, kNegativeStep}}};
}

// A real fit with the TensorBoard callback: 4 features, two classes split by a plane.
Json fit_with_tensorboard(const fs::path& logs) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> xs;
  std::vector<std::int64_t> ys;
  for (int i = 0; i < 64; ++i) {
    float dot = 0;
    for (float w : {1.0f, -2.0f, 0.5f, 1.5f}) {
      xs.push_back(u(rng));
      dot += w * xs.back();
    }
    ys.push_back(dot > 0 ? 1 : 0);
  }
  const Tensor x = Tensor::from<float>(DType::kF32, {64, 4}, xs);
  const Tensor y = Tensor::from<std::int64_t>(DType::kI64, {64}, ys);
  Model model = Model::from_config(
      {{"input_shape", {4}},
       {"layers", {{{"type", "Dense"}, {"units", 8}, {"activation", "relu"}}, {{"type", "Dense"}, {"units", 2}}}},
       {"loss", "sparse_categorical_crossentropy"},
       {"optimizer", {{"type", "Adam"}, {"learning_rate", 0.01}}},
       {"seed", 3}});
  TensorBoardOptions to;
  to.log_dir = (logs / "fit").string();
  to.histogram_freq = 1;
  to.hparams = {{"units", 8}, {"optimizer", "adam"}};
  FitOptions fit;
  fit.epochs = 5;
  fit.batch_size = 16;
  fit.seed = 7;
  fit.verbose = 0;
  fit.callbacks = {std::make_shared<TensorBoard>(to)};
  const History history = model.fit(x, y, fit, &x, &y);
  Json losses = Json::array();
  for (const auto& e : history.epochs) losses.push_back(e.at("loss"));
  return {{"run", "fit/train"}, {"session_run", "fit"}, {"tag", "epoch_loss"}, {"epochs", fit.epochs},
          {"losses", losses}, {"histogram", "dense.weight"}};
}

// 20 epochs of "loss" and "accuracy" for three existing tasks; "failed" has a NaN loss at epoch 7.
Json write_epoch_reports(Hub& hub) {
  TaskQueue queue(hub);
  Json ids = Json::array();
  int k = 0;
  for (const char* name : {"finished", "failed", "cancelled"}) {
    const auto tasks = queue.find_tasks({{"task_name", name}});
    if (tasks.empty()) throw std::runtime_error(std::string("seed_curves: no task named ") + name);
    const std::int64_t id = tasks.front().id;
    ids.push_back(id);
    for (int e = 0; e < 20; ++e) {
      double loss = 1.0 / (e + 1) + 0.1 * k;
      if (k == 1 && e == 7) loss = std::numeric_limits<double>::quiet_NaN();
      save_epoch_report(hub, id, tasks.front().attempt, e, {{"loss", loss}, {"accuracy", 1.0 - 0.4 / (e + 1) - 0.05 * k}});
    }
    ++k;
  }
  for (int e = 0; e < 10; ++e)
    hub.save_training_log({{"task_id", ids[0]}, {"epoch", e}, {"loss", 2.0 / (e + 1)}, {"accuracy", 0.5 + 0.04 * e}});
  return ids;
}

}  // namespace

Json seed_curves(Hub& hub, const fs::path& dir) {
  const fs::path logs = dir / "logs";
  Json facts = {{"logdir", logs.string()}, {"big", write_big_series(logs)}, {"fit", fit_with_tensorboard(logs)},
                {"epoch_tasks", write_epoch_reports(hub)}};
  return {{"curves", facts}};
}

}  // namespace tensorhub::testing
