// Spec tasks end to end: a real `tensorhub runner` process claims a declarative training job
// from the queue, trains it with `tensorhub train-spec`, and the task finishes with its results,
// per-epoch reports in the trials collection and a saved model.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <random>

#include "tensorhub/queue/task_queue.h"
#include "tensorhub/store/hub.h"
#include "tensorhub/queue/epoch_report.h"
#include "process_util.h"
#include "test_util.h"

namespace tensorhub {
namespace {

using namespace testing;

// n points of [-1, 1]^2 labelled by x0 + x1 > 0, at least 0.2 from the boundary.
void two_classes(std::int64_t n, std::uint32_t seed, Tensor& x, Tensor& y) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> xs;
  std::vector<std::int64_t> ys;
  while (static_cast<std::int64_t>(ys.size()) < n) {
    const float a = u(rng), b = u(rng);
    if (std::abs(a + b) < 0.2f) continue;
    xs.insert(xs.end(), {a, b});
    ys.push_back(a + b > 0 ? 1 : 0);
  }
  x = Tensor::from<float>(DType::kF32, {n, 2}, xs);
  y = Tensor::from<std::int64_t>(DType::kI64, {n}, ys);
}

class SpecTaskProcessTest : public ::testing::Test, public SqliteHubFiles {
 protected:

  void SetUp() override {
    NamedTensors t;
    two_classes(200, 1, t["X_train"], t["y_train"]);
    two_classes(100, 2, t["X_test"], t["y_test"]);
    hub.save_dataset(t, "plane");
  }

  TaskSpec spec_task() {
    TaskSpec s;
    s.task_name = "spec";
    s.train_spec = {{"model", {{"name", "tiny"},
                         {"input_shape", {2}},
                         {"layers", {{{"type", "Dense"}, {"units", "${units}"}, {"activation", "relu"}},
                                     {{"type", "Dense"}, {"units", 2}}}},
                         {"optimizer", {{"type", "Adam"}, {"learning_rate", 0.05}}},
                         {"seed", 1}}},
              {"data", {{"dataset", "plane"}, {"test", {{"x", "X_test"}, {"y", "y_test"}}}}},
              {"fit", {{"batch_size", 20}, {"epochs", "${epochs}"}, {"seed", 1}, {"verbose", 2}}}};
    s.hyper_parameters = {{"units", 8}, {"epochs", 3}};
    s.saved_result_keys = {"test_accuracy", "model_id"};
    s.max_attempts = 1;
    return s;
  }

  std::vector<std::string> runner(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {kTensorhub, "runner", "--hub", uri, "--project", "p", "--task-name", "spec",
                                     "--poll", "0.05", "--exit-when-idle", "0.5", "--threads", "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }
};

TEST_F(SpecTaskProcessTest, RunnerTrainsASpecTaskAndSavesTheModel) {
  const auto id = queue.create_task(spec_task());
  EXPECT_EQ(wait_exit(spawn(runner(), log)), 0) << read_text(log);

  const Task t = queue.get_task(id);
  ASSERT_EQ(t.status, TaskStatus::kFinished) << t.error << "\n" << t.log_tail << "\n" << read_text(log);
  EXPECT_EQ(t.result["epochs"], 3);
  EXPECT_EQ(t.result["history"].size(), 3u);
  EXPECT_GT(t.result["test_accuracy"].get<double>(), 0.9);  // a margin-separated plane

  const auto models = hub.find_models({{"id", t.result["model_id"]}});
  ASSERT_EQ(models.size(), 1u);
  EXPECT_EQ(models[0].tags["model_name"], "tiny");
  EXPECT_EQ(models[0].tags["task_id"], id);
  EXPECT_EQ(models[0].tags["hyper_parameters"], Json({{"units", 8}, {"epochs", 3}}));
  EXPECT_EQ(hub.load_model(hub.find_models({{"id", t.result["model_id"]}})[0]).architecture["layers"][0]["units"], 8);

  // Each epoch was reported live, in order.
  const auto trials = hub.find_documents(kEpochReports, {{"kind", "epoch"}, {"task_id", id}});
  ASSERT_EQ(trials.size(), 3u);
  for (int e = 0; e < 3; ++e) {
    EXPECT_EQ(trials[e].tags["epoch"], e);
    EXPECT_EQ(trials[e].tags["logs"]["loss"], t.result["history"][e]["loss"]);
  }
}

TEST_F(SpecTaskProcessTest, ABadSpecFailsTheTaskWithTheParseError) {
  TaskSpec s = spec_task();
  s.train_spec["fit"]["epoch"] = 3;
  const auto id = queue.create_task(s);
  EXPECT_EQ(wait_exit(spawn(runner(), log)), 0) << read_text(log);
  const Task t = queue.get_task(id);
  EXPECT_EQ(t.status, TaskStatus::kFailed);
  EXPECT_NE(t.log_tail.find("spec.fit: unknown field \"epoch\""), std::string::npos) << t.log_tail;
}

// A runner given a trainer that does not exist refuses to start (issue 15) instead of failing
// every spec task it would claim; the task stays on the queue for a runner that can train it.
TEST_F(SpecTaskProcessTest, RunnerWithoutATrainerRefusesToStartAndSaysHowToFixIt) {
  const auto id = queue.create_task(spec_task());
  const auto missing = (dir.path() / "no-such-tensorhub").string();
  EXPECT_NE(wait_exit(spawn(runner({"--trainer", missing, "train-spec"}), log)), 0) << read_text(log);
  const std::string out = read_text(log);
  EXPECT_NE(out.find(missing + " is not an executable file"), std::string::npos) << out;
  EXPECT_NE(out.find("--trainer"), std::string::npos) << out;
  EXPECT_EQ(queue.get_task(id).status, TaskStatus::kPending);
}

// Hyperband over spec trials, with Keras Tuner's schedule for max_epochs 3, factor 3: bracket 1
// runs 3 trials for 1 epoch and promotes the best to epoch 3; bracket 0 runs 2 trials for 3
// epochs. 6 trials, 3 x 1 + 1 x 2 + 2 x 3 = 11 epochs trained: the promoted trial resumes from
// its parent's saved model (weights, optimizer state, epoch) instead of starting again.
TEST_F(SpecTaskProcessTest, HyperbandPromotesATrialThatResumesFromItsParentsModel) {
  NamedTensors t;
  two_classes(200, 1, t["X_train"], t["y_train"]);
  two_classes(100, 3, t["X_val"], t["y_val"]);
  hub.save_dataset(t, "plane_val");
  TaskSpec base = spec_task();
  base.train_spec["data"] = {{"dataset", "plane_val"}, {"validation", {{"x", "X_val"}, {"y", "y_val"}}}};
  base.train_spec["fit"].erase("epochs");
  base.train_spec["model"]["optimizer"]["learning_rate"] = "${learning_rate}";
  const auto spec_file = (dir.path() / "spec.json").string();
  const auto space_file = (dir.path() / "space.json").string();
  std::ofstream(spec_file) << base.train_spec.dump();
  std::ofstream(space_file) << R"([{"name": "units", "type": "Choice", "values": [2, 4, 8]},
                                   {"name": "learning_rate", "type": "Choice", "values": [0.05, 0.01]}])";

  const pid_t runner_pid = spawn({kTensorhub, "runner", "--hub", uri, "--project", "p", "--task-name", "trial",
                                  "--poll", "0.05", "--exit-when-idle", "5", "--threads", "1"}, log);
  const pid_t tuner = spawn({kTensorhub, "tune", "--hub", uri, "--project", "p", "--name", "hb", "--space", space_file,
                             "--spec", spec_file, "--oracle", "hyperband", "--objective", "val_accuracy",
                             "--max-epochs", "3", "--factor", "3", "--seed", "5", "--poll", "0.05", "--json"},
                            log);
  ASSERT_EQ(wait_exit(tuner), 0) << read_text(log);
  kill(runner_pid, SIGTERM);
  wait_exit(runner_pid);

  const auto tasks = queue.find_tasks({{"search", "hb"}});
  ASSERT_EQ(tasks.size(), 6u) << read_text(log);
  std::map<std::string, Task> by_trial;
  int epochs_trained = 0, promoted = 0;
  for (const auto& task : tasks) {
    ASSERT_EQ(task.status, TaskStatus::kFinished) << task.error << "\n" << task.log_tail;
    by_trial[task.spec.tags["trial_id"].get<std::string>()] = task;
    epochs_trained += static_cast<int>(task.result["history"].size());
    // Each trial saves its best epoch's model by the objective (Keras Tuner's rule).
    EXPECT_EQ(task.spec.train_spec["save_model"]["monitor"], "val_accuracy");
    EXPECT_EQ(task.spec.train_spec["save_model"]["mode"], "max");
    EXPECT_TRUE(task.result.contains("best_epoch")) << task.result.dump();
  }
  EXPECT_EQ(epochs_trained, 11);
  for (const auto& [id, task] : by_trial) {
    const Json& hp = task.spec.hyper_parameters;
    if (!hp.contains("tuner/trial_id")) continue;
    ++promoted;
    const Task& parent = by_trial.at(hp["tuner/trial_id"].get<std::string>());
    EXPECT_EQ(task.spec.train_spec["initial_model"], Json({{"model_id", parent.result["model_id"]}}));
    EXPECT_EQ(task.spec.train_spec["fit"]["initial_epoch"], 1);
    EXPECT_EQ(task.result["epochs"], 3);  // epochs completed by the model: 1 inherited + 2
    EXPECT_EQ(task.result["history"].size(), 2u);
    // The parent was the best of its round of three 1-epoch trials.
    for (const auto& [other_id, other] : by_trial) {
      const Json& ohp = other.spec.hyper_parameters;
      if (ohp["tuner/bracket"] == hp["tuner/bracket"] && ohp["tuner/round"] == 0)
        EXPECT_GE(parent.result["val_accuracy"].get<double>(), other.result["val_accuracy"].get<double>());
    }
  }
  EXPECT_EQ(promoted, 1);
  // One epoch report per trained epoch, for the tuner to watch.
  EXPECT_EQ(hub.find_documents(kEpochReports, {{"kind", "epoch"}}).size(), 11u);
}

}  // namespace
}  // namespace tensorhub
