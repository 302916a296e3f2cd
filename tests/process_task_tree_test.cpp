// A task's whole process tree (issue 11): a task that daemonises (setsid in a subshell that
// exits, so the daemon leaves the task's process group and loses its parent) leaves nothing
// running after the task ends, times out, is cancelled, or its runner is stopped; with task
// cgroups, even a SIGKILLed runner's daemon is killed, by the next runner on the machine.
// Real runner processes, real daemons, checked through /proc.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <thread>

#include "tensorhub/queue/task_queue.h"
#include "tensorhub/store/hub.h"
#include "process_util.h"
#include "test_util.h"

namespace tensorhub {
namespace {

using namespace std::chrono_literals;
using namespace testing;

class TaskTreeTest : public ::testing::TestWithParam<bool>, public SqliteHubFiles {
 protected:
  std::filesystem::path pidfile = dir.path() / "daemon.pid";
  std::vector<pid_t> daemons;

  void SetUp() override {
    if (GetParam() && !cgroups_available()) GTEST_SKIP() << "no writable cgroup v2 hierarchy here";
  }

  void TearDown() override {
    for (const pid_t d : daemons) ::kill(d, SIGKILL);  // never leave one behind, even on failure
  }

  pid_t start_runner() {
    std::vector<std::string> args = {kTensorhub, "runner", "--hub",  uri,   "--project", "p",
                                     "--task-name", "t", "--lease", "3", "--poll", "0.05"};
    if (!GetParam()) args.push_back("--no-task-cgroups");
    return spawn(args, log);
  }

  // A task that starts a daemon and sleeps, running under a runner of its own.
  struct RunningTask {
    std::int64_t id = 0;
    pid_t runner = 0, daemon = 0;
  };
  RunningTask run_daemonising_task() {
    RunningTask t;
    t.id = create_daemonising_task("sleep 300");
    t.runner = start_runner();
    t.daemon = daemon_pid();
    EXPECT_TRUE(eventually([&] { return status(t.id) == TaskStatus::kRunning; })) << read_text(log);
    return t;
  }

  // SIGTERM to the runner: it stops and exits 0.
  void stop_runner(pid_t runner) {
    ::kill(runner, SIGTERM);
    EXPECT_EQ(wait_exit(runner), 0) << read_text(log);
  }

  // A task that starts a daemon (its pid in `pidfile`), then runs `rest`.
  std::int64_t create_daemonising_task(const std::string& rest, double timeout_s = 0) {
    TaskSpec s;
    s.task_name = "t";
    s.max_attempts = 1;
    s.timeout_s = timeout_s;
    s.command = "(setsid sleep 300 > /dev/null 2>&1 & echo $! > " + pidfile.string() + "); " + rest;
    return queue.create_task(s);
  }

  pid_t daemon_pid() {
    EXPECT_TRUE(eventually([&] { return read_lines(pidfile).size() == 1; })) << read_text(log);
    const pid_t pid = static_cast<pid_t>(std::stol(read_lines(pidfile).at(0)));
    daemons.push_back(pid);
    return pid;
  }

  TaskStatus status(std::int64_t id) { return queue.get_task(id).status; }
};

TEST_P(TaskTreeTest, ADaemonDiesWhenItsTaskFinishes) {
  // The task ends only once the test has seen its daemon alive (the file `go` exists).
  const auto go = dir.path() / "go";
  const auto id = create_daemonising_task("while [ ! -e " + go.string() + " ]; do sleep 0.05; done; echo '{}' > "
                                          "$TENSORHUB_RESULT_FILE");
  const pid_t runner = start_runner();
  const pid_t daemon = daemon_pid();
  std::this_thread::sleep_for(1500ms);  // the runner scans for orphans every second
  EXPECT_TRUE(alive(daemon));           // its task still runs: it is left alone
  std::ofstream(go) << "";
  ASSERT_TRUE(eventually([&] { return status(id) == TaskStatus::kFinished; })) << read_text(log);
  EXPECT_TRUE(eventually([&] { return !alive(daemon); }, 10s)) << "daemon " << daemon << " outlived its task";
  stop_runner(runner);
}

TEST_P(TaskTreeTest, ADaemonDiesWhenItsTaskTimesOut) {
  const auto id = create_daemonising_task("sleep 300", 1.0);
  const pid_t runner = start_runner();
  const pid_t daemon = daemon_pid();
  ASSERT_TRUE(eventually([&] { return status(id) == TaskStatus::kFailed; })) << read_text(log);
  EXPECT_NE(queue.get_task(id).error.find("timeout"), std::string::npos);
  EXPECT_TRUE(eventually([&] { return !alive(daemon); }, 10s));
  stop_runner(runner);
}

TEST_P(TaskTreeTest, ADaemonDiesWhenItsTaskIsCancelled) {
  const auto [id, runner, daemon] = run_daemonising_task();
  ASSERT_FALSE(HasFailure());
  EXPECT_EQ(queue.cancel_tasks({{"id", id}}), 1);
  EXPECT_TRUE(eventually([&] { return !alive(daemon); }, 15s)) << read_text(log);  // at the next heartbeat
  stop_runner(runner);
}

TEST_P(TaskTreeTest, ADaemonDiesWhenItsRunnerIsStopped) {
  const auto [id, runner, daemon] = run_daemonising_task();
  ASSERT_FALSE(HasFailure());
  stop_runner(runner);
  // SIGKILL is delivered asynchronously: give a loaded machine a moment to retire the process.
  EXPECT_TRUE(eventually([&] { return !alive(daemon); }, 3s)) << "daemon " << daemon << " outlived its runner\n"
                                                               << read_text(log);
  EXPECT_EQ(status(id), TaskStatus::kPending) << read_text(log);  // released to the queue
}

INSTANTIATE_TEST_SUITE_P(Runner, TaskTreeTest, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "cgroups" : "subreaper_only"; });

// A SIGKILLed runner's watchdog kills its tasks (process_runner_watchdog_test.cpp). When the
// watchdog dies too (both SIGKILLed, say by an OOM killer), only a cgroup finds the runner's
// daemon again: its parent is gone and so is the runner that knew it.
class SigkilledRunnerTreeTest : public TaskTreeTest {};

TEST_P(SigkilledRunnerTreeTest, TheNextRunnerKillsTheDaemonsOfARunnerSigkilledWithItsWatchdog) {
  create_daemonising_task("sleep 300");
  const pid_t first = start_runner();
  const pid_t daemon = daemon_pid();
  // Stopped first, so it cannot start a new watchdog when it sees this one die.
  ::kill(first, SIGSTOP);
  const pid_t watchdog = runner_watchdog_of(first);
  ASSERT_GT(watchdog, 0) << "runner " << first << " has no watchdog child";
  ::kill(watchdog, SIGKILL);
  ::kill(first, SIGKILL);
  EXPECT_EQ(wait_exit(first), 128 + SIGKILL);
  std::this_thread::sleep_for(300ms);
  EXPECT_TRUE(alive(daemon));  // nobody has killed it yet
  const pid_t second = start_runner();
  EXPECT_TRUE(eventually([&] { return !alive(daemon); }, 10s)) << read_text(log);
  // The runner logs the kill after it: the daemon can be gone a moment before the line is.
  EXPECT_TRUE(eventually([&] { return read_text(log).find("left by runners that no longer run") != std::string::npos; },
                         10s))
      << read_text(log);
  ::kill(second, SIGTERM);
  EXPECT_EQ(wait_exit(second), 0);
}

INSTANTIATE_TEST_SUITE_P(Runner, SigkilledRunnerTreeTest, ::testing::Values(true),
                         [](const auto&) { return "cgroups"; });

}  // namespace
}  // namespace tensorhub
