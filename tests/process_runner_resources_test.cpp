// Runners that know what they have (--cpus, --memory, --gpus) as real processes, on every
// backend: GPUs handed to one attempt at a time, each attempt's CUDA_VISIBLE_DEVICES and thread
// count, the kernel's OOM kill of a task over its --memory (and of a child of a task that still
// exits 0, noted on its finished attempt), `task list`'s waiting_for, the runners table while a runner
// runs, creation refusals and warnings, and the flags' errors.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "backend_factory.h"
#include "process_util.h"
#include "tensorhub/queue/runner.h"
#include "tensorhub/queue/task_queue.h"
#include "tensorhub/store/hub.h"
#include "test_util.h"

namespace tensorhub {
namespace {

using namespace std::chrono_literals;
using namespace testing;

class RunnerResourcesProcessTest : public BackendTest {
 protected:
  void set_up() override {
    hub_ = std::make_unique<Hub>(db_->uri(), "p");
    queue_ = std::make_unique<TaskQueue>(*hub_);
    log_ = (dir_.path() / "processes.log").string();
    // The runners' GPU locks in this test's directory: fake ids 0 and 1 are not the machine's.
    ::setenv("TENSORHUB_GPU_LOCK_DIR", dir_.path().c_str(), 1);
  }
  void TearDown() override { ::unsetenv("TENSORHUB_GPU_LOCK_DIR"); }
  TaskQueue& queue() { return *queue_; }

  std::vector<std::string> runner_args(std::vector<std::string> extra) {
    std::vector<std::string> args = {kTensorhub, "runner", "--hub", db_->uri(), "--project", "p", "--task-name", "t",
                                     "--poll", "0.05", "--exit-when-idle", "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }
  // `tensorhub ARGS...` with the hub flags, its output appended to the log; its exit code.
  int tensorhub(std::vector<std::string> args) {
    args.insert(args.begin(), kTensorhub);
    args.insert(args.end(), {"--hub", db_->uri(), "--project", "p"});
    return wait_exit(spawn(args, log_));
  }
  TaskSpec task(const std::string& command, TaskResources r = {}) {
    TaskSpec s;
    s.task_name = "t";
    s.command = command;
    s.resources = r;
    return s;
  }
  std::string log() { return read_text(log_); }

  TempDir dir_;
  std::string log_;
  std::unique_ptr<Hub> hub_;
  std::unique_ptr<TaskQueue> queue_;
};

// One line per attempt: "<start> <end> <CUDA_VISIBLE_DEVICES>" with times in nanoseconds.
struct GpuUse {
  long long start = 0, end = 0;
  std::string gpus;
};

TEST_P(RunnerResourcesProcessTest, TwoAttemptsNeverShareAGpuAndEachSeesOnlyItsOwn) {
  const auto uses = dir_.path() / "uses";
  for (int i = 0; i < 4; ++i)
    queue().create_task(task("s=$(date +%s%N); sleep 0.6; echo \"$s $(date +%s%N) $CUDA_VISIBLE_DEVICES\" >> " +
                                 uses.string(),
                             {0, 1, 0}));
  // Fake ids (no GPU here): the runner hands them out as it would real ones.
  ASSERT_EQ(wait_exit(spawn(runner_args({"--gpus", "0,1", "--slots", "4"}), log_)), 0) << log();
  EXPECT_EQ(queue().count_tasks().finished, 4) << log();
  std::vector<GpuUse> all;
  for (const auto& line : read_lines(uses)) {
    GpuUse u;
    std::istringstream(line) >> u.start >> u.end >> u.gpus;
    all.push_back(u);
  }
  ASSERT_EQ(all.size(), 4u);
  int most_at_once = 0;
  for (const auto& a : all) {
    EXPECT_TRUE(a.gpus == "0" || a.gpus == "1") << a.gpus;
    int at_once = 0;
    for (const auto& b : all)
      if (b.start <= a.start && a.start < b.end) ++at_once;  // running when a started, a included
    most_at_once = std::max(most_at_once, at_once);
    for (const auto& b : all)
      if (&a != &b && a.start < b.end && b.start < a.end) EXPECT_NE(a.gpus, b.gpus) << "overlapping attempts";
  }
  EXPECT_EQ(most_at_once, 2);  // two GPUs: two attempts at once, though four slots
}

TEST_P(RunnerResourcesProcessTest, ATaskWithoutGpusOnAGpuRunnerSeesNoneAndThreadsFollowItsCpus) {
  const auto env = dir_.path() / "env";
  const std::string record = "echo \"[$CUDA_VISIBLE_DEVICES] $NVIDIA_VISIBLE_DEVICES $OMP_NUM_THREADS "
                             "$TENSORHUB_NUM_THREADS\" >> " + env.string();
  queue().create_task(task(record, {2.5, 0, 0}));
  ASSERT_EQ(wait_exit(spawn(runner_args({"--gpus", "3", "--cpus", "4", "--threads", "7"}), log_)), 0) << log();
  queue().create_task(task(record));
  queue().create_task(task(record, {1, 1, 0}));
  ASSERT_EQ(wait_exit(spawn(runner_args({"--gpus", "3", "--cpus", "4", "--threads", "7", "--oldest-first"}), log_)), 0)
      << log();
  // 2.5 cpus -> ceil = 3 threads; no request -> --threads; the GPU task gets GPU 3.
  EXPECT_EQ(read_lines(env), (std::vector<std::string>{"[] none 3 3", "[] none 7 7", "[3] 3 1 1"})) << log();
}

TEST_P(RunnerResourcesProcessTest, ASpecTaskTheRunnerCannotTrainGivesItsGpuBack) {
  // A spec task that asks for the runner's one GPU fails at once (no trainer here); the command
  // task after it needs that GPU too, so it runs only if the failed claim gave it back.
  TaskSpec spec;
  spec.task_name = "t";
  spec.train_spec = Json{{"model", "any"}};
  spec.resources = {0, 1, 0};
  spec.max_attempts = 1;
  spec.priority = 1;
  const auto spec_id = queue().create_task(spec);
  const auto next_id = queue().create_task(task("true", {0, 1, 0}));
  RunnerOptions o;
  o.hub_uri = db_->uri();
  o.project_name = "p";
  o.task_name = "t";
  o.gpus = std::vector<int>{5};
  o.poll_s = 0.05;
  o.exit_when_idle_s = 1;
  std::string lines;
  o.log = [&](const std::string& line) { lines += line + "\n"; };
  Runner(o).run();
  EXPECT_EQ(queue().get_task(spec_id).status, TaskStatus::kFailed) << lines;
  EXPECT_EQ(queue().get_task(next_id).status, TaskStatus::kFinished) << lines;
}

TEST_P(RunnerResourcesProcessTest, ATaskAskingForLessThanTheLeastCpuQuotaStillRuns) {
  // 0.005 cpus is a quota of 500 us per 100 ms, which the kernel refuses (at least 1000 us).
  const auto id = queue().create_task(task("true", {0.005, 0, 0}));
  ASSERT_EQ(wait_exit(spawn(runner_args({}), log_)), 0) << log();
  EXPECT_EQ(queue().get_task(id).status, TaskStatus::kFinished) << log();
}

TEST_P(RunnerResourcesProcessTest, ATaskOverItsMemoryIsKilledByTheKernelAndTheRunnerGoesOn) {
  // Allocates and touches 200 MiB (one write per page), far over its 64 MiB.
  const std::string hog =
      "/usr/bin/python3 -c \"b = bytearray(200 * 1024 * 1024)\nfor i in range(0, len(b), 4096): b[i] = 1\"";
  const auto hog_id = queue().create_task(task(hog, {0, 0, 64LL << 20}));
  const auto next_id = queue().create_task(task("echo fine", {0, 0, 64LL << 20}));
  ASSERT_EQ(wait_exit(spawn(runner_args({"--oldest-first"}), log_)), 0) << log();
  if (log().find("memory limits not enforced") != std::string::npos)
    GTEST_SKIP() << "this machine lets the runner make no memory cgroup: " << log();
  const Task hogged = queue().get_task(hog_id);
  EXPECT_EQ(hogged.error, "out of memory (limit 64 MiB)") << log();
  EXPECT_EQ(queue().get_task(next_id).status, TaskStatus::kFinished) << log();
  EXPECT_NE(log().find("OOM killer"), std::string::npos) << log();
}

TEST_P(RunnerResourcesProcessTest, AChildKilledForMemoryIsNotedOnATaskWhoseShellStillExitsZero) {
  // Three children touch 40 MiB each under the task's 64 MiB: the kernel must kill at least
  // one. The shell waits for each, writes one line per child killed by SIGKILL (status 137,
  // what the kernel's OOM kill is) and exits 0 whatever happened.
  const auto killed = dir_.path() / "killed";
  const std::string child =
      "/usr/bin/python3 -c \"import time\nb = bytearray(40 * 1024 * 1024)\nfor i in range(0, len(b), 4096): b[i] = "
      "1\ntime.sleep(1)\"";
  const std::string script = child + " & a=$!; " + child + " & b=$!; " + child + " & c=$!; touch " + killed.string() +
                             "; for p in $a $b $c; do wait $p; [ $? -eq 137 ] && echo killed >> " + killed.string() +
                             "; done; exit 0";
  const auto id = queue().create_task(task(script, {0, 0, 64LL << 20}));
  ASSERT_EQ(wait_exit(spawn(runner_args({}), log_)), 0) << log();
  if (log().find("memory limits not enforced") != std::string::npos)
    GTEST_SKIP() << "this machine lets the runner make no memory cgroup: " << log();
  const Task t = queue().get_task(id);
  EXPECT_EQ(t.status, TaskStatus::kFinished) << log();  // the task said it succeeded
  const std::size_t kills = read_lines(killed).size();
  ASSERT_GE(kills, 1u) << log();
  const std::string note = "the kernel killed " + std::to_string(kills) + (kills == 1 ? " process" : " processes") +
                           " of it for memory (limit 64 MiB)";
  // A warning line of the runner's log ("<time> warning [runner <owner>] task 1 (t, attempt 1): ...").
  const std::string said = "] task " + std::to_string(id) + " (t, attempt 1): " + note;
  const auto lines = read_lines(log_);
  EXPECT_TRUE(std::any_of(lines.begin(), lines.end(), [&](const std::string& l) {
    return l.ends_with(said) && l.find(" warning [runner ") != std::string::npos;
  })) << log();
  const auto attempts = queue().find_attempts(id);
  ASSERT_EQ(attempts.size(), 1u) << log();
  EXPECT_EQ(attempts[0].outcome, "finished");
  EXPECT_EQ(attempts[0].error, note);
  // `task show` shows it with the attempt.
  const std::string shown =
      run_command(kTensorhub + " task show " + std::to_string(id) + " --hub '" + db_->uri() + "' --project p");
  EXPECT_EQ(Json::parse(shown)["attempts"].at(0).value("error", ""), note) << shown;
}

TEST_P(RunnerResourcesProcessTest, ARunnerIsInTheRunnersTableWhileItRunsAndLeavesIt) {
  const auto started = dir_.path() / "started";
  queue().create_task(task("touch " + started.string() + "; sleep 1.5"));
  const pid_t runner = spawn(runner_args({"--gpus", "0,1", "--cpus", "3", "--memory", "2GiB", "--lease", "3"}), log_);
  ASSERT_TRUE(eventually([&] { return std::filesystem::exists(started); })) << log();
  const auto live = queue().list_runners(true);
  ASSERT_EQ(live.size(), 1u) << log();
  EXPECT_EQ(live[0].pid, runner);
  EXPECT_EQ(live[0].gpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(live[0].cpus, 3);
  EXPECT_EQ(live[0].memory_bytes, 2LL << 30);
  EXPECT_EQ(live[0].task_name, "t");
  EXPECT_EQ(live[0].lease_s, 3);
  // While it is live, a task it could never run is refused, naming what it has.
  EXPECT_NE(tensorhub({"task", "create", "--task-name", "t", "--command", "true", "--gpus", "4"}), 0);
  EXPECT_NE(log().find("needs 4 GPUs; the live runner has 2"), std::string::npos) << log();
  EXPECT_EQ(wait_exit(runner), 0) << log();
  EXPECT_TRUE(queue().list_runners(false).empty());  // unregistered at exit
  EXPECT_EQ(queue().count_tasks().total(), 1);       // the refused task was not queued
}

TEST_P(RunnerResourcesProcessTest, WithoutALiveRunnerABigRequestIsQueuedWithAWarningAndListSaysWhyItWaits) {
  ASSERT_EQ(tensorhub({"task", "create", "--task-name", "t", "--command", "true", "--gpus", "2", "--memory", "1G"}),
            0)
      << log();
  EXPECT_NE(log().find("warning: task \"t\" asks for 2 GPUs, 1 GiB, and no live runner"), std::string::npos) << log();
  // No runner at all: that is the reason it waits.
  const std::string before = run_command(kTensorhub + " task list --json --hub '" + db_->uri() + "' --project p");
  EXPECT_EQ(Json::parse(before).at(0).value("waiting_for", ""), "no live runner") << before;
  RunnerInfo small;
  small.owner = "small";
  small.host = "h";
  small.cpus = 8;
  small.memory_bytes = 1LL << 34;
  queue().register_runner(small);
  const std::string out = run_command(kTensorhub + " task list --json --hub '" + db_->uri() + "' --project p");
  const Json tasks = Json::parse(out);
  ASSERT_EQ(tasks.size(), 1u) << out;
  EXPECT_EQ(tasks[0]["waiting_for"], "needs 2 GPUs; the live runner has 0");
  EXPECT_EQ(tasks[0]["resources"]["gpus"], 2);
  const std::string table = run_command(kTensorhub + " task list --hub '" + db_->uri() + "' --project p");
  EXPECT_NE(table.find("needs 2 GPUs; the live runner has 0"), std::string::npos) << table;
}

TEST_P(RunnerResourcesProcessTest, BadResourceFlagsAreRefusedNamingTheFlag) {
  const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> cases = {
      {{"runner", "--gpus", "0,1,0", "--exit-when-idle", "0"}, {"--gpus", "GPU 0 twice"}},
      {{"runner", "--gpus", "0,a", "--exit-when-idle", "0"}, {"--gpus", "\"a\""}},
      {{"runner", "--memory", "8X", "--exit-when-idle", "0"}, {"--memory", "\"8X\""}},
      {{"runner", "--cpus", "lots", "--exit-when-idle", "0"}, {"--cpus", "\"lots\""}},
      {{"task", "create", "--task-name", "t", "--command", "true", "--gpus", "1.5"}, {"--gpus", "\"1.5\""}},
      {{"task", "create", "--task-name", "t", "--command", "true", "--memory", "lots"}, {"--memory", "\"lots\""}},
      {{"task", "create", "--task-name", "t", "--command", "true", "--cpus", "-2"}, {"--cpus", "\"-2\""}},
      // An empty value (an unset shell variable) is no request in disguise; 1e30 cores a typo.
      {{"task", "create", "--task-name", "t", "--command", "true", "--memory", ""}, {"--memory: is empty"}},
      {{"task", "create", "--task-name", "t", "--command", "true", "--cpus", ""}, {"--cpus: is empty"}},
      {{"task", "create", "--task-name", "t", "--command", "true", "--cpus", "1e30"}, {"more than 1e+06 cores"}},
      {{"runner", "--gpus", "", "--exit-when-idle", "0"}, {"--gpus: is empty"}},
      {{"runner", "--gpus", "-1", "--exit-when-idle", "0"}, {"--gpus", "\"-1\" is not a GPU id"}},
  };
  for (const auto& [args, parts] : cases) {
    std::filesystem::remove(log_);
    EXPECT_NE(tensorhub(args), 0) << args[0] << " " << args[args.size() - 2];
    for (const auto& p : parts) EXPECT_NE(log().find(p), std::string::npos) << p << " in " << log();
  }
  EXPECT_EQ(queue().count_tasks().total(), 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, RunnerResourcesProcessTest, ::testing::ValuesIn(backend_params()),
                         backend_param_name);

}  // namespace
}  // namespace tensorhub
