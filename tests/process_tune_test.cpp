// `tensorhub tune` and `tensorhub runner` as real processes on one SQLite hub, killed with
// SIGKILL mid-search: trials are retried, the search resumes (a killed tuner's search once its
// lease expired, a second tuner being refused before), no trial runs twice.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "process_util.h"
#include "tensorhub/queue/task_queue.h"
#include "tensorhub/store/hub.h"
#include "test_util.h"

namespace tensorhub {
namespace {

using namespace std::chrono_literals;
using namespace testing;

class TuneProcessTest : public ::testing::Test, public SqliteHubPaths {
 protected:
  std::string space = (dir.path() / "space.json").string();
  std::string starts = (dir.path() / "starts").string();

  void SetUp() override {
    std::ofstream(space) << R"([{"name": "x", "type": "Int", "min_value": 1, "max_value": 3},
                               {"name": "opt", "type": "Choice", "values": ["adam", "sgd"]}])";
  }

  // A trial that records its start, runs for a while, and reports loss = (x - 2)^2 + [opt == sgd].
  std::vector<std::string> tune_args(const std::string& seconds) {
    return {kTensorhub, "tune", "--hub", uri, "--project", "p", "--name", "grid", "--space", space,
            "--oracle", "grid", "--objective", "loss", "--max-retries", "2", "--poll", "0.05", "--json",
            "--", "/bin/sh", "-c",
            // Inside sh -c the values come from the environment: a placeholder there is refused.
            "echo \"$TENSORHUB_HP_x$TENSORHUB_HP_opt\" >> " + starts + "; sleep " + seconds +
                "; awk -v x=\"$TENSORHUB_HP_x\" -v opt=\"$TENSORHUB_HP_opt\" "
                "'BEGIN { printf \"{\\\"loss\\\": %g}\", (x - 2) ^ 2 + (opt == \"sgd\") }' "
                "> \"$TENSORHUB_RESULT_FILE\""};
  }
  std::vector<std::string> runner_args(const std::string& lease) {
    return {kTensorhub, "runner", "--hub", uri, "--project", "p", "--task-name", "trial", "--slots", "2",
            "--lease", lease, "--poll", "0.05", "--exit-when-idle", "3"};
  }

  std::vector<Task> trial_tasks() {
    Hub hub(uri, "p");
    return TaskQueue(hub).find_tasks({{"search", "grid"}});
  }

  void expect_six_distinct_finished_trials() {
    const auto tasks = trial_tasks();
    EXPECT_EQ(tasks.size(), 6u);
    std::set<std::string> ids, points;
    for (const auto& t : tasks) {
      EXPECT_EQ(t.status, TaskStatus::kFinished) << t.error;
      ids.insert(t.spec.tags.at("trial_id").get<std::string>());
      points.insert(t.spec.hyper_parameters.dump());
    }
    EXPECT_EQ(ids.size(), 6u);
    EXPECT_EQ(points.size(), 6u);
  }
};

TEST_F(TuneProcessTest, ARunnerKilledMidTrialLeavesTheTrialToBeRetried) {
  const pid_t tuner = spawn(tune_args("1"), log);
  const pid_t first = spawn(runner_args("1"), log);
  ASSERT_TRUE(eventually([&] { return read_lines(starts).size() >= 1; })) << read_text(log);
  kill(first, SIGKILL);
  EXPECT_EQ(wait_exit(first), 128 + SIGKILL);
  const pid_t second = spawn(runner_args("1"), log);
  EXPECT_EQ(wait_exit(tuner), 0) << read_text(log);
  kill(second, SIGTERM);
  wait_exit(second);

  expect_six_distinct_finished_trials();
  int retried = 0;
  for (const auto& t : trial_tasks()) retried += t.attempt > 1;
  EXPECT_GE(retried, 1);  // the killed runner's trials ran again
  // Each grid point started once, plus once more for every trial the killed runner held.
  EXPECT_EQ(read_lines(starts).size(), 6u + retried);
  const std::string summary = run_command(kTensorhub + " tune results --hub " + uri + " --project p --name grid --json");
  const auto j = nlohmann::json::parse(summary);
  EXPECT_TRUE(j.at("done").get<bool>());
  EXPECT_EQ(j.at("best").at("hyper_parameters"), (nlohmann::json{{"x", 2}, {"opt", "adam"}}));
  EXPECT_EQ(j.at("best").at("score"), 0.0);
}

TEST_F(TuneProcessTest, ATunerKilledAndRestartedCompletesWithoutDuplicateTrials) {
  const pid_t runner = spawn(runner_args("30"), log);
  auto with_lease = [&](const std::string& lease) {
    auto args = tune_args("0.5");
    args.insert(args.begin() + 2, {"--lease", lease});
    return args;
  };
  // The dead tuner's lease must outlive the refused tuner's start-up (libtorch's load, seconds
  // on a loaded machine): 8 s.
  const pid_t first = spawn(with_lease("8"), log);
  ASSERT_TRUE(eventually([&] { return trial_tasks().size() >= 3; })) << read_text(log);
  kill(first, SIGKILL);
  EXPECT_EQ(wait_exit(first), 128 + SIGKILL);
  // One tuner per search: while the dead tuner's lease runs, another is refused, naming it.
  const std::string refused_log = (dir.path() / "refused.log").string();
  EXPECT_EQ(wait_exit(spawn(with_lease("3"), refused_log)), 1);
  EXPECT_NE(read_text(refused_log).find("is being run by another tuner (host "), std::string::npos)
      << read_text(refused_log);
  EXPECT_NE(read_text(refused_log).find(", pid " + std::to_string(first) + ", tuner "), std::string::npos)
      << read_text(refused_log);
  // Once it expired (8 s after the kill at most), a new tuner resumes the search (with a new
  // runner: the first one may have left, idle, meanwhile).
  std::this_thread::sleep_for(std::chrono::seconds(9));
  const pid_t runner2 = spawn(runner_args("30"), log);
  const pid_t second = spawn(with_lease("3"), log);
  EXPECT_EQ(wait_exit(second), 0) << read_text(log);
  for (pid_t r : {runner, runner2}) {
    kill(r, SIGTERM);
    wait_exit(r);
  }

  expect_six_distinct_finished_trials();
  EXPECT_EQ(read_lines(starts).size(), 6u);  // no trial ran twice
}

// The score is the objective's best epoch (Keras Tuner's rule); the model a trial saves is its
// last epoch's: the summary says so when the two differ, with the saved model's own value.
TEST_F(TuneProcessTest, TheSummarySaysWhenTheBestModelIsNotTheBestEpochs) {
  const std::string one = (dir.path() / "one.json").string();
  std::ofstream(one) << R"([{"name": "x", "type": "Int", "min_value": 1, "max_value": 1}])";
  const std::string result = R"({"loss": 0.4, "model_id": 7, "history": [{"loss": 0.5}, {"loss": 0.3}, {"loss": 0.4}]})";
  const pid_t runner = spawn(runner_args("30"), log);
  const std::string out = (dir.path() / "tune.out").string();
  const pid_t tuner = spawn({kTensorhub, "tune", "--hub", uri, "--project", "p", "--name", "best", "--space", one,
                             "--oracle", "grid", "--objective", "loss", "--poll", "0.05", "--", "/bin/sh", "-c",
                             "echo '" + result + "' > \"$TENSORHUB_RESULT_FILE\""},
                            out);
  EXPECT_EQ(wait_exit(tuner), 0) << read_text(out);
  wait_exit(runner);
  const std::string text = read_text(out);
  EXPECT_NE(text.find("best trial 0000: loss = 0.3"), std::string::npos) << text;
  EXPECT_NE(text.find("model: id 7 (saved after the trial's last epoch, 3, with loss = 0.4; the score is epoch 2's)"),
            std::string::npos)
      << text;
}

// `tensorhub tune --pruner median` with Optuna's flags, trial curves as in TunerPruningTest
// (tune_pruner_test.cpp, where the rule's arithmetic is written out): trials 0002 and 0004
// are pruned, at epochs 1 and 3; `tune results --json` shows them so. A pruner with an oracle
// that stops trials by its own schedule is a usage error.
TEST_F(TuneProcessTest, MedianPruningFromTheCommandLinePrunesTheTrialsTheRuleNames) {
  const std::string curves = (dir.path() / "curves.json").string();
  std::ofstream(curves) << R"([{"name": "curve", "type": "Choice", "values": ["1.0,0.8,0.6,0.5,0.4",
      "1.2,0.9,0.7,0.6,0.5", "1.5,1.4,1.3,1.2,1.1", "3.0,0.5,0.4,0.3,0.2", "0.9,0.7,0.6,0.6,0.6"]}])";
  const std::vector<std::string> tune = {
      kTensorhub, "tune", "--hub", uri, "--project", "p", "--name", "pruned", "--space", curves, "--oracle", "grid",
      "--objective", "val_loss", "--parallel", "1", "--poll", "0.05", "--pruner", "median", "--n-startup-trials", "2",
      "--n-warmup-steps", "1", "--json", "--", "/bin/sh", "-c",
      "e=0; for v in $(echo \"$TENSORHUB_HP_curve\" | tr , ' '); do " + kTensorhub +
          " task report-epoch --epoch $e --logs \"{\\\"val_loss\\\": $v}\" || exit 1; e=$((e + 1)); sleep 0.3; done; "
          "echo \"{\\\"val_loss\\\": $v}\" > \"$TENSORHUB_RESULT_FILE\""};
  const pid_t runner = spawn({kTensorhub, "runner", "--hub", uri, "--project", "p", "--task-name", "trial", "--lease",
                              "0.6", "--poll", "0.05", "--exit-when-idle", "3"},
                             log);
  const std::string out = (dir.path() / "tune.out").string();
  EXPECT_EQ(wait_exit(spawn(tune, out)), 0) << read_text(out) << read_text(log);
  wait_exit(runner);
  const Json results = Json::parse(run_command(kTensorhub + " tune results --hub " + uri + " --project p --name pruned --json"));
  std::map<std::string, std::string> status;
  std::map<std::string, int> last_epoch;
  for (const auto& t : results.at("trials")) {
    status[t["trial_id"]] = t["status"];
    for (const auto& [epoch, value] : t["epoch_values"].items())
      last_epoch[t["trial_id"]] = std::max(last_epoch[t["trial_id"]], std::stoi(epoch));
  }
  EXPECT_EQ(status, (std::map<std::string, std::string>{{"0000", "completed"}, {"0001", "completed"}, {"0002", "pruned"},
                                                        {"0003", "completed"}, {"0004", "pruned"}}));
  EXPECT_EQ(last_epoch["0002"], 1);
  EXPECT_EQ(last_epoch["0004"], 3);
  EXPECT_EQ(results["best"]["trial_id"], "0003");

  const std::string refused = (dir.path() / "refused.out").string();
  EXPECT_EQ(wait_exit(spawn({kTensorhub, "tune", "--hub", uri, "--project", "p", "--name", "x", "--space", curves,
                             "--oracle", "asha", "--pruner", "median", "--", "true"},
                            refused)),
            2);
  EXPECT_NE(read_text(refused).find("--pruner works with --oracle random, grid or bayesian"), std::string::npos)
      << read_text(refused);
}

// `--objective a:min,b:min` searches for the Pareto front; `tune results --pareto` prints it.
// x in 0..4 gives (a, b) = (x, (x - 3)^2): x = 4 is dominated by x = 2, the others are the front.
TEST_F(TuneProcessTest, TwoObjectivesFromTheCommandLineGiveTheParetoFront) {
  const std::string xs = (dir.path() / "xs.json").string();
  std::ofstream(xs) << R"([{"name": "x", "type": "Int", "min_value": 0, "max_value": 4}])";
  const pid_t runner = spawn(runner_args("30"), log);
  const std::string out = (dir.path() / "tune.out").string();
  const pid_t tuner = spawn({kTensorhub, "tune", "--hub", uri, "--project", "p", "--name", "two", "--space", xs,
                             "--oracle", "grid", "--objective", "a:min,b:min", "--poll", "0.05", "--json", "--",
                             "/bin/sh", "-c",
                             "awk -v x=\"$TENSORHUB_HP_x\" 'BEGIN { printf \"{\\\"a\\\": %g, \\\"b\\\": %g}\", x, (x - 3) ^ 2 }' "
                             "> \"$TENSORHUB_RESULT_FILE\""},
                            out);
  EXPECT_EQ(wait_exit(tuner), 0) << read_text(out);
  wait_exit(runner);
  const Json front = Json::parse(run_command(kTensorhub + " tune results --hub " + uri + " --project p --name two --pareto --json"));
  std::vector<int> x;
  for (const auto& t : front.at("trials")) x.push_back(t["hyper_parameters"]["x"].get<int>());
  EXPECT_EQ(x, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(front["objectives"], "a:min,b:min");
  const std::string table = run_command(kTensorhub + " tune results --hub " + uri + " --project p --name two --pareto");
  EXPECT_NE(table.find("Pareto front of search 'two': 4 trials"), std::string::npos) << table;
  EXPECT_NE(table.find("b:min"), std::string::npos) << table;
  // An oracle of one objective refuses several.
  const std::string refused = (dir.path() / "refused.out").string();
  EXPECT_EQ(wait_exit(spawn({kTensorhub, "tune", "--hub", uri, "--project", "p", "--name", "y", "--space", xs,
                             "--oracle", "bayesian", "--objective", "a:min,b:min", "--", "true"},
                            refused)),
            2);
  EXPECT_NE(read_text(refused).find("needs --oracle nsga2, random or grid"), std::string::npos) << read_text(refused);
}

}  // namespace
}  // namespace tensorhub
