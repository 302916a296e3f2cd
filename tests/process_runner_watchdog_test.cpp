// No task outlives its runner (issue 25): a real `tensorhub runner` SIGKILLed mid-task takes its
// task's whole process tree along within seconds, long before the task's 60 s lease ends and
// without waiting for another runner on the machine (runner_watchdog.h). With task cgroups the
// whole tree dies, a setsid daemon included; without them the task's process group dies (its
// main shell and its pipeline), and a daemon that left the group escapes, as the watchdog's doc
// comment says. Both backends; processes checked through /proc.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <thread>

#include "backend_factory.h"
#include "process_util.h"
#include "tensorhub/queue/task_queue.h"
#include "tensorhub/store/hub.h"

namespace tensorhub {
namespace {

using namespace std::chrono_literals;
using namespace testing;

class RunnerWatchdogTest : public ::testing::TestWithParam<std::tuple<BackendParam, bool>> {
 protected:
  TempDir dir;
  std::string log = (dir.path() / "runner.log").string();
  std::filesystem::path pids_file = dir.path() / "pids";
  std::unique_ptr<TestDatabase> db;
  std::unique_ptr<Hub> hub;
  std::unique_ptr<TaskQueue> queue;
  std::vector<pid_t> tree;  // main shell, daemon, pipeline's two members
  bool cgroups() const { return std::get<1>(GetParam()); }

  void SetUp() override {
    db = std::get<0>(GetParam()).make();
    if (!db) GTEST_SKIP() << kNoPostgres;
    if (cgroups() && !cgroups_available()) GTEST_SKIP() << "no writable cgroup v2 hierarchy here";
    hub = std::make_unique<Hub>(db->uri(), "p");
    queue = std::make_unique<TaskQueue>(*hub);
  }

  void TearDown() override {
    for (const pid_t p : tree) ::kill(p, SIGKILL);  // never leave one behind, even on failure
  }

  // A task whose shell ($$) starts a setsid daemon and a two-process pipeline, each writing its
  // pid to `pids_file`, and waits for them; a runner with a 60 s lease running it. The runner's pid.
  pid_t run_tree_task() {
    const std::string f = pids_file.string();
    TaskSpec s;
    s.task_name = "t";
    s.max_attempts = 1;
    s.command = "echo $$ >> " + f + "; (setsid sh -c 'echo $$ >> " + f + "; exec sleep 300' > /dev/null 2>&1 &); " +
                "sh -c 'echo $$ >> " + f + "; exec sleep 300' | sh -c 'echo $$ >> " + f + "; exec cat'";
    const auto id = queue->create_task(s);
    std::vector<std::string> args = {kTensorhub, "runner", "--hub", db->uri(), "--project", "p", "--task-name", "t",
                                     "--lease", "60", "--poll", "0.05"};
    if (!cgroups()) args.push_back("--no-task-cgroups");
    const pid_t runner = spawn(args, log);
    EXPECT_TRUE(eventually([&] { return read_lines(pids_file).size() == 4; }, 20s)) << read_text(log);
    for (const auto& line : read_lines(pids_file)) tree.push_back(static_cast<pid_t>(std::stol(line)));
    for (const pid_t p : tree) EXPECT_TRUE(alive(p)) << p;
    EXPECT_EQ(queue->get_task(id).status, TaskStatus::kRunning);
    return runner;
  }

  // The task's processes expected to die with the runner: all with cgroups; without, all but
  // the daemon (which setsid took out of the task's process group).
  std::vector<pid_t> expected_to_die() const {
    std::vector<pid_t> out;
    for (const pid_t p : tree)
      if (cgroups() || ::getsid(p) != p) out.push_back(p);
    return out;
  }

  // The runner's watchdog: its child that is no task's process (no TENSORHUB_TASK_ID).
  pid_t watchdog_of(pid_t runner) {
    for (const pid_t p : pids_whose_cmdline([](const std::string&) { return true; })) {
      if (parent_of(p) != runner) continue;
      if (read_text("/proc/" + std::to_string(p) + "/environ").find("TENSORHUB_TASK_ID=") == std::string::npos) return p;
    }
    return -1;
  }
};

TEST_P(RunnerWatchdogTest, ASigkilledRunnersTaskTreeDiesWithinSecondsNotAtTheLeasesEnd) {
  const pid_t runner = run_tree_task();
  ASSERT_EQ(tree.size(), 4u);
  ASSERT_FALSE(HasFailure());
  const auto victims = expected_to_die();
  EXPECT_EQ(victims.size(), cgroups() ? 4u : 3u);  // without cgroups the daemon leads its own session
  ::kill(runner, SIGKILL);
  EXPECT_EQ(wait_exit(runner), 128 + SIGKILL);
  const auto killed_at = std::chrono::steady_clock::now();
  EXPECT_TRUE(eventually([&] {
    for (const pid_t p : victims)
      if (alive(p)) return false;
    return true;
  }, 5s)) << read_text(log);
  EXPECT_LT(std::chrono::steady_clock::now() - killed_at, 5s);
  // The lease (60 s) still holds: nothing but the watchdog could have killed them.
  EXPECT_EQ(queue->find_tasks().at(0).status, TaskStatus::kRunning);
  EXPECT_NE(read_text(log).find("the runner died; killing its running tasks"), std::string::npos) << read_text(log);
}

TEST_P(RunnerWatchdogTest, TheKillComesFromTheWatchdogNotFromTheKernel) {
  // While the watchdog is stopped (SIGSTOP), the dead runner's tree lives on; once it continues
  // it reads the end of the stream and kills the tree. Without cgroups only: with them, any
  // runner that starts on the machine meanwhile (another test's) kills a dead runner's cgroups.
  if (cgroups()) GTEST_SKIP() << "another runner on the machine may reap a dead runner's cgroups first";
  const pid_t runner = run_tree_task();
  ASSERT_EQ(tree.size(), 4u);
  const pid_t watchdog = watchdog_of(runner);
  ASSERT_GT(watchdog, 0) << read_text(log);
  const auto victims = expected_to_die();
  ::kill(watchdog, SIGSTOP);
  ::kill(runner, SIGKILL);
  EXPECT_EQ(wait_exit(runner), 128 + SIGKILL);
  std::this_thread::sleep_for(1500ms);
  int living = 0;
  for (const pid_t p : victims) living += alive(p);
  EXPECT_GE(living, static_cast<int>(victims.size()) - 1);  // all but the main shell (PR_SET_PDEATHSIG)
  ::kill(watchdog, SIGCONT);
  EXPECT_TRUE(eventually([&] {
    for (const pid_t p : victims)
      if (alive(p)) return false;
    return true;
  }, 5s)) << read_text(log);
}

TEST_P(RunnerWatchdogTest, AKilledWatchdogIsReplacedAndStillKillsTheTree) {
  const pid_t runner = run_tree_task();
  ASSERT_EQ(tree.size(), 4u);
  const pid_t first = watchdog_of(runner);
  ASSERT_GT(first, 0) << read_text(log);
  ::kill(first, SIGKILL);
  ASSERT_TRUE(eventually([&] { return read_text(log).find("started another") != std::string::npos; }, 10s))
      << read_text(log);
  const pid_t second = watchdog_of(runner);
  EXPECT_GT(second, 0);
  EXPECT_NE(second, first);
  for (const pid_t p : tree) EXPECT_TRUE(alive(p)) << p;  // a watchdog's death kills nothing
  const auto victims = expected_to_die();
  ::kill(runner, SIGKILL);
  EXPECT_EQ(wait_exit(runner), 128 + SIGKILL);
  EXPECT_TRUE(eventually([&] {
    for (const pid_t p : victims)
      if (alive(p)) return false;
    return true;
  }, 5s)) << read_text(log);
}

TEST_P(RunnerWatchdogTest, AStoppedRunnersWatchdogLeavesQuietly) {
  const pid_t runner = run_tree_task();
  ASSERT_EQ(tree.size(), 4u);
  const pid_t watchdog = watchdog_of(runner);
  ASSERT_GT(watchdog, 0);
  ::kill(runner, SIGTERM);
  EXPECT_EQ(wait_exit(runner), 0) << read_text(log);
  EXPECT_FALSE(alive(watchdog));
  EXPECT_EQ(read_text(log).find("the runner died"), std::string::npos) << read_text(log);
  EXPECT_EQ(queue->find_tasks().at(0).status, TaskStatus::kPending);  // released
}

INSTANTIATE_TEST_SUITE_P(Runner, RunnerWatchdogTest, ::testing::Combine(::testing::ValuesIn(backend_params()), ::testing::Bool()),
                         [](const auto& info) {
                           return std::get<0>(info.param).name + (std::get<1>(info.param) ? "_cgroups" : "_no_cgroups");
                         });

}  // namespace
}  // namespace tensorhub
