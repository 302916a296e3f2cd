// The thread count a runner gives tasks that ask for no cpus, as real processes on every backend:
// by default its own cores (--cpus, Slurm's SLURM_CPUS_PER_TASK, else the machine's) shared by its
// slots, not the machine's cores, so a runner given one core of a bigger machine does not tell
// its tasks to run more threads than it has.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend_factory.h"
#include "process_util.h"
#include "tensorhub/queue/task_queue.h"
#include "tensorhub/store/hub.h"
#include "test_util.h"

namespace tensorhub {
namespace {

using namespace testing;

class RunnerThreadsProcessTest : public BackendTest {
 protected:
  void set_up() override {
    hub_ = std::make_unique<Hub>(db_->uri(), "p");
    queue_ = std::make_unique<TaskQueue>(*hub_);
    log_ = (dir_.path() / "processes.log").string();
  }

  // Runs one task that asks for nothing on `tensorhub runner <extra>`; the OMP_NUM_THREADS and
  // TENSORHUB_NUM_THREADS it saw, as "<omp> <tensorhub>".
  std::string threads_seen(const std::vector<std::string>& extra) {
    const auto out = dir_.path() / "threads";
    std::filesystem::remove(out);
    TaskSpec s;
    s.task_name = "t";
    s.command = "echo \"$OMP_NUM_THREADS $TENSORHUB_NUM_THREADS\" > " + out.string();
    queue_->create_task(s);
    std::vector<std::string> args = {kTensorhub, "runner", "--hub", db_->uri(), "--project", "p", "--task-name", "t",
                                     "--poll", "0.05", "--exit-when-idle", "0.5"};
    args.insert(args.end(), extra.begin(), extra.end());
    EXPECT_EQ(wait_exit(spawn(args, log_)), 0) << read_text(log_);
    const auto lines = read_lines(out);
    return lines.empty() ? "" : lines[0];
  }

  TempDir dir_;
  std::string log_;
  std::unique_ptr<Hub> hub_;
  std::unique_ptr<TaskQueue> queue_;
};

TEST_P(RunnerThreadsProcessTest, ARunnerGivenOneCoreGivesItsTasksOneThread) {
  // Before, the default was the machine's cores / slots: 2 threads on a two-core machine.
  EXPECT_EQ(threads_seen({"--cpus", "1"}), "1 1") << read_text(log_);
}

TEST_P(RunnerThreadsProcessTest, TheDefaultSharesTheRunnersCpusAmongItsSlots) {
  // 8 cpus over 2 slots: 4 threads each, whatever this machine has.
  EXPECT_EQ(threads_seen({"--cpus", "8", "--slots", "2"}), "4 4") << read_text(log_);
  // --threads still wins.
  EXPECT_EQ(threads_seen({"--cpus", "8", "--threads", "3"}), "3 3") << read_text(log_);
  // A fraction of a core still gets one thread.
  EXPECT_EQ(threads_seen({"--cpus", "0.5"}), "1 1") << read_text(log_);
}

INSTANTIATE_TEST_SUITE_P(Backends, RunnerThreadsProcessTest, ::testing::ValuesIn(backend_params()),
                         backend_param_name);

}  // namespace
}  // namespace tensorhub
