// The TensorBoard callback's hparams records (TensorBoardOptions::hparams), read back from the
// event files and decoded with our hparams protos: session start (values, group name), session
// end (status), the experiment summary (hparam and metric infos, written once per experiment
// directory), and a spec task passing its hyperparameters to its TensorBoard callback.
// Expected group names are TensorBoard's _derive_session_group_name computed with Debian's
// python3: hashlib.sha256(json.dumps(h, sort_keys=True, separators=(",", ":"))).hexdigest().
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "tensorhub/core/error.h"
#include "tensorhub/data/tfrecord.h"
#include "tensorhub/hparams/plugin_data.pb.h"
#include "tensorhub/store/hub.h"
#include "tensorhub/summary/event_file_reader.h"
#include "tensorhub/tf/event.pb.h"
#include "tensorhub/train/callbacks.h"
#include "tensorhub/train/spec.h"
#include "test_util.h"
#include "train_test_data.h"

namespace tensorhub {
namespace {

namespace fs = std::filesystem;
namespace hpb = ::tensorhub::hparams;
using json = nlohmann::json;
using testing::separable;
using testing::quiet;
using testing::TempDir;

json classifier() {
  return {{"input_shape", {4}},
          {"layers", {{{"type", "Dense"}, {"units", 8}, {"activation", "relu"}}, {{"type", "Dense"}, {"units", 2}}}},
          {"optimizer", {{"type", "Adam"}, {"learning_rate", 0.01}}},
          {"seed", 3}};
}

// The event files directly in `dir` (not its sub-directories), sorted by name.
std::vector<fs::path> event_files(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename().string().find("tfevents") != std::string::npos)
      out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// Every hparams plugin record of the event files directly in `dir`, with its tag.
std::vector<std::pair<std::string, hpb::HParamsPluginData>> hparams_records(const fs::path& dir) {
  std::vector<std::pair<std::string, hpb::HParamsPluginData>> out;
  for (const fs::path& f : event_files(dir)) {
    for (const std::string& record : read_tfrecord_file(f)) {
      tf::Event ev;
      EXPECT_TRUE(ev.ParseFromString(record)) << f;
      if (!ev.has_summary()) continue;
      for (const auto& v : ev.summary().value()) {
        if (v.metadata().plugin_data().plugin_name() != "hparams") continue;
        EXPECT_EQ(ev.step(), 0);
        hpb::HParamsPluginData d;
        EXPECT_TRUE(d.ParseFromString(v.metadata().plugin_data().content())) << v.tag();
        EXPECT_EQ(d.version(), 0);
        out.emplace_back(v.tag(), d);
      }
    }
  }
  return out;
}

// The scalar tags of the event files directly in `dir`.
std::set<std::string> scalar_tags(const fs::path& dir) {
  std::set<std::string> out;
  for (const fs::path& f : event_files(dir))
    for (const std::string& record : read_tfrecord_file(f)) {
      tf::Event ev;
      EXPECT_TRUE(ev.ParseFromString(record));
      for (const auto& v : ev.summary().value())
        if (v.value_case() == tf::Summary::Value::kSimpleValue) out.insert(v.tag());
    }
  return out;
}

// One session's records: start then end, in log_dir itself.
void expect_session(const fs::path& log_dir, const json& hparams, const std::string& group,
                    hpb::Status status) {
  const auto records = hparams_records(log_dir);
  ASSERT_EQ(records.size(), 2u) << log_dir;
  ASSERT_EQ(records[0].first, "_hparams_/session_start_info");
  ASSERT_TRUE(records[0].second.has_session_start_info());
  const hpb::SessionStartInfo& s = records[0].second.session_start_info();
  EXPECT_EQ(s.group_name(), group);
  EXPECT_GT(s.start_time_secs(), 1.7e9);
  ASSERT_EQ(s.hparams().size(), hparams.size());
  for (const auto& [name, v] : hparams.items()) {
    ASSERT_TRUE(s.hparams().contains(name)) << name;
    const google::protobuf::Value& got = s.hparams().at(name);
    if (v.is_boolean()) {
      ASSERT_EQ(got.kind_case(), google::protobuf::Value::kBoolValue) << name;
      EXPECT_EQ(got.bool_value(), v.get<bool>());
    } else if (v.is_number()) {
      ASSERT_EQ(got.kind_case(), google::protobuf::Value::kNumberValue) << name;
      EXPECT_EQ(got.number_value(), v.get<double>());
    } else {
      ASSERT_EQ(got.kind_case(), google::protobuf::Value::kStringValue) << name;
      EXPECT_EQ(got.string_value(), v.get<std::string>());
    }
  }
  ASSERT_EQ(records[1].first, "_hparams_/session_end_info");
  ASSERT_TRUE(records[1].second.has_session_end_info());
  EXPECT_EQ(records[1].second.session_end_info().status(), status);
  EXPECT_GE(records[1].second.session_end_info().end_time_secs(), s.start_time_secs());
}

const json kHpA = {{"units", 16}, {"learning_rate", 0.01}, {"optimizer", "adam"}, {"dropout", true}};
const json kHpB = {{"units", 32}, {"learning_rate", 0.001}, {"optimizer", "sgd"}, {"dropout", false}};
// python3: json.dumps(kHpA / kHpB, sort_keys=True, separators=(",", ":")), then sha256.
const char* kGroupA = "98cc32823dac71f231a4c287f9603f732d01f83c888d92a7d0b53751f81539c7";
const char* kGroupB = "cf97f91c0f386823786b24b901ee8298c51db67f310525864a0a9d473e9ed7a0";

// Without domains or metrics no experiment summary: TensorBoard's hparams plugin then builds
// the experiment from every session's start info (backend_context.py
// _compute_experiment_from_runs), so a later run's new keys show too (tests/python/
// test_tensorboard.py checks that with TensorBoard itself), and its metrics from the scalars of
// the sessions' runs.
TEST(TensorBoardHParams, TwoRunsWriteTheirSessionsAndNoExperimentSummary) {
  TempDir dir;
  Tensor x, y, xv, yv;
  separable(12, 1, x, y);
  separable(6, 2, xv, yv);
  const fs::path root = dir / "hparam_tuning";
  for (const auto& [run, hp] : {std::pair{"run-0", kHpA}, std::pair{"run-1", kHpB}}) {
    Model model = Model::from_config(classifier());
    TensorBoardOptions to;
    to.log_dir = (root / run).string();
    to.hparams = hp;
    auto tb = std::make_shared<TensorBoard>(to);
    FitOptions o = quiet(2);
    o.callbacks = {tb};
    model.fit(x, y, o, &xv, &yv);
  }
  expect_session(root / "run-0", kHpA, kGroupA, hpb::STATUS_SUCCESS);
  expect_session(root / "run-1", kHpB, kGroupB, hpb::STATUS_SUCCESS);
  EXPECT_TRUE(event_files(root).empty());
  for (const char* run : {"run-0", "run-1"}) {
    EXPECT_TRUE(scalar_tags(root / run / "train").contains("epoch_loss")) << run;
    EXPECT_TRUE(scalar_tags(root / run / "validation").contains("epoch_accuracy")) << run;
  }
}

// An explicit experiment config (domains) is written; a later run's new key and metrics join
// it: one file, the union, first run's entries as they were.
TEST(TensorBoardHParams, ALaterRunsNewKeysJoinTheExperimentSummary) {
  TempDir dir;
  Tensor x, y, xv, yv;
  separable(12, 1, x, y);
  separable(6, 2, xv, yv);
  const fs::path root = dir / "exp";
  auto fit = [&](const char* run, const json& hp, std::vector<HParam> domains, bool validation) {
    Model model = Model::from_config(classifier());
    TensorBoardOptions to;
    to.log_dir = (root / run).string();
    to.hparams = hp;
    to.hparam_domains = std::move(domains);
    FitOptions o = quiet(1);
    o.callbacks = {std::make_shared<TensorBoard>(to)};
    if (validation)
      model.fit(x, y, o, &xv, &yv);
    else
      model.fit(x, y, o);
  };
  fit("a", {{"units", 8}}, {{.name = "units", .values = {8, 16}}}, false);
  ASSERT_EQ(event_files(root).size(), 1u);
  fit("b", {{"units", 16}, {"dropout", true}}, {}, true);
  const auto files = event_files(root);
  ASSERT_EQ(files.size(), 1u);
  // Named *.hparams_experiment, with ".1" when the first run's file of the same second
  // and process was still there.
  EXPECT_NE(files[0].filename().string().find(".hparams_experiment"), std::string::npos) << files[0];
  const auto records = hparams_records(root);
  ASSERT_EQ(records.size(), 1u);
  const hpb::Experiment& e = records[0].second.experiment();
  ASSERT_EQ(e.hparam_infos_size(), 2);
  EXPECT_EQ(e.hparam_infos(0).name(), "units");
  EXPECT_EQ(e.hparam_infos(0).domain_discrete().values_size(), 2);  // run a's domain kept
  EXPECT_EQ(e.hparam_infos(1).name(), "dropout");
  std::set<std::string> metrics;
  for (const auto& m : e.metric_infos()) metrics.insert(m.name().group() + "/" + m.name().tag());
  EXPECT_EQ(metrics, (std::set<std::string>{"train/epoch_accuracy", "train/epoch_loss", "validation/epoch_accuracy",
                                            "validation/epoch_loss"}));
  // A third run with nothing new rewrites nothing.
  fit("c", {{"units", 8}}, {}, false);
  EXPECT_EQ(event_files(root), files);
}

TEST(TensorBoardHParams, DomainsMetricsTrialIdAndExperimentDirAsGiven) {
  TempDir dir;
  Tensor x, y;
  separable(8, 1, x, y);
  Model model = Model::from_config(classifier());
  TensorBoardOptions to;
  to.log_dir = (dir / "logs" / "a").string();
  to.hparams = {{"units", 8}, {"optimizer", "adam"}};
  to.trial_id = "trial-7";
  to.hparam_domains = {{.name = "units", .values = {8, 16, 32}},
                       {.name = "learning_rate", .interval = HParamInterval{1e-4, 1e-1}}};
  to.hparam_metrics = {{.tag = "epoch_loss", .group = "validation", .dataset_type = DatasetType::kValidation}};
  to.hparams_experiment_dir = (dir / "elsewhere").string();
  FitOptions o = quiet(1);
  o.callbacks = {std::make_shared<TensorBoard>(to)};
  model.fit(x, y, o);
  expect_session(dir / "logs" / "a", to.hparams, "trial-7", hpb::STATUS_SUCCESS);
  EXPECT_TRUE(event_files(dir / "logs").empty());
  const auto records = hparams_records(dir / "elsewhere");
  ASSERT_EQ(records.size(), 1u);
  const hpb::Experiment& e = records[0].second.experiment();
  ASSERT_EQ(e.hparam_infos_size(), 3);
  EXPECT_EQ(e.hparam_infos(0).name(), "optimizer");  // no domain given
  EXPECT_EQ(e.hparam_infos(0).type(), hpb::DATA_TYPE_UNSET);
  EXPECT_EQ(e.hparam_infos(1).name(), "units");
  EXPECT_EQ(e.hparam_infos(1).type(), hpb::DATA_TYPE_FLOAT64);
  ASSERT_EQ(e.hparam_infos(1).domain_discrete().values_size(), 3);
  EXPECT_EQ(e.hparam_infos(1).domain_discrete().values(2).number_value(), 32);
  EXPECT_EQ(e.hparam_infos(2).name(), "learning_rate");  // a domain for a value this run lacks
  EXPECT_EQ(e.hparam_infos(2).domain_interval().max_value(), 1e-1);
  ASSERT_EQ(e.metric_infos_size(), 1);
  EXPECT_EQ(e.metric_infos(0).name().group(), "validation");
  EXPECT_EQ(e.metric_infos(0).dataset_type(), hpb::DATASET_VALIDATION);
}

// What the session tests share: `n` separable examples, a fresh classifier, and TensorBoard
// options writing to <dir>/<log_dir>.
struct SessionRun {
  explicit SessionRun(int n, const fs::path& log_dir = "run") {
    separable(n, 1, x, y);
    to.log_dir = (dir / log_dir).string();
  }
  TempDir dir;
  Tensor x, y;
  Model model = Model::from_config(classifier());
  TensorBoardOptions to;
};

TEST(TensorBoardHParams, NaNLossStoppedByTerminateOnNaNIsAFailure) {
  SessionRun run(12);
  auto& [dir, x, y, model, to] = run;
  reinterpret_cast<float*>(x.data.data())[4 * 9 + 1] = NAN;  // example 9: batch 2 unshuffled
  to.hparams = {{"units", 8}};
  FitOptions o = quiet(3);
  o.shuffle = false;
  o.callbacks = {std::make_shared<TensorBoard>(to), std::make_shared<TerminateOnNaN>()};
  ::testing::internal::CaptureStderr();
  model.fit(x, y, o);
  ::testing::internal::GetCapturedStderr();
  // python3: sha256(b'{"units":8}')
  expect_session(dir / "run", to.hparams, "f9442c059f992413e9a744f0943d261ad08044e5232667f07a7ae4f1f17cd95e",
                 hpb::STATUS_FAILURE);
}

TEST(TensorBoardHParams, FitThatThrowsEndsTheSessionAsAFailure) {
  SessionRun run(8);
  auto& [dir, x, y, model, to] = run;
  to.hparams = {{"name", "caf\xc3\xa9"}, {"layers", "[1,2]"}, {"units", 8}, {"learning_rate", 0.01}};
  auto boom = std::make_shared<LambdaCallback>();
  boom->epoch_end = [](int, Logs&) { throw Unavailable("disk gone"); };
  {
    FitOptions o = quiet(2);
    o.callbacks = {std::make_shared<TensorBoard>(to), boom};
    testing::expect_error([&] { model.fit(x, y, o); }, ErrorKind::kUnavailable, {"disk gone"});
  }  // the TensorBoard is destroyed here, its session never ended by on_train_end
  // python3: json.dumps escapes "é" as \u00e9 before hashing.
  expect_session(dir / "run", to.hparams, "dbfa0f05e45e7610b1bc31197b9bcf8f9fcf47205bd0f37bcac42fd216f6bcbd",
                 hpb::STATUS_FAILURE);
}

TEST(TensorBoardHParams, NoHParamsNoRecordsAndBadValuesAreRefused) {
  SessionRun run(8, fs::path("logs") / "run");
  auto& [dir, x, y, model, to] = run;
  FitOptions o = quiet(1);
  o.callbacks = {std::make_shared<TensorBoard>(to)};
  model.fit(x, y, o);
  EXPECT_TRUE(event_files(dir / "logs" / "run").empty());
  EXPECT_TRUE(event_files(dir / "logs").empty());

  to.hparams = {{"layers", {1, 2}}};
  testing::expect_error([&] { TensorBoard tb(to); }, ErrorKind::kInvalidArgument,
                        {"TensorBoardOptions.hparams[\"layers\"]", "a number, a boolean or a string"});
  to.hparams = json::array({1});
  testing::expect_error([&] { TensorBoard tb(to); }, ErrorKind::kInvalidArgument, {"must be a JSON object"});
  to.hparams = {{"units", 8}};
  to.hparam_domains = {{.name = "units"}, {.name = "units"}};
  testing::expect_error([&] { TensorBoard tb(to); }, ErrorKind::kInvalidArgument, {"hparam_domains", "\"units\" twice"});
}

// ---- spec tasks --------------------------------------------------------------------------------

class TensorBoardSpec : public ::testing::Test {
 protected:
  TempDir dir;
  Hub hub{"sqlite://" + (dir.path() / "hub.db").string(), "spec"};

  void SetUp() override {
    NamedTensors t;
    separable(64, 1, t["X_train"], t["y_train"]);
    separable(16, 2, t["X_val"], t["y_val"]);
    hub.save_dataset(t, "separable");
  }

  json spec(const json& tensorboard) const {
    json model = classifier();
    model["layers"][0]["units"] = "${units}";
    return {{"model", model},
            {"data", {{"dataset", "separable"}, {"validation", {{"x", "X_val"}, {"y", "y_val"}}}}},
            {"fit", {{"batch_size", 16}, {"epochs", 1}, {"seed", 7}, {"verbose", 0}}},
            {"callbacks", json::array({tensorboard})},
            {"save_model", false}};
  }
};

TEST_F(TensorBoardSpec, TaskHyperparametersBecomeTheSessionsHParams) {
  const json hp = {{"units", 8}, {"learning_rate", 0.01}, {"layers", {1, 2}}, {"name", "caf\xc3\xa9"}, {"note", nullptr}};
  const fs::path log_dir = dir / "tb" / "units-8";
  run_train_spec(parse_train_spec(spec({{"type", "TensorBoard"}, {"log_dir", log_dir.string()}}), hp), hub);
  // Lists as their JSON text, nulls left out; the group is the hash of these (python3).
  const json want = {{"units", 8}, {"learning_rate", 0.01}, {"layers", "[1,2]"}, {"name", "caf\xc3\xa9"}};
  expect_session(log_dir, want, "dbfa0f05e45e7610b1bc31197b9bcf8f9fcf47205bd0f37bcac42fd216f6bcbd",
                 hpb::STATUS_SUCCESS);
  // No experiment summary: TensorBoard builds it from the sessions (see callbacks.h).
  EXPECT_TRUE(event_files(dir / "tb").empty());
}

TEST_F(TensorBoardSpec, GraphAndEmbeddingOptions) {
  const fs::path a = dir / "tb" / "a";
  run_train_spec(parse_train_spec(spec({{"type", "TensorBoard"}, {"log_dir", a.string()}, {"write_graph", false},
                                        {"embeddings_freq", 1}}),
                                  {{"units", 8}}),
                 hub);
  EXPECT_TRUE(read_run_events(a / "train").keras_models.empty());
  EXPECT_FALSE(fs::exists(a / "train" / "projector_config.pbtxt"));  // no Embedding layer
  testing::expect_error(
      [&] { parse_train_spec(spec({{"type", "TensorBoard"}, {"embeddings_metadata", 3}}), {{"units", 8}}); },
      ErrorKind::kInvalidArgument, {"spec.callbacks[0].embeddings_metadata", "a metadata file's path"});
  testing::expect_error(
      [&] { parse_train_spec(spec({{"type", "TensorBoard"}, {"embeddings_freq", -2}}), {{"units", 8}}); },
      ErrorKind::kInvalidArgument, {"embeddings_freq"});
}

TEST_F(TensorBoardSpec, HParamsGivenBySpecOrSwitchedOff) {
  const fs::path a = dir / "tb" / "a", b = dir / "tb" / "b";
  const json hp = {{"units", 8}};
  run_train_spec(parse_train_spec(spec({{"type", "TensorBoard"},
                                        {"log_dir", a.string()},
                                        {"hparams", {{"units", 8}, {"arch", "mlp"}}},
                                        {"trial_id", "t1"}}),
                                  hp),
                 hub);
  expect_session(a, {{"units", 8}, {"arch", "mlp"}}, "t1", hpb::STATUS_SUCCESS);
  run_train_spec(parse_train_spec(spec({{"type", "TensorBoard"}, {"log_dir", b.string()}, {"hparams", false}}), hp),
                 hub);
  EXPECT_TRUE(event_files(b).empty());
  testing::expect_error(
      [&] { parse_train_spec(spec({{"type", "TensorBoard"}, {"hparams", {{"units", {1}}}}}), hp); },
      ErrorKind::kInvalidArgument, {"spec.callbacks[0].hparams", "\"units\""});
}

}  // namespace
}  // namespace tensorhub
