// Runners as real processes: the tensorhub binary started with fork/exec, killed with
// SIGKILL or SIGTERM, sharing one SQLite hub file with this test.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <set>
#include <thread>

#include "tensorhub/queue/task_queue.h"
#include "tensorhub/store/hub.h"
#include "process_util.h"
#include "test_util.h"

namespace tensorhub {
namespace {

using namespace std::chrono_literals;
using namespace testing;

class RunnerProcessTest : public ::testing::Test, public SqliteHubFiles {
 protected:

  std::vector<std::string> runner_args(const std::string& lease = "30") {
    return {kTensorhub, "runner", "--hub", uri, "--project", "p", "--task-name", "t",
            "--lease", lease, "--poll", "0.05", "--exit-when-idle", "1"};
  }

  TaskSpec task(const std::string& command, std::vector<std::string> keys = {"value"}) {
    TaskSpec s;
    s.task_name = "t";
    s.command = command;
    s.saved_result_keys = std::move(keys);
    return s;
  }

  std::string runner_log() { return read_text(log); }
};

TEST_F(RunnerProcessTest, TaskOfARunnerKilledWithSigkillFinishesOnAnotherRunnerOnce) {
  const auto starts = dir.path() / "starts";
  // Runs long enough to be killed mid-way; records every start.
  const auto id = queue.create_task(task("echo $TENSORHUB_ATTEMPT >> " + starts.string() +
                                         "; sleep 2; echo '{\"value\": '$TENSORHUB_ATTEMPT'}' > $TENSORHUB_RESULT_FILE"));
  auto args = runner_args("1");
  const pid_t first = spawn(args, log);
  ASSERT_TRUE(eventually([&] { return read_lines(starts).size() == 1; })) << runner_log();
  kill(first, SIGKILL);
  EXPECT_EQ(wait_exit(first), 128 + SIGKILL);

  const pid_t second = spawn(args, log);  // claims the task once the 1 s lease has expired
  ASSERT_TRUE(eventually([&] { return queue.get_task(id).status == TaskStatus::kFinished; })) << runner_log();
  wait_exit(second);

  const Task t = queue.get_task(id);
  EXPECT_EQ(t.attempt, 2);
  EXPECT_EQ(t.failures, 1);  // the expired lease counts as one failed attempt
  EXPECT_EQ(t.result, Json({{"value", 2}}));
  EXPECT_EQ(read_lines(starts), (std::vector<std::string>{"1", "2"}));
  EXPECT_EQ(queue.count_tasks().finished, 1);
}

TEST_F(RunnerProcessTest, AlwaysCrashingTaskFailsAfterMaxAttemptsAndWaitReturns) {
  auto spec = task("echo about to crash; kill -SEGV $$");
  spec.max_attempts = 2;
  const auto id = queue.create_task(spec);
  const pid_t runner = spawn(runner_args(), log);
  // The dispatcher's wait returns once nothing is pending or running.
  const auto counts = queue.wait({{"task_name", "t"}}, nullptr, 0.05, 60);
  wait_exit(runner);
  EXPECT_EQ(counts.failed, 1);
  const Task t = queue.get_task(id);
  EXPECT_EQ(t.status, TaskStatus::kFailed);
  EXPECT_EQ(t.failures, 2);
  // The error says how it ended and what it said last (the reason, for most programs).
  EXPECT_EQ(t.error, "the task was killed by signal 11 (Segmentation fault); its last output line: about to crash");
  EXPECT_NE(t.log_tail.find("about to crash"), std::string::npos) << t.log_tail;
  EXPECT_FALSE(queue.check_unfinished_task());

  // `tensorhub task wait ID` reports the failure and exits non-zero (a wait without ids would
  // judge only the tasks pending or running when it starts: none here).
  const auto out = dir.path() / "wait.log";
  const pid_t waiter =
      spawn({kTensorhub, "task", "wait", std::to_string(id), "--hub", uri, "--project", "p"}, out.string());
  EXPECT_EQ(wait_exit(waiter), 1);
  std::ifstream in(out);
  const std::string text(std::istreambuf_iterator<char>(in), {});
  EXPECT_NE(text.find("task " + std::to_string(id) + " failed"), std::string::npos) << text;
}

TEST_F(RunnerProcessTest, TaskWithoutASavedResultKeyFailsNamingTheKey) {
  auto spec = task("echo '{\"other\": 1}' > $TENSORHUB_RESULT_FILE", {"test_accuracy"});
  spec.max_attempts = 1;
  const auto id = queue.create_task(spec);
  wait_exit(spawn(runner_args(), log));
  const Task t = queue.get_task(id);
  EXPECT_EQ(t.status, TaskStatus::kFailed);
  EXPECT_NE(t.error.find("test_accuracy"), std::string::npos) << t.error;
  EXPECT_TRUE(t.result.is_null());
}

TEST_F(RunnerProcessTest, ATaskTheMachineCannotStartFailsWithTheReasonAndClaimsPauseBeforeTheNext) {
  // The attempt's log path is taken by a directory, so the runner cannot create the log: a
  // fault of this machine, not of the task. The task fails at once with the reason (it used
  // to stay running until its lease expired), and the runner waits before its next claim.
  auto bad = task("echo '{\"value\": 1}' > $TENSORHUB_RESULT_FILE");
  bad.max_attempts = 1;
  bad.priority = 1;  // claimed first
  const auto a = queue.create_task(bad);
  const auto b = queue.create_task(task("echo '{\"value\": 2}' > $TENSORHUB_RESULT_FILE"));
  const auto work = dir / "work";
  std::filesystem::create_directories(work / ("task-" + std::to_string(a) + "-1.log"));
  auto args = runner_args("60");
  args.insert(args.end(), {"--work-dir", work.string()});
  EXPECT_EQ(wait_exit(spawn(args, log)), 0) << runner_log();
  const Task t = queue.get_task(a);
  EXPECT_EQ(t.status, TaskStatus::kFailed) << runner_log();
  EXPECT_NE(t.error.find("could not start it: cannot create task log " + (work / ("task-" + std::to_string(a) + "-1.log")).string()),
            std::string::npos)
      << t.error;
  EXPECT_NE(runner_log().find("claiming again in 1 s"), std::string::npos) << runner_log();
  EXPECT_EQ(queue.get_task(b).status, TaskStatus::kFinished) << runner_log();
}

TEST_F(RunnerProcessTest, MaxTasksClaimsThatManyRunsThemAndExits) {
  // Two slots but --max-tasks 1: one task runs, the other stays pending, and the runner exits
  // without waiting out --exit-when-idle (none given: it would run until stopped).
  const auto a = queue.create_task(task("echo '{\"value\": 1}' > $TENSORHUB_RESULT_FILE"));
  const auto b = queue.create_task(task("echo '{\"value\": 2}' > $TENSORHUB_RESULT_FILE"));
  wait_exit(spawn({kTensorhub, "runner", "--hub", uri, "--project", "p", "--task-name", "t", "--poll", "0.05",
                   "--slots", "2", "--max-tasks", "1", "--oldest-first"},
                  log));
  EXPECT_EQ(queue.get_task(a).status, TaskStatus::kFinished) << runner_log();
  EXPECT_EQ(queue.get_task(a).result, (Json{{"value", 1}}));
  EXPECT_EQ(queue.get_task(b).status, TaskStatus::kPending);
  EXPECT_NE(runner_log().find("ran the 1 task(s) it was to claim, exiting"), std::string::npos) << runner_log();
}

TEST_F(RunnerProcessTest, TaskPastItsTimeoutIsKilledAndCountsAsAFailedAttempt) {
  auto spec = task("sleep 30");
  spec.timeout_s = 0.5;
  spec.max_attempts = 1;
  const auto id = queue.create_task(spec);
  const auto start = std::chrono::steady_clock::now();
  wait_exit(spawn(runner_args(), log));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 20s);  // the sleep did not run out
  const Task t = queue.get_task(id);
  EXPECT_EQ(t.status, TaskStatus::kFailed);
  EXPECT_NE(t.error.find("timeout"), std::string::npos) << t.error;
}

TEST_F(RunnerProcessTest, SigtermReleasesTheRunningTaskWithoutCountingAFailure) {
  const auto started = dir.path() / "started";
  const auto id = queue.create_task(task("touch " + started.string() + "; sleep 30"));
  auto args = runner_args();
  args.resize(args.size() - 2);  // no --exit-when-idle: runs until stopped
  const pid_t runner = spawn(args, log);
  ASSERT_TRUE(eventually([&] { return std::filesystem::exists(started); })) << runner_log();
  kill(runner, SIGTERM);
  EXPECT_EQ(wait_exit(runner), 0);
  const Task t = queue.get_task(id);
  EXPECT_EQ(t.status, TaskStatus::kPending);
  EXPECT_EQ(t.failures, 0);
  EXPECT_NE(runner_log().find("released"), std::string::npos);
}

// A cancel reaches a running task within about a second, not at the next heartbeat (here
// lease 60 s / 3 = 20 s away).
TEST_F(RunnerProcessTest, ACancelledTaskIsStoppedWithinAboutASecond) {
  const auto pid_file = dir.path() / "pid";
  const auto id = queue.create_task(task("echo $$ > " + pid_file.string() + ".tmp; mv " + pid_file.string() +
                                         ".tmp " + pid_file.string() + "; exec sleep 300"));
  auto args = runner_args("60");
  args.resize(args.size() - 2);  // no --exit-when-idle: runs until stopped
  const pid_t runner = spawn(args, log);
  ASSERT_TRUE(eventually([&] { return std::filesystem::exists(pid_file); })) << runner_log();
  const pid_t task_pid = std::stoi(read_text(pid_file));
  ASSERT_EQ(queue.cancel_tasks({{"id", id}}), 1);
  EXPECT_TRUE(eventually([&] { return ::kill(task_pid, 0) != 0; }, 5s)) << runner_log();
  EXPECT_TRUE(eventually([&] { return runner_log().find("stopped: it was cancelled") != std::string::npos; }, 5s))
      << runner_log();
  kill(runner, SIGTERM);
  EXPECT_EQ(wait_exit(runner), 0);
  EXPECT_EQ(queue.get_task(id).status, TaskStatus::kCancelled);
}

TEST_F(RunnerProcessTest, HyperParametersReachTheTaskShellQuoted) {
  auto spec = task("printf '%s' {name} > " + (dir.path() / "name").string() +
                   "; echo '{\"value\": '$OMP_NUM_THREADS'}' > $TENSORHUB_RESULT_FILE");
  spec.hyper_parameters = {{"name", "it's $HOME; rm -rf /"}};
  const auto id = queue.create_task(spec);
  auto args = runner_args();
  args.insert(args.end(), {"--threads", "3"});
  wait_exit(spawn(args, log));
  EXPECT_EQ(queue.get_task(id).status, TaskStatus::kFinished) << runner_log();
  EXPECT_EQ(read_lines(dir.path() / "name"), std::vector<std::string>{"it's $HOME; rm -rf /"});
  EXPECT_EQ(queue.get_task(id).result, Json({{"value", 3}}));
}

TEST_F(RunnerProcessTest, TwoRunnersRun200TasksEachExactlyOnce) {
  const auto ran = dir.path() / "ran";
  for (int i = 0; i < 200; ++i)
    queue.create_task(task("echo $TENSORHUB_TASK_ID >> " + ran.string() +
                           "; echo '{\"value\": '$TENSORHUB_TASK_ID'}' > $TENSORHUB_RESULT_FILE"));
  const pid_t a = spawn(runner_args(), log);
  const pid_t b = spawn(runner_args(), log);
  EXPECT_EQ(wait_exit(a), 0);
  EXPECT_EQ(wait_exit(b), 0);

  const auto lines = read_lines(ran);
  EXPECT_EQ(lines.size(), 200u);
  EXPECT_EQ(std::set<std::string>(lines.begin(), lines.end()).size(), 200u);
  const auto tasks = queue.find_tasks();
  ASSERT_EQ(tasks.size(), 200u);
  for (const auto& t : tasks) {
    EXPECT_EQ(t.status, TaskStatus::kFinished);
    EXPECT_EQ(t.attempt, 1);
    EXPECT_EQ(t.result, Json({{"value", t.id}}));
  }
}

}  // namespace
}  // namespace tensorhub
