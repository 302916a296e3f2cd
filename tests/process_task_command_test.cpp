// Command tasks as a user writes them (issue 15's report): `tensorhub task create` and
// `tensorhub runner` as real processes on one SQLite hub. Values reach the program exactly,
// never as shell code; a placeholder with no hyperparameter is refused at creation; a runner
// with a missing trainer refuses to start; a large result is summarised in the runner's log.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tensorhub/queue/task_queue.h"
#include "tensorhub/store/hub.h"
#include "process_util.h"
#include "test_util.h"

namespace tensorhub {
namespace {

using namespace testing;

class TaskCommandProcessTest : public ::testing::Test, public SqliteHubPaths {
 protected:
  // Runs `tensorhub ARGS --hub uri --project p`; its exit code (output in `log`).
  int tensorhub(std::vector<std::string> args) {
    // Global options first, so they never land after a tuner command's `--`.
    args.insert(args.begin(), {kTensorhub, "--hub", uri, "--project", "p"});
    std::filesystem::remove(log);
    return wait_exit(spawn(args, log));
  }

  int run_runner() {
    return tensorhub({"runner", "--task-name", "t", "--poll", "0.05", "--exit-when-idle", "0.5"});
  }

  Task only_task() {
    Hub hub(uri, "p");
    TaskQueue queue(hub);
    const auto tasks = queue.find_tasks(Json::object());
    if (tasks.size() != 1) throw std::runtime_error("expected one task");
    return tasks[0];
  }

  // The last command was refused before anything was queued, saying each of `parts`.
  void expect_refused_saying(const std::vector<std::string>& parts) {
    const std::string out = read_text(log);
    for (const auto& part : parts) EXPECT_NE(out.find(part), std::string::npos) << part << " not in: " << out;
    Hub hub(uri, "p");
    EXPECT_TRUE(TaskQueue(hub).find_tasks(Json::object()).empty());
  }
};

TEST_F(TaskCommandProcessTest, AValueInsideDoubleQuotesIsNotRunAsCode) {
  const auto marker = dir.path() / "x";
  const std::string value = "$(touch " + marker.string() + ")";
  ASSERT_EQ(tensorhub({"task", "create", "--task-name", "t", "--saved-result-keys", "v", "--command",
                       R"(printf '{"v": "%s"}' "{v}" > $TENSORHUB_RESULT_FILE)", "--hyper-parameters",
                       Json{{"v", value}}.dump()}),
            0)
      << read_text(log);
  ASSERT_EQ(run_runner(), 0) << read_text(log);
  const Task t = only_task();
  EXPECT_EQ(t.status, TaskStatus::kFinished) << t.error;
  EXPECT_EQ(t.result["v"], value);
  EXPECT_FALSE(std::filesystem::exists(marker));
}

TEST_F(TaskCommandProcessTest, ANumberInsideAJsonStringStaysANumber) {
  ASSERT_EQ(tensorhub({"task", "create", "--task-name", "t", "--saved-result-keys", "lr", "--command",
                       R"(echo "{\"lr\": {lr}}" > $TENSORHUB_RESULT_FILE)", "--hyper-parameters", R"({"lr": 0.01})"}),
            0)
      << read_text(log);
  ASSERT_EQ(run_runner(), 0) << read_text(log);
  const Task t = only_task();
  EXPECT_EQ(t.status, TaskStatus::kFinished) << t.error;
  EXPECT_EQ(t.result, Json::parse(R"({"lr": 0.01})"));
}

TEST_F(TaskCommandProcessTest, AnUnknownPlaceholderIsRefusedAtCreation) {
  EXPECT_NE(tensorhub({"task", "create", "--task-name", "t", "--command", "echo {lr}"}), 0);
  expect_refused_saying({"{lr}", "no hyperparameter is named lr"});
}

TEST_F(TaskCommandProcessTest, AnUnknownPlaceholderInATunerCommandIsRefusedBeforeATrialIsQueued) {
  const auto space = dir.path() / "space.json";
  std::ofstream(space) << R"([{"name": "units", "type": "Int", "min_value": 1, "max_value": 4}])";
  EXPECT_NE(tensorhub({"tune", "--name", "s", "--space", space.string(), "--oracle", "random", "--max-trials", "2",
                       "--objective", "loss:min", "--", "echo", "{units}", "{lr}"}),
            0);
  expect_refused_saying({"{lr}", "units"});
}

TEST_F(TaskCommandProcessTest, ARunnerWithAMissingTrainerRefusesToStart) {
  EXPECT_NE(tensorhub({"runner", "--exit-when-idle", "0", "--trainer", "/nonexistent/tensorhub", "train-spec"}), 0);
  const std::string out = read_text(log);
  EXPECT_NE(out.find("/nonexistent/tensorhub"), std::string::npos) << out;
  EXPECT_NE(out.find("--trainer"), std::string::npos) << out;
  EXPECT_EQ(out.find("RunnerOptions"), std::string::npos) << out;
}

TEST_F(TaskCommandProcessTest, ALargeResultIsSummarisedInTheRunnersLog) {
  // 100,000 bytes of result: the log names its size and keys instead of the whole value.
  ASSERT_EQ(tensorhub({"task", "create", "--task-name", "t", "--saved-result-keys", "big", "--command",
                       R"(printf '{"big": "%0100000d", "small": 1}' 0 > $TENSORHUB_RESULT_FILE)"}),
            0)
      << read_text(log);
  ASSERT_EQ(run_runner(), 0) << read_text(log);
  EXPECT_EQ(only_task().result["big"].get<std::string>().size(), 100000u);
  const std::string out = read_text(log);
  EXPECT_LT(out.size(), 5000u) << out.substr(0, 500);
  EXPECT_NE(out.find("bytes with keys big, small"), std::string::npos) << out;
}

TEST_F(TaskCommandProcessTest, AFinishedTaskKeepsTheTailOfItsOutput) {
  ASSERT_EQ(tensorhub({"task", "create", "--task-name", "t", "--command",
                       "echo epoch 1 loss 0.5; echo done >&2; echo '{}' > $TENSORHUB_RESULT_FILE"}),
            0);
  ASSERT_EQ(run_runner(), 0) << read_text(log);
  const Task t = only_task();
  EXPECT_EQ(t.status, TaskStatus::kFinished) << t.error;
  EXPECT_EQ(t.log_tail, "epoch 1 loss 0.5\ndone\n");
}

TEST_F(TaskCommandProcessTest, ANullRequiredResultDoesNotCount) {
  ASSERT_EQ(tensorhub({"task", "create", "--task-name", "t", "--saved-result-keys", "acc", "--max-attempts", "1",
                       "--command", R"(echo '{"acc": null}' > $TENSORHUB_RESULT_FILE)"}),
            0);
  ASSERT_EQ(run_runner(), 0) << read_text(log);
  const Task t = only_task();
  EXPECT_EQ(t.status, TaskStatus::kFailed);
  EXPECT_NE(t.error.find("acc"), std::string::npos) << t.error;
}

}  // namespace
}  // namespace tensorhub
