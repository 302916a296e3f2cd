// The seed of the Graph view (tests/ui/graph.test.mjs), in project "graph":
//   - "cnn": a small CNN (Conv2D, BatchNormalization, MaxPooling2D, Flatten, Dropout, Dense)
//     trained 3 epochs with the TensorBoard callback (histogram_freq 1) into DIR/graph-logs/cnn
//     and saved with its weights and the tag {"log_dir": "cnn"}, which links it to the run
//     "cnn/train" of `tensorhub ui --logdir DIR/graph-logs` (graph_api.h);
//   - "spec-mlp": an MLP trained by a spec (run_train_spec, as a runner does) with the TensorBoard
//     callback into DIR/graph-logs/spec; the spec's save_model tags the model with that
//     log_dir itself (absolute), which links it to the run "spec/train";
//   - "mlp": an MLP saved with weights and no log_dir tag (no history to show);
//   - "unknown-layer": a model.json whose second layer is a type tensorhub does not know, which
//     the view must explain instead of drawing.
// Returns {"graph": {"project", "logdir", "cnn", "spec", "spec_epochs", "mlp", "bad", "epochs"}}.
#include <random>

#include "seed.h"
#include "tensorhub/train/callbacks.h"
#include "tensorhub/train/model.h"
#include "tensorhub/train/spec.h"

namespace tensorhub::testing {
namespace {

namespace fs = std::filesystem;

Json cnn_config() {
  return {{"name", "cnn"},
          {"input_shape", {8, 8, 1}},
          {"layers", {{{"type", "Conv2D"}, {"filters", 4}, {"kernel_size", 3}, {"activation", "relu"}},
                      {{"type", "BatchNormalization"}},
                      {{"type", "MaxPooling2D"}, {"pool_size", 2}},
                      {{"type", "Flatten"}},
                      {{"type", "Dropout"}, {"rate", 0.1}},
                      {{"type", "Dense"}, {"units", 3}}}},
          {"loss", "sparse_categorical_crossentropy"},
          {"optimizer", {{"type", "Adam"}, {"learning_rate", 0.01}}},
          {"seed", 11}};
}

// 96 random 8x8 images, labelled by which third of the image is brightest.
std::pair<Tensor, Tensor> images() {
  std::mt19937 rng(13);
  std::uniform_real_distribution<float> u(0, 1);
  std::vector<float> xs;
  std::vector<std::int64_t> ys;
  for (int i = 0; i < 96; ++i) {
    float part[3] = {0, 0, 0};
    for (int p = 0; p < 64; ++p) {
      xs.push_back(u(rng));
      part[std::min(2, (p % 8) / 3)] += xs.back();
    }
    ys.push_back(std::max_element(part, part + 3) - part);
  }
  return {Tensor::from<float>(DType::kF32, {96, 8, 8, 1}, xs), Tensor::from<std::int64_t>(DType::kI64, {96}, ys)};
}

std::int64_t trained_cnn(Hub& hub, const fs::path& logdir, int epochs) {
  const auto [x, y] = images();
  Model model = Model::from_config(cnn_config());
  TensorBoardOptions to;
  to.log_dir = (logdir / "cnn").string();
  to.histogram_freq = 1;
  FitOptions fit;
  fit.epochs = epochs;
  fit.batch_size = 32;
  fit.seed = 7;
  fit.verbose = 0;
  fit.callbacks = {std::make_shared<TensorBoard>(to)};
  model.fit(x, y, fit);
  return hub.save_model(model.config(), model.weights(), "cnn", {{"log_dir", "cnn"}, {"test_accuracy", 0.5}});
}

// A spec task's training, as a runner runs it: 2 epochs of an MLP on 64 rows of 6 features.
std::int64_t spec_trained(Hub& hub, const fs::path& logdir, int epochs) {
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> xs;
  std::vector<std::int64_t> ys;
  for (int i = 0; i < 64; ++i) {
    for (int k = 0; k < 6; ++k) xs.push_back(u(rng));
    ys.push_back(xs[xs.size() - 6] + xs[xs.size() - 1] > 0 ? 1 : 0);
  }
  hub.save_dataset({{"x", Tensor::from<float>(DType::kF32, {64, 6}, xs)}, {"y", Tensor::from<std::int64_t>(DType::kI64, {64}, ys)}},
                   "rows");
  const Json spec = {
      {"model", {{"name", "spec-mlp"}, {"input_shape", {6}},
                 {"layers", {{{"type", "Dense"}, {"units", 5}, {"activation", "relu"}}, {{"type", "Dense"}, {"units", 2}}}},
                 {"seed", 2}}},
      {"data", {{"dataset", "rows"}, {"x", "x"}, {"y", "y"}}},
      {"fit", {{"batch_size", 16}, {"epochs", epochs}, {"seed", 1}, {"verbose", 0}}},
      {"callbacks", {{{"type", "TensorBoard"}, {"log_dir", (logdir / "spec").string()}, {"histogram_freq", 1}}}},
      {"save_model", {{"model_name", "spec-mlp"}}}};
  return run_train_spec(parse_train_spec(spec, Json::object()), hub).at("model_id");
}

std::int64_t mlp(Hub& hub) {
  Model model = Model::from_config({{"name", "mlp"},
                                    {"input_shape", {20}},
                                    {"layers", {{{"type", "Dense"}, {"units", 16}, {"activation", "relu"}},
                                                {{"type", "Dense"}, {"units", 4}, {"use_bias", false}}}},
                                    {"loss", "sparse_categorical_crossentropy"},
                                    {"seed", 5}});
  return hub.save_model(model.config(), model.weights(), "mlp", {});
}

}  // namespace

Json seed_graph(Hub& hub, const fs::path& dir) {
  Hub project = hub.with_project("graph");
  const fs::path logdir = dir / "graph-logs";
  constexpr int kEpochs = 3;
  Json facts = {{"project", "graph"}, {"logdir", logdir.string()}, {"epochs", kEpochs}};
  facts["cnn"] = trained_cnn(project, logdir, kEpochs);
  facts["spec_epochs"] = 2;
  facts["spec"] = spec_trained(project, logdir, 2);
  facts["mlp"] = mlp(project);
  facts["bad"] = project.save_model({{"name", "bad"},
                                     {"input_shape", {4}},
                                     {"layers", {{{"type", "Dense"}, {"units", 2}}, {{"type", "Transformer"}, {"heads", 8}}}}},
                                    {}, "unknown-layer", {});
  return {{"graph", facts}};
}

}  // namespace tensorhub::testing
