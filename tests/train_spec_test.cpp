// Spec tasks (tensorhub/train/spec.h): parsing, ${name} placeholders, unknown fields, and
// run_train_spec end to end against a real SQLite hub with a small linearly separable data set.
#include "tensorhub/train/spec.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "tensorhub/store/hub.h"
#include "tensorhub/train/model.h"
#include "test_util.h"
#include "train_test_data.h"

namespace tensorhub {
namespace {

using testing::TempDir;

Json linear_model() {
  return {{"name", "linear"},
          {"input_shape", {4}},
          {"layers", {{{"type", "Dense"}, {"units", "${units}"}, {"activation", "relu"}}, {{"type", "Dense"}, {"units", 2}}}},
          {"optimizer", {{"type", "Adam"}, {"learning_rate", "${learning_rate}"}}},
          {"seed", 3}};
}

Json base_spec() {
  return {{"model", linear_model()},
          {"data", {{"dataset", "separable"},
                    {"validation", {{"x", "X_val"}, {"y", "y_val"}}},
                    {"test", {{"x", "X_test"}, {"y", "y_test"}}}}},
          {"fit", {{"batch_size", 16}, {"epochs", 3}, {"seed", 7}, {"verbose", 0}}}};
}

const Json kHp = {{"units", 8}, {"learning_rate", 0.05}};

TEST(TrainSpecParse, DefaultsAndPlaceholdersKeepTheirType) {
  Json raw = base_spec();
  raw["callbacks"] = {{{"type", "CSVLogger"}, {"filename", "logs/u${units}-lr${learning_rate}.csv"}}};
  const TrainSpec spec = parse_train_spec(raw, kHp);
  // "${units}" alone becomes the number 8, not the string "8".
  EXPECT_EQ(spec.model["layers"][0]["units"], Json(8));
  EXPECT_TRUE(spec.model["layers"][0]["units"].is_number_integer());
  EXPECT_EQ(spec.model["optimizer"]["learning_rate"], Json(0.05));
  // Inside a longer string, the value's text.
  EXPECT_EQ(spec.callbacks[0]["filename"], "logs/u8-lr0.05.csv");
  EXPECT_EQ(spec.data.dataset, "separable");
  EXPECT_EQ(spec.data.train.x, "X_train");  // documented defaults
  EXPECT_EQ(spec.data.train.y, "y_train");
  ASSERT_TRUE(spec.data.validation);
  EXPECT_EQ(spec.data.validation->y, "y_val");
  EXPECT_EQ(spec.fit.batch_size, 16);
  EXPECT_EQ(spec.fit.epochs, 3);
  EXPECT_FALSE(spec.fit.initial_epoch);
  EXPECT_TRUE(spec.fit.shuffle);
  EXPECT_TRUE(spec.save_model.enabled);
  EXPECT_FALSE(spec.initial_model);
}

TEST(TrainSpecParse, StringHyperparameterInsideATextIsUnquoted) {
  EXPECT_EQ(substitute_placeholders(Json("runs/${opt}/${n}"), {{"opt", "Adam"}, {"n", 3}}), "runs/Adam/3");
  EXPECT_EQ(substitute_placeholders(Json("${flag}"), {{"flag", true}}), Json(true));
  EXPECT_EQ(substitute_placeholders(Json("no placeholder {epoch:02d}"), Json::object()), "no placeholder {epoch:02d}");
}

TEST(TrainSpecParse, UnknownPlaceholderNamesItAndTheKnownOnes) {
  testing::expect_error([] { parse_train_spec(base_spec(), {{"units", 8}}); }, ErrorKind::kInvalidArgument,
                        {"${learning_rate}", "known hyperparameters: units", "spec.model.optimizer.learning_rate"});
}

TEST(TrainSpecParse, UnknownFieldsAreErrorsNamingTheAllowedOnes) {
  Json top = base_spec();
  top["epochs"] = 3;
  testing::expect_error([&] { parse_train_spec(top, kHp); }, ErrorKind::kInvalidArgument,
                        {"unknown field \"epochs\"", "allowed: model, data, fit, callbacks, initial_model, save_model"});
  Json fit = base_spec();
  fit["fit"]["epoch"] = 3;
  testing::expect_error([&] { parse_train_spec(fit, kHp); }, ErrorKind::kInvalidArgument,
                        {"spec.fit: unknown field \"epoch\"", "batch_size, epochs, initial_epoch"});
  Json cb = base_spec();
  cb["callbacks"] = {{{"type", "EarlyStopping"}, {"patients", 3}}};
  testing::expect_error([&] { parse_train_spec(cb, kHp); }, ErrorKind::kInvalidArgument,
                        {"spec.callbacks[0]: unknown field \"patients\"", "patience"});
  Json type = base_spec();
  type["callbacks"] = {{{"type", "EarlyStop"}}};
  testing::expect_error([&] { parse_train_spec(type, kHp); }, ErrorKind::kInvalidArgument,
                        {"spec.callbacks[0].type is \"EarlyStop\"", "EarlyStopping", "TensorBoard"});
  Json mode = base_spec();
  mode["callbacks"] = {{{"type", "EarlyStopping"}, {"mode", "maximum"}}};
  testing::expect_error([&] { parse_train_spec(mode, kHp); }, ErrorKind::kInvalidArgument,
                        {"spec.callbacks[0].mode", "auto, min, max"});
  Json layer = base_spec();
  layer["model"]["layers"][0]["unit"] = 3;  // Model::from_config's own check, prefixed
  testing::expect_error([&] { parse_train_spec(layer, kHp); }, ErrorKind::kInvalidArgument, {"spec.model", "unit"});
  Json types = base_spec();
  types["fit"]["epochs"] = 2.5;
  testing::expect_error([&] { parse_train_spec(types, kHp); }, ErrorKind::kInvalidArgument,
                        {"spec.fit.epochs must be an integer", "2.5"});
  Json data = base_spec();
  data["data"].erase("dataset");
  testing::expect_error([&] { parse_train_spec(data, kHp); }, ErrorKind::kInvalidArgument, {"spec.data.dataset is required"});
  Json im = base_spec();
  im["initial_model"] = {{"model_id", 1}, {"model_name", "x"}};
  testing::expect_error([&] { parse_train_spec(im, kHp); }, ErrorKind::kInvalidArgument, {"either model_id or model_name"});
}

TEST(TrainSpecParse, EveryCallbackTypeParsesWithItsKerasParameters) {
  Json raw = base_spec();
  raw["callbacks"] = {
      {{"type", "EarlyStopping"}, {"monitor", "val_accuracy"}, {"min_delta", 0.01}, {"patience", 2}, {"verbose", 0},
       {"mode", "max"}, {"baseline", 0.5}, {"restore_best_weights", true}, {"start_from_epoch", 1}},
      {{"type", "ReduceLROnPlateau"}, {"monitor", "val_loss"}, {"factor", 0.5}, {"patience", 1}, {"mode", "min"},
       {"min_delta", 0.001}, {"cooldown", 1}, {"min_lr", 1e-5}},
      {{"type", "ModelCheckpoint"}, {"filepath", "ckpt/{epoch:02d}"}, {"save_best_only", true}, {"save_freq", "epoch"}},
      {{"type", "BackupAndRestore"}, {"backup_dir", "backup"}, {"delete_checkpoint", false}},
      {{"type", "CSVLogger"}, {"filename", "log.csv"}, {"separator", ";"}, {"append", true}},
      {{"type", "TensorBoard"}, {"log_dir", "tb"}, {"histogram_freq", 1}, {"update_freq", "batch"}},
      {{"type", "TerminateOnNaN"}},
      {{"type", "HubLogger"}, {"tags", {{"run", "a"}}}}};
  EXPECT_EQ(parse_train_spec(raw, kHp).callbacks.size(), 8u);
  raw["callbacks"] = {{{"type", "ReduceLROnPlateau"}, {"factor", 1.5}}};
  testing::expect_error([&] { parse_train_spec(raw, kHp); }, ErrorKind::kInvalidArgument, {"factor must be < 1"});
}

class TrainSpecRun : public ::testing::Test {
 protected:
  TempDir dir;
  Hub hub{"sqlite://" + (dir.path() / "hub.db").string(), "spec"};

  void SetUp() override {
    NamedTensors t;
    testing::separable(256, 1, t["X_train"], t["y_train"]);
    testing::separable(64, 2, t["X_val"], t["y_val"]);
    testing::separable(128, 3, t["X_test"], t["y_test"]);
    hub.save_dataset(t, "separable");
  }
};

TEST_F(TrainSpecRun, TrainsEvaluatesSavesAndReportsEveryEpoch) {
  std::vector<int> reported;
  TrainSpecContext ctx;
  ctx.task_id = 42;
  ctx.on_epoch_end = [&](int epoch, const Json& logs) {
    reported.push_back(epoch);
    EXPECT_TRUE(logs.contains("val_accuracy")) << logs.dump();
  };
  const Json r = run_train_spec(parse_train_spec(base_spec(), kHp), hub, ctx);

  for (const char* key : {"loss", "accuracy", "val_loss", "val_accuracy", "test_loss", "test_accuracy", "epochs",
                          "model_id", "history"})
    EXPECT_TRUE(r.contains(key)) << key << " missing in " << r.dump();
  EXPECT_EQ(reported, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(r["epochs"], 3);
  ASSERT_EQ(r["history"].size(), 3u);
  EXPECT_EQ(r["history"][2]["epoch"], 2);
  EXPECT_EQ(r["history"][2]["val_accuracy"], r["val_accuracy"]);  // the last epoch's logs on top
  // Separable with a margin: a trained linear-enough model gets nearly all right.
  EXPECT_GT(r["test_accuracy"].get<double>(), 0.9);

  // The saved model: named after the config, tagged, and it reloads to the same test accuracy.
  const auto docs = hub.find_models({{"id", r["model_id"]}});
  ASSERT_EQ(docs.size(), 1u);
  const Json& tags = docs[0].tags;
  EXPECT_EQ(tags["model_name"], "linear");
  EXPECT_EQ(tags["task_id"], 42);
  EXPECT_EQ(tags["hyper_parameters"], kHp);
  EXPECT_EQ(tags["test_accuracy"], r["test_accuracy"]);
  EXPECT_EQ(tags["epochs"], 3);
  EXPECT_TRUE(docs[0].parts.contains("optimizer.safetensors"));
  EXPECT_TRUE(docs[0].parts.contains("state.json"));
  const ModelRecord rec = hub.load_model(docs[0]);
  const auto ds = hub.find_top_dataset("separable");
  const Evaluation e = Model::from_parts(rec.architecture, rec.weights).evaluate(ds->tensors.at("X_test"), ds->tensors.at("y_test"));
  EXPECT_DOUBLE_EQ(e.accuracy, r["test_accuracy"].get<double>());
}

TEST_F(TrainSpecRun, InitialModelResumesAtItsEpochAsOneUninterruptedFit) {
  Json four = base_spec();
  four["fit"]["epochs"] = 4;
  four["save_model"] = {{"model_name", "straight"}};
  const Json straight = run_train_spec(parse_train_spec(four, kHp), hub);

  Json two = base_spec();
  two["fit"]["epochs"] = 2;
  two["save_model"] = {{"model_name", "first_half"}, {"tags", {{"trial", "t1"}}}};
  const Json first = run_train_spec(parse_train_spec(two, kHp), hub);
  EXPECT_EQ(first["epochs"], 2);

  Json resume = base_spec();
  resume["fit"]["epochs"] = 4;  // initial_epoch defaults to the initial model's 2
  resume["initial_model"] = {{"model_name", "first_half"}, {"filter", {{"trial", "t1"}}}, {"sort", Json::array({Json::array({"test_accuracy", -1})})}};
  resume["save_model"] = {{"model_name", "second_half"}};
  const Json second = run_train_spec(parse_train_spec(resume, kHp), hub);
  EXPECT_EQ(second["epochs"], 4);
  EXPECT_EQ(second["initial_model_id"], first["model_id"]);
  ASSERT_EQ(second["history"].size(), 2u);
  EXPECT_EQ(second["history"][0]["epoch"], 2);

  // Optimizer state, step count and per-epoch seeds carried over: the same weights as 4 epochs
  // in one go.
  const auto a = hub.find_top_model("straight"), b = hub.find_top_model("second_half");
  ASSERT_TRUE(a && b);
  ASSERT_EQ(a->weights.size(), b->weights.size());
  for (const auto& [name, t] : a->weights) {
    const Tensor& u = b->weights.at(name);
    ASSERT_EQ(t.numel(), u.numel());
    for (std::int64_t i = 0; i < t.numel(); ++i) EXPECT_NEAR(t.as<float>()[i], u.as<float>()[i], 1e-5) << name << "[" << i << "]";
  }
  EXPECT_NEAR(second["test_accuracy"].get<double>(), straight["test_accuracy"].get<double>(), 1e-9);

  // By id, with no "model": the stored architecture is used.
  Json by_id = base_spec();
  by_id.erase("model");
  by_id["fit"]["epochs"] = 3;
  by_id["initial_model"] = {{"model_id", first["model_id"]}};
  by_id["save_model"] = false;
  const Json third = run_train_spec(parse_train_spec(by_id, kHp), hub);
  EXPECT_EQ(third["epochs"], 3);
  EXPECT_FALSE(third.contains("model_id"));
}

// save_model.monitor keeps the best epoch's model (Keras's ModelCheckpoint(save_best_only)).
// Monitoring loss with mode max makes the first epoch the best one for certain (the training
// loss falls), so the model tested and saved must be exactly a one-epoch fit's.
TEST_F(TrainSpecRun, SaveModelMonitorSavesAndTestsTheBestEpochsModel) {
  Json three = base_spec();
  three["save_model"] = {{"model_name", "best"}, {"monitor", "loss"}, {"mode", "max"}};
  const Json r = run_train_spec(parse_train_spec(three, kHp), hub);
  ASSERT_EQ(r["history"].size(), 3u);
  ASSERT_GT(r["history"][0]["loss"].get<double>(), r["history"][2]["loss"].get<double>());
  EXPECT_EQ(r["epochs"], 3);  // epochs trained
  EXPECT_EQ(r["best_epoch"], 0);
  EXPECT_EQ(r["loss"], r["history"][0]["loss"]);  // the saved model's metrics on top
  EXPECT_EQ(r["val_accuracy"], r["history"][0]["val_accuracy"]);

  Json one = base_spec();
  one["fit"]["epochs"] = 1;
  one["save_model"] = {{"model_name", "one"}};
  const Json o = run_train_spec(parse_train_spec(one, kHp), hub);
  const auto best = hub.find_top_model("best"), first = hub.find_top_model("one");
  ASSERT_TRUE(best && first);
  for (const auto& [name, t] : first->weights) {
    const Tensor& u = best->weights.at(name);
    ASSERT_EQ(t.numel(), u.numel());
    for (std::int64_t i = 0; i < t.numel(); ++i) ASSERT_EQ(t.as<float>()[i], u.as<float>()[i]) << name << "[" << i << "]";
  }
  EXPECT_EQ(r["test_accuracy"], o["test_accuracy"]);  // tested after the best epoch was restored
  const auto docs = hub.find_models({{"id", r["model_id"]}});
  ASSERT_EQ(docs.size(), 1u);
  EXPECT_EQ(docs[0].tags["loss"], r["history"][0]["loss"]);
  EXPECT_EQ(docs[0].tags["best_epoch"], 0);

  Json bad = base_spec();
  bad["save_model"] = {{"monitor", "loss"}, {"mode", "maximum"}};
  EXPECT_THROW(parse_train_spec(bad, kHp), Error);
}

TEST_F(TrainSpecRun, MissingDatasetOrTensorIsNotFound) {
  Json raw = base_spec();
  raw["data"]["dataset"] = "nope";
  testing::expect_error([&] { run_train_spec(parse_train_spec(raw, kHp), hub); }, ErrorKind::kNotFound,
                        {"no dataset named \"nope\"", "save one with Hub::save_dataset"});
  TrainSpecContext advised;  // the caller's advice, as the CLI's train-spec gives it
  advised.missing_dataset_advice = [](const std::string& name) { return "import " + name + " first"; };
  testing::expect_error([&] { run_train_spec(parse_train_spec(raw, kHp), hub, advised); }, ErrorKind::kNotFound,
                        {"no dataset named \"nope\"", "import nope first"});
  raw = base_spec();
  raw["data"]["x"] = "X";
  testing::expect_error([&] { run_train_spec(parse_train_spec(raw, kHp), hub); }, ErrorKind::kNotFound,
                        {"no tensor \"X\"", "X_train"});
}

// 28x28 images as the [n, 784] F32 rows `tensorhub dataset import` stores (values in [0, 1]):
// noise in [0, 0.3) with the left half (class 0) or the right half (class 1) lit to 1.
void halves(std::int64_t n, std::uint32_t seed, Tensor& x, Tensor& y) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> noise(0, 0.3f);
  std::vector<float> xs;
  std::vector<std::int64_t> ys;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t cls = static_cast<std::int64_t>(rng() % 2);
    ys.push_back(cls);
    for (int r = 0; r < 28; ++r)
      for (int c = 0; c < 28; ++c) xs.push_back((c < 14) == (cls == 0) ? 1.0f : noise(rng));
  }
  x = testing::f32({n, 784}, xs);
  y = testing::i64(ys);
}

TEST_F(TrainSpecRun, CnnWithReshapeTrainsOnFlatRows) {
  NamedTensors t;
  halves(128, 1, t["X_train"], t["y_train"]);
  halves(64, 2, t["X_test"], t["y_test"]);
  hub.save_dataset(t, "halves");
  const Json raw = {
      {"model",
       {{"name", "cnn"},
        {"input_shape", {784}},
        {"seed", 1},
        {"layers",
         {{{"type", "Reshape"}, {"target_shape", {28, 28, 1}}},
          {{"type", "Conv2D"}, {"filters", 4}, {"kernel_size", 3}, {"activation", "relu"}},
          {{"type", "MaxPooling2D"}},
          {{"type", "Flatten"}},
          {{"type", "Dense"}, {"units", 2}}}},
        {"optimizer", {{"type", "Adam"}, {"learning_rate", 0.01}}}}},
      {"data", {{"dataset", "halves"}, {"test", {{"x", "X_test"}, {"y", "y_test"}}}}},
      {"fit", {{"batch_size", 16}, {"epochs", 1}, {"seed", 2}, {"verbose", 0}}}};
  const Json r = run_train_spec(parse_train_spec(raw, Json::object()), hub);
  EXPECT_EQ(r["epochs"], 1);
  ASSERT_EQ(r["history"].size(), 1u);
  // Which half is lit decides the class: 8 steps of Adam find it.
  EXPECT_GT(r["test_accuracy"].get<double>(), 0.9) << r.dump();
  // The saved model keeps its Reshape and takes the stored rows as they are.
  const auto saved = hub.find_top_model("cnn");
  ASSERT_TRUE(saved);
  EXPECT_EQ(saved->architecture["layers"][0]["type"], "Reshape");
  const Tensor out = Model::from_parts(saved->architecture, saved->weights).predict(t.at("X_test"));
  EXPECT_EQ(out.shape, (std::vector<std::int64_t>{64, 2}));
}

}  // namespace
}  // namespace tensorhub

namespace tensorhub {
namespace {

// The typed edits the tuner makes: each lands where parse_train_spec reads it.
TEST(SpecEditTest, EditsLandWhereTheParserReadsThem) {
  Json spec = {{"model", {{"input_shape", {2}}, {"layers", {{{"type", "Dense"}, {"units", 2}}}}}},
               {"data", {{"dataset", "d"}}},
               {"save_model", false},
               {"callbacks", {{{"type", "TensorBoard"}}, {{"type", "TensorBoard"}, {"trial_id", "mine"}},
                              {{"type", "TerminateOnNaN"}}}}};
  set_epochs(spec, 7);
  set_initial_epoch(spec, 3);
  set_initial_model(spec, 12);
  set_save_model_tag(spec, "search", "s");
  set_save_model_tag(spec, "trial_id", "t1");
  set_tensorboard_trial_id(spec, "s/t1");
  const TrainSpec parsed = parse_train_spec(spec, Json::object());
  EXPECT_EQ(parsed.fit.epochs, 7);
  EXPECT_EQ(parsed.fit.initial_epoch, 3);
  ASSERT_TRUE(parsed.initial_model);
  EXPECT_EQ(parsed.initial_model->model_id, 12);
  EXPECT_TRUE(parsed.save_model.enabled);  // a boolean save_model becomes an object
  EXPECT_EQ(parsed.save_model.tags, (Json{{"search", "s"}, {"trial_id", "t1"}}));
  EXPECT_EQ(spec["callbacks"][0]["trial_id"], "s/t1");
  EXPECT_EQ(spec["callbacks"][1]["trial_id"], "mine");  // a given trial_id stays
  EXPECT_FALSE(spec["callbacks"][2].contains("trial_id"));
}

}  // namespace
}  // namespace tensorhub
