// What an attempt used (issue 25), measured by a real `tensorhub runner` on both backends, with
// and without task cgroups (CPU from the cgroup's cpu.stat, else wait4's rusage): CPU seconds
// against the task's own count of them, peak memory of a task that touches 100 MiB, wall time of
// a sleep, and each attempt's outcome (finished, failed, released at a SIGTERM, lost with its
// SIGKILLed runner).
#include <gtest/gtest.h>
#include <signal.h>

#include <thread>

#include "backend_factory.h"
#include "process_util.h"
#include "tensorhub/queue/task_attempt.h"
#include "tensorhub/queue/task_queue.h"
#include "tensorhub/store/hub.h"

namespace tensorhub {
namespace {

using namespace std::chrono_literals;
using namespace testing;

const std::string kPython = "/usr/bin/python3";

class AttemptUsageTest : public ::testing::TestWithParam<std::tuple<BackendParam, bool>> {
 protected:
  TempDir dir;
  std::string log = (dir.path() / "runner.log").string();
  std::unique_ptr<TestDatabase> db;
  std::unique_ptr<Hub> hub;
  std::unique_ptr<TaskQueue> queue;
  bool cgroups() const { return std::get<1>(GetParam()); }

  void SetUp() override {
    db = std::get<0>(GetParam()).make();
    if (!db) GTEST_SKIP() << kNoPostgres;
    if (cgroups() && !cgroups_available()) GTEST_SKIP() << "no writable cgroup v2 hierarchy here";
    if (::access(kPython.c_str(), X_OK) != 0) GTEST_SKIP() << kPython << " is missing";
    hub = std::make_unique<Hub>(db->uri(), "p");
    queue = std::make_unique<TaskQueue>(*hub);
  }

  std::int64_t create(const std::string& command, int max_attempts = 1) {
    TaskSpec s;
    s.task_name = "t";
    s.command = command;
    s.max_attempts = max_attempts;
    return queue->create_task(s);
  }

  std::vector<std::string> runner_args(const std::string& lease = "30") {
    std::vector<std::string> args = {kTensorhub, "runner", "--hub", db->uri(), "--project", "p", "--task-name", "t",
                                     "--poll", "0.05", "--lease", lease};
    if (!cgroups()) args.push_back("--no-task-cgroups");
    return args;
  }

  // Runs a runner until the queue is idle.
  void drain() {
    auto args = runner_args();
    args.insert(args.end(), {"--exit-when-idle", "0.3"});
    ASSERT_EQ(wait_exit(spawn(args, log)), 0) << read_text(log);
  }

  TaskAttempt only_attempt(std::int64_t id) {
    const auto rows = queue->find_attempts(id);
    EXPECT_EQ(rows.size(), 1u) << read_text(log);
    return rows.empty() ? TaskAttempt{} : rows[0];
  }
};

TEST_P(AttemptUsageTest, CpuSecondsMatchTheTasksOwnCount) {
  // The task burns about 1 s of CPU and writes its own count (os.times: user + system of the
  // process) to its result: the attempt's cpu_s must match it, plus the shell's few milliseconds.
  const auto id = create(kPython + " -c \"import os, json\nt = os.times()\nwhile os.times().user - t.user < 1.0: pass\n"
                                   "t = os.times()\njson.dump({'cpu': t.user + t.system}, "
                                   "open(os.environ['TENSORHUB_RESULT_FILE'], 'w'))\"");
  drain();
  const Task task = queue->get_task(id);
  ASSERT_EQ(task.status, TaskStatus::kFinished) << read_text(log);
  const double own = task.result.at("cpu").get<double>();
  const TaskAttempt a = only_attempt(id);
  EXPECT_EQ(a.outcome, "finished");
  EXPECT_GE(own, 1.0);
  EXPECT_GE(a.usage.cpu_s, own - 0.02) << "cgroups " << cgroups();
  EXPECT_LE(a.usage.cpu_s, own + 0.5) << "cgroups " << cgroups();
  EXPECT_GE(a.usage.wall_s, a.usage.cpu_s - 0.05);  // one thread: no more CPU than wall time
  EXPECT_GT(a.started_at, 0);
  EXPECT_GE(a.finished_at, a.started_at);
  EXPECT_EQ(a.owner.empty(), false);
}

TEST_P(AttemptUsageTest, PeakMemoryOfATaskThatTouches100MiBIsAtLeastThat) {
  const std::int64_t mib = 1 << 20;
  // bytes * n writes every byte, so every page is resident.
  const auto id = create(kPython + " -c \"b = b'x' * (100 * 1024 * 1024); print(len(b))\"");
  drain();
  ASSERT_EQ(queue->get_task(id).status, TaskStatus::kFinished) << read_text(log);
  const TaskAttempt a = only_attempt(id);
  EXPECT_GE(a.usage.peak_memory_bytes, 100 * mib);
  EXPECT_LT(a.usage.peak_memory_bytes, 1024 * mib);
  EXPECT_TRUE(a.usage.memory_source == "cgroup" || a.usage.memory_source == "rusage") << a.usage.memory_source;
}

TEST_P(AttemptUsageTest, WallTimeIsTheSleepsLengthAndAFailedAttemptSaysWhy) {
  const auto slept = create("sleep 1.5; echo '{}' > $TENSORHUB_RESULT_FILE");
  const auto failed = create("echo bad; exit 3");
  drain();
  const TaskAttempt a = only_attempt(slept);
  EXPECT_EQ(a.outcome, "finished");
  EXPECT_GE(a.usage.wall_s, 1.5);
  EXPECT_LT(a.usage.wall_s, 2.5);
  EXPECT_LT(a.usage.cpu_s, 0.5);  // sleeping costs no CPU
  const TaskAttempt f = only_attempt(failed);
  EXPECT_EQ(f.outcome, "failed");
  EXPECT_NE(f.error.find("exited with status 3"), std::string::npos) << f.error;
  EXPECT_GT(f.finished_at, 0);
}

TEST_P(AttemptUsageTest, AnAttemptStoppedBySigtermIsReleased) {
  const auto id = create("sleep 300");
  const pid_t runner = spawn(runner_args(), log);
  ASSERT_TRUE(eventually([&] { return queue->find_attempts(id).size() == 1; }, 20s)) << read_text(log);
  std::this_thread::sleep_for(300ms);
  ::kill(runner, SIGTERM);
  ASSERT_EQ(wait_exit(runner), 0) << read_text(log);
  const auto rows = queue->find_attempts(id);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].outcome, "released");
  EXPECT_GE(rows[0].usage.wall_s, 0.3);
  EXPECT_EQ(queue->get_task(id).status, TaskStatus::kPending);
}

TEST_P(AttemptUsageTest, ASigkilledRunnersAttemptIsLostWhenItsLeaseExpires) {
  const auto id = create("sleep 300");
  const pid_t runner = spawn(runner_args("1"), log);
  ASSERT_TRUE(eventually([&] { return queue->find_attempts(id).size() == 1; }, 20s)) << read_text(log);
  ::kill(runner, SIGKILL);
  wait_exit(runner);
  EXPECT_EQ(queue->find_attempts(id).at(0).outcome, "running");  // nobody has said otherwise yet
  ASSERT_TRUE(eventually([&] { return queue->reap_expired() == 1; }, 10s));
  const auto rows = queue->find_attempts(id);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].outcome, "lost");
  EXPECT_NE(rows[0].error.find("expired"), std::string::npos) << rows[0].error;
}

TEST_P(AttemptUsageTest, ATaskWithAMemoryLimitHasItsPeakFromItsCgroup) {
  // Where the runner enforces the limit (the row records it), the attempt has its own memory
  // cgroup, whose peak covers the whole process tree; ru_maxrss would see one process only.
  const std::int64_t mib = 1 << 20;
  TaskSpec s;
  s.task_name = "t";
  s.max_attempts = 1;
  s.command = kPython + " -c \"b = b'x' * (100 * 1024 * 1024); print(len(b))\"";
  s.resources.memory_bytes = 512 * mib;
  const auto id = queue->create_task(s);
  drain();
  ASSERT_EQ(queue->get_task(id).status, TaskStatus::kFinished) << read_text(log);
  const TaskAttempt a = only_attempt(id);
  EXPECT_GE(a.usage.peak_memory_bytes, 100 * mib);
  EXPECT_LE(a.usage.peak_memory_bytes, 512 * mib);
  if (a.memory_limit_bytes == 512 * mib) EXPECT_EQ(a.usage.memory_source, "cgroup") << read_text(log);
  else EXPECT_FALSE(cgroups()) << "the runner did not enforce the limit: " << read_text(log);
}

TEST_P(AttemptUsageTest, TheRowHoldsTheAttemptsGpusCoresAndMemoryLimit) {
  // The task writes the CUDA_VISIBLE_DEVICES it got: the row's gpus must be that device.
  TaskSpec s;
  s.task_name = "t";
  s.max_attempts = 1;
  s.command = "echo \"{\\\"cuda\\\": \\\"$CUDA_VISIBLE_DEVICES\\\"}\" > $TENSORHUB_RESULT_FILE";
  s.resources = {1, 1, 64LL << 20};
  const auto id = queue->create_task(s);
  auto args = runner_args();
  args.insert(args.end(), {"--exit-when-idle", "0.3", "--gpus", "3,5"});
  ASSERT_EQ(wait_exit(spawn(args, log)), 0) << read_text(log);
  const Task task = queue->get_task(id);
  ASSERT_EQ(task.status, TaskStatus::kFinished) << read_text(log) << task.error;
  const TaskAttempt a = only_attempt(id);
  ASSERT_EQ(a.gpus.size(), 1u);
  EXPECT_EQ(task.result.at("cuda").get<std::string>(), std::to_string(a.gpus[0]));
  EXPECT_TRUE(a.gpus[0] == 3 || a.gpus[0] == 5);
  EXPECT_DOUBLE_EQ(a.cpus, 1);
  // The limit is recorded where the runner enforces it (cgroups), else 0.
  EXPECT_TRUE(a.memory_limit_bytes == (64LL << 20) || (!cgroups() && a.memory_limit_bytes == 0)) << a.memory_limit_bytes;
  EXPECT_TRUE(a.usage.gpu_samples.empty());  // no NVIDIA library here: no samples, silently
}

// The standard output of `tensorhub ARGS...` (each argument single-quoted for the shell).
std::string stdout_of(const std::vector<std::string>& args) {
  std::string command;
  for (const auto& a : args) command += " '" + a + "'";
  FILE* f = ::popen(command.c_str(), "r");
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
  ::pclose(f);
  return out;
}

TEST_P(AttemptUsageTest, TaskShowAndTaskListJsonCarryTheAttempts) {
  const auto id = create("sleep 0.3; echo '{}' > $TENSORHUB_RESULT_FILE");
  drain();
  const TaskAttempt stored = only_attempt(id);
  const Json shown = Json::parse(stdout_of({kTensorhub, "task", "show", std::to_string(id), "--hub", db->uri(),
                                            "--project", "p"}));
  ASSERT_EQ(shown.at("attempts").size(), 1u) << shown.dump(2);
  const Json& a = shown.at("attempts")[0];
  EXPECT_EQ(a.at("attempt"), 1);
  EXPECT_EQ(a.at("outcome"), "finished");
  EXPECT_EQ(a.at("owner"), stored.owner);
  EXPECT_DOUBLE_EQ(a.at("wall_s").get<double>(), stored.usage.wall_s);
  EXPECT_GE(a.at("wall_s").get<double>(), 0.3);
  EXPECT_DOUBLE_EQ(a.at("cpu_s").get<double>(), stored.usage.cpu_s);
  EXPECT_EQ(a.at("peak_memory_bytes"), stored.usage.peak_memory_bytes);
  EXPECT_TRUE(a.at("gpu_samples").is_array());
  EXPECT_TRUE(a.at("gpu_utilization_mean").is_null());  // no GPU here
  const Json listed = Json::parse(stdout_of({kTensorhub, "task", "list", "--json", "--hub", db->uri(), "--project", "p"}));
  ASSERT_EQ(listed.size(), 1u);
  ASSERT_EQ(listed[0].at("attempts").size(), 1u);
  EXPECT_EQ(listed[0].at("attempts")[0].at("outcome"), "finished");
  EXPECT_DOUBLE_EQ(listed[0].at("attempts")[0].at("wall_s").get<double>(), stored.usage.wall_s);
  EXPECT_FALSE(listed[0].at("attempts")[0].contains("gpu_samples"));  // lists keep the summary only
}

INSTANTIATE_TEST_SUITE_P(Runner, AttemptUsageTest,
                         ::testing::Combine(::testing::ValuesIn(backend_params()), ::testing::Bool()),
                         [](const auto& info) {
                           return std::get<0>(info.param).name + (std::get<1>(info.param) ? "_cgroups" : "_no_cgroups");
                         });

}  // namespace
}  // namespace tensorhub
