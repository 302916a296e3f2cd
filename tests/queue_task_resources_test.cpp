// Task resources (task.h), the fitting claim and the runners registry (runner_registry.h) on
// every backend, and what a runner detects it has (src/queue/runner_resources.h).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <fstream>
#include <thread>

#include "../src/queue/runner_resources.h"
#include "backend_factory.h"
#include "tensorhub/core/error.h"
#include "tensorhub/queue/runner.h"
#include "tensorhub/queue/task_queue.h"
#include "tensorhub/store/hub.h"
#include "test_util.h"

namespace tensorhub {
namespace {

using testing::BackendParam;
using testing::expect_error;
using testing::TempDir;

// ---- memory sizes ---------------------------------------------------------------------------

TEST(MemorySize, ParsesTheDocumentedForms) {
  // Each expected value computed by hand: K/M/G/T and KiB.. are powers of 1024, KB.. of 1000.
  const std::vector<std::pair<std::string, std::int64_t>> table = {
      {"1048576", 1048576},           {"512B", 512},
      {"8G", 8LL * 1024 * 1024 * 1024}, {"8GiB", 8589934592LL},
      {"8 GiB", 8589934592LL},        {"8gib", 8589934592LL},
      {"8Gi", 8589934592LL},          {"8GB", 8000000000LL},
      {"512M", 536870912LL},          {"512MiB", 536870912LL},
      {"64MiB", 67108864LL},          {"1.5G", 1610612736LL},
      {"2K", 2048},                   {"2KB", 2000},
      {"1T", 1099511627776LL},        {" 3 mb ", 3000000},
  };
  for (const auto& [text, bytes] : table) EXPECT_EQ(parse_memory_size(text), bytes) << text;
}

TEST(MemorySize, RefusesWhatDoesNotParseNamingTheText) {
  // The last: more digits than a double holds (std::stod would throw std::out_of_range).
  for (const std::string& text : std::vector<std::string>{"", "G", "-1G", "8X", "8 GiBs", "1.5", "1e3", "8.0.1G",
                                                          "99999999999T", std::string(400, '9')}) {
    try {
      parse_memory_size(text);
      ADD_FAILURE() << "accepted \"" << text << "\"";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
      EXPECT_NE(e.message().find("\"" + text + "\""), std::string::npos) << e.message();
      EXPECT_NE(e.message().find("GiB"), std::string::npos) << e.message();  // says what is accepted
    }
  }
}

TEST(MemorySize, FormatsInTheLargestBinaryUnitAndReadsBack) {
  EXPECT_EQ(format_memory_size(8589934592LL), "8 GiB");
  EXPECT_EQ(format_memory_size(1610612736LL), "1.5 GiB");
  EXPECT_EQ(format_memory_size(67108864), "64 MiB");
  EXPECT_EQ(format_memory_size(100), "100 B");
  EXPECT_EQ(format_memory_size(0), "0 B");
  EXPECT_EQ(format_memory_size(1536), "1.5 KiB");
  for (std::int64_t b : {8589934592LL, 67108864LL, 1610612736LL, 100LL})
    EXPECT_EQ(parse_memory_size(format_memory_size(b)), b);
}

TEST(TaskResourcesJson, ReadsCpusGpusAndMemoryAndRefusesBadValuesNamingTheField) {
  const TaskResources r = TaskResources::from_json({{"cpus", 2.5}, {"gpus", 1}, {"memory", "8GiB"}});
  EXPECT_EQ(r.cpus, 2.5);
  EXPECT_EQ(r.gpus, 1);
  EXPECT_EQ(r.memory_bytes, 8589934592LL);
  EXPECT_EQ(r.to_json(), Json({{"cpus", 2.5}, {"gpus", 1}, {"memory", "8 GiB"}, {"memory_bytes", 8589934592LL}}));
  EXPECT_EQ(TaskResources::from_json(r.to_json()).memory_bytes, r.memory_bytes);
  EXPECT_EQ(r.to_string(), "2.5 cpus, 1 GPU, 8 GiB");
  expect_error([] { TaskResources::from_json({{"gpus", 1.5}}); }, ErrorKind::kInvalidArgument, {"gpus"});
  expect_error([] { TaskResources::from_json({{"gpus", -1}}); }, ErrorKind::kInvalidArgument, {"gpus"});
  expect_error([] { TaskResources::from_json({{"cpus", -1}}); }, ErrorKind::kInvalidArgument, {"cpus"});
  expect_error([] { TaskResources::from_json({{"memory", "lots"}}); }, ErrorKind::kInvalidArgument, {"\"lots\""});
  expect_error([] { TaskResources::from_json({{"gpu", 1}}); }, ErrorKind::kInvalidArgument, {"gpu", "cpus, gpus, memory"});
  TaskResources nan;
  nan.cpus = std::nan("");
  expect_error([&] { nan.validate("x: "); }, ErrorKind::kInvalidArgument, {"x: resources cpus"});
}

// ---- the queue: stored resources, the fitting claim, the registry ----------------------------

class TaskResourcesTest : public testing::BackendTest {
 protected:
  void set_up() override {
    hub_ = std::make_unique<Hub>(db_->uri(), "res");
    q_ = std::make_unique<TaskQueue>(*hub_);
  }
  TaskQueue& q() { return *q_; }

  static TaskSpec task(const std::string& name, TaskResources r) {
    TaskSpec s;
    s.task_name = name;
    s.command = "true";
    s.resources = r;
    return s;
  }
  static RunnerInfo runner(const std::string& owner, double cpus, std::int64_t memory, std::vector<int> gpus,
                           double lease_s = 30) {
    RunnerInfo r;
    r.owner = owner;
    r.host = "h";
    r.pid = 1;
    r.cpus = cpus;
    r.memory_bytes = memory;
    r.gpus = std::move(gpus);
    r.lease_s = lease_s;
    return r;
  }

  std::unique_ptr<Hub> hub_;
  std::unique_ptr<TaskQueue> q_;
};

TEST_P(TaskResourcesTest, ResourcesAreStoredReadAndShownOnlyWhenAskedFor) {
  const auto id = q().create_task(task("t", {2.5, 1, 8589934592LL}));
  const Task t = q().get_task(id);
  EXPECT_EQ(t.spec.resources.cpus, 2.5);
  EXPECT_EQ(t.spec.resources.gpus, 1);
  EXPECT_EQ(t.spec.resources.memory_bytes, 8589934592LL);
  EXPECT_EQ(t.to_json()["resources"]["memory"], "8 GiB");
  const Task plain = q().get_task(q().create_task(task("t", {})));
  EXPECT_TRUE(plain.spec.resources.empty());
  EXPECT_FALSE(plain.to_json().contains("resources"));
}

TEST_P(TaskResourcesTest, InvalidResourcesAreRefusedNamingTheField) {
  expect_error([&] { q().create_task(task("t", {-1, 0, 0})); }, ErrorKind::kInvalidArgument, {"cpus"});
  expect_error([&] { q().create_task(task("t", {0, -2, 0})); }, ErrorKind::kInvalidArgument, {"gpus"});
  expect_error([&] { q().create_task(task("t", {0, 0, -5})); }, ErrorKind::kInvalidArgument, {"memory"});
  EXPECT_EQ(q().count_tasks().total(), 0);
}

TEST_P(TaskResourcesTest, AClaimTakesOnlyATaskThatFitsWhatIsFree) {
  const auto big = q().create_task(task("t", {0, 2, 0}));
  const TaskResources one_gpu{8, 1, 1LL << 34};
  EXPECT_FALSE(q().claim("t", "r1", 30, ClaimOrder::kOldestFirst, one_gpu));
  EXPECT_EQ(q().get_task(big).status, TaskStatus::kPending);
  const auto got = q().claim("t", "r2", 30, ClaimOrder::kOldestFirst, {8, 2, 1LL << 34});
  ASSERT_TRUE(got);
  EXPECT_EQ(got->id, big);
  EXPECT_EQ(got->spec.resources.gpus, 2);
}

TEST_P(TaskResourcesTest, ACpuOrMemoryRequestBeyondWhatIsFreeIsPassedOverForOneThatFits) {
  const auto heavy = q().create_task(task("t", {4, 0, 0}));
  const auto hungry = q().create_task(task("t", {1, 0, 1LL << 33}));
  const auto light = q().create_task(task("t", {0.5, 0, 1LL << 20}));
  const TaskResources free{2, 0, 1LL << 30};
  const auto got = q().claim("t", "r", 30, ClaimOrder::kOldestFirst, free);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->id, light);
  EXPECT_FALSE(q().claim("t", "r", 30, ClaimOrder::kOldestFirst, free));
  EXPECT_EQ(q().count_pending_that_fit({4, 0, 1LL << 33}, "t"), 2);  // heavy and hungry
  EXPECT_EQ(q().count_pending_that_fit({1, 0, 1LL << 33}, "t"), 1);  // hungry only
  EXPECT_EQ(q().count_pending_that_fit({4, 0, 1LL << 33}, "other"), 0);
  (void)heavy;
  (void)hungry;
}

TEST_P(TaskResourcesTest, ATaskThatAsksForNothingFitsARunnerWithNothingFree) {
  const auto id = q().create_task(task("t", {}));
  const auto got = q().claim("t", "r", 30, ClaimOrder::kOldestFirst, {0, 0, 0});
  ASSERT_TRUE(got);
  EXPECT_EQ(got->id, id);
  // The old signature claims anything, resources or not.
  q().create_task(task("t", {64, 8, 1LL << 40}));
  EXPECT_TRUE(q().claim("t", "r", 30));
}

TEST_P(TaskResourcesTest, RunnersRegisterAreListedLiveGoStaleAndUnregister) {
  q().register_runner(runner("a", 4, 1LL << 33, {0, 1}));
  q().register_runner(runner("b", 2, 1LL << 30, {}, 0.3));
  auto all = q().list_runners(true);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].owner, "a");
  EXPECT_EQ(all[0].project_name, "res");
  EXPECT_EQ(all[0].gpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(all[0].capacity().gpus, 2);
  EXPECT_EQ(all[0].memory_bytes, 1LL << 33);
  EXPECT_GT(all[0].last_seen, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // b's 0.3 s lease passes
  const auto live = q().list_runners(true);
  ASSERT_EQ(live.size(), 1u);
  EXPECT_EQ(live[0].owner, "a");
  const auto every = q().list_runners(false);
  ASSERT_EQ(every.size(), 2u);
  EXPECT_FALSE(every[1].live);
  EXPECT_TRUE(q().touch_runner("b"));
  EXPECT_EQ(q().list_runners(true).size(), 2u);
  EXPECT_TRUE(q().unregister_runner("b"));
  EXPECT_FALSE(q().unregister_runner("b"));
  EXPECT_FALSE(q().touch_runner("b"));
  EXPECT_EQ(q().list_runners(false).size(), 1u);
}

TEST_P(TaskResourcesTest, ARequestNoLiveRunnerCouldMeetIsRefusedAndWarnedAboutWithoutRunners) {
  // No runner: created, with a warning.
  EXPECT_NE(q().check_resources_fit(task("t", {0, 2, 0})).find("no live runner"), std::string::npos);
  q().create_task(task("t", {0, 2, 0}));
  q().register_runner(runner("small", 4, 1LL << 33, {0}));
  q().register_runner(runner("other", 64, 1LL << 40, {0, 1, 2, 3}));
  q().unregister_runner("other");
  expect_error([&] { q().create_task(task("t", {0, 2, 0})); }, ErrorKind::kInvalidArgument,
               {"needs 2 GPUs", "has 1", "--gpus"});
  expect_error([&] { q().create_task(task("t", {0, 0, 1LL << 34})); }, ErrorKind::kInvalidArgument,
               {"needs 16 GiB of memory", "8 GiB"});
  EXPECT_EQ(q().count_tasks().total(), 1);
  EXPECT_EQ(q().check_resources_fit(task("t", {4, 1, 1LL << 33})), "");
  // A runner of another task name does not count.
  RunnerInfo named = runner("named", 64, 1LL << 40, {0, 1, 2, 3});
  named.task_name = "other";
  q().register_runner(named);
  expect_error([&] { q().create_task(task("t", {0, 2, 0})); }, ErrorKind::kInvalidArgument, {"needs 2 GPUs"});
  // `task list`'s reason for the pending task created before the runners came.
  const auto why = q().waiting_for(q().find_tasks());
  ASSERT_EQ(why.size(), 1u);
  EXPECT_EQ(why.begin()->second, "needs 2 GPUs; the live runner has 1");
}

TEST_P(TaskResourcesTest, APendingTaskNoLiveRunnerTakesSaysSoAndOneThatFitsABusyRunnerSaysNothing) {
  const auto running = q().create_task(task("mnist", {}));
  const auto big = q().create_task(task("mnist", {0, 2, 0}));
  const auto plain = q().create_task(task("mnist", {}));
  const auto claimed = q().claim("mnist", "r0", 30, ClaimOrder::kOldestFirst);
  ASSERT_TRUE(claimed);
  ASSERT_EQ(claimed->id, running);
  // No runner in the project (one of another project does not count).
  Hub other(db_->uri(), "elsewhere");
  TaskQueue(other).register_runner(runner("elsewhere", 64, 1LL << 40, {0, 1, 2, 3}));
  auto why = q().waiting_for(q().find_tasks());
  EXPECT_EQ(why, (std::map<std::int64_t, std::string>{{big, "no live runner"}, {plain, "no live runner"}}));
  // Only a runner of another task name.
  RunnerInfo named = runner("named", 64, 1LL << 40, {0, 1, 2, 3});
  named.task_name = "cifar";
  q().register_runner(named);
  why = q().waiting_for(q().find_tasks());
  EXPECT_EQ(why.at(big), "no live runner takes task name \"mnist\"");
  EXPECT_EQ(why.at(plain), "no live runner takes task name \"mnist\"");
  EXPECT_FALSE(why.count(running));  // running, not pending
  // A runner of any name with one GPU: the plain task fits it (though its one slot may be
  // busy: that is a queue, not a reason), the big one does not.
  q().register_runner(runner("any", 4, 1LL << 33, {0}));
  why = q().waiting_for(q().find_tasks());
  EXPECT_EQ(why, (std::map<std::int64_t, std::string>{{big, "needs 2 GPUs; the live runner has 1"}}));
  // Once it has gone stale, the named runner alone is left again.
  q().register_runner(runner("any", 4, 1LL << 33, {0}, 0.2));
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  why = q().waiting_for(q().find_tasks());
  EXPECT_EQ(why.at(big), "no live runner takes task name \"mnist\"");
  EXPECT_TRUE(q().waiting_for({}).empty());
}

INSTANTIATE_TEST_SUITE_P(Backends, TaskResourcesTest, ::testing::ValuesIn(testing::backend_params()),
                         testing::backend_param_name);

// ---- what a runner detects -----------------------------------------------------------------

TEST(RunnerResources, CpusComeFromSlurmElseTheCores) {
  testing::EnvVars env;
  env.set("SLURM_CPUS_PER_TASK", "6");
  env.set("SLURM_CPUS_ON_NODE", "12");
  EXPECT_EQ(detail::detect_cpus(), 6);
  env.set("SLURM_CPUS_PER_TASK", nullptr);
  EXPECT_EQ(detail::detect_cpus(), 12);
  env.set("SLURM_CPUS_ON_NODE", nullptr);
  EXPECT_EQ(detail::detect_cpus(), available_cores());
  env.set("SLURM_CPUS_PER_TASK", "many");
  expect_error([] { detail::detect_cpus(); }, ErrorKind::kInvalidArgument, {"SLURM_CPUS_PER_TASK", "--cpus"});
}

TEST(RunnerResources, MemoryComesFromSlurmElseTheCgroupLimitElseMemTotal) {
  TempDir dir;
  const auto meminfo = dir.path() / "meminfo";
  std::ofstream(meminfo) << "MemTotal:       16384 kB\nMemFree:        1 kB\n";
  const auto cg = dir.path() / "cg";
  std::filesystem::create_directories(cg);
  detail::CgroupDirs v1{"", cg, ""};
  testing::EnvVars env;
  env.set("SLURM_MEM_PER_NODE", nullptr);
  env.set("SLURM_MEM_PER_CPU", nullptr);
  // No limit file: MemTotal (16384 KiB).
  EXPECT_EQ(detail::detect_memory_bytes(2, v1, meminfo), 16384 * 1024);
  // v1's "no limit" (PAGE_COUNTER_MAX pages) is no limit.
  std::ofstream(cg / "memory.limit_in_bytes") << "9223372036854771712\n";
  EXPECT_EQ(detail::detect_memory_bytes(2, v1, meminfo), 16384 * 1024);
  std::ofstream(cg / "memory.limit_in_bytes") << "4194304\n";
  std::string source;
  EXPECT_EQ(detail::detect_memory_bytes(2, v1, meminfo, &source), 4194304);
  EXPECT_EQ(source, "cgroup");
  // v2: memory.max, "max" meaning none.
  detail::CgroupDirs v2{cg, "", ""};
  std::ofstream(cg / "memory.max") << "max\n";
  EXPECT_EQ(detail::detect_memory_bytes(2, v2, meminfo), 16384 * 1024);
  std::ofstream(cg / "memory.max") << "2097152\n";
  EXPECT_EQ(detail::detect_memory_bytes(2, v2, meminfo), 2097152);
  env.set("SLURM_MEM_PER_CPU", "100");
  EXPECT_EQ(detail::detect_memory_bytes(3, v2, meminfo), 300LL << 20);
  env.set("SLURM_MEM_PER_NODE", "1024");
  EXPECT_EQ(detail::detect_memory_bytes(3, v2, meminfo, &source), 1024LL << 20);
  EXPECT_EQ(source, "SLURM_MEM_PER_NODE");
}

TEST(RunnerResources, CgroupDirsAreFoundFromProcSelfCgroupAndMountinfo) {
  // A cgroup v1/v2 hybrid as on this test machine, and a container's v2 mount whose root is not "/".
  const std::string mountinfo =
      "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
      "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
      "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
  const auto d = detail::cgroup_dirs("4:memory:/job/42\n1:cpu,cpuacct:/job/42\n0::/user.slice\n", mountinfo);
  EXPECT_EQ(d.v1_memory, "/sys/fs/cgroup/memory/job/42");
  EXPECT_EQ(d.v1_cpu, "/sys/fs/cgroup/cpu/job/42");
  EXPECT_EQ(d.v2, "/sys/fs/cgroup/unified/user.slice");
  const auto c = detail::cgroup_dirs("0::/kubepods/pod1/c1\n",
                                     "50 40 0:40 /kubepods/pod1/c1 /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n");
  EXPECT_EQ(c.v2, "/sys/fs/cgroup");
  EXPECT_TRUE(c.v1_memory.empty());
}

TEST(RunnerResources, GpusComeFromCudaVisibleDevicesElseSlurm) {
  testing::EnvVars env;
  env.set("CUDA_VISIBLE_DEVICES", "2,3");
  env.set("SLURM_STEP_GPUS", "0,1");
  env.set("SLURM_JOB_GPUS", "5");
  std::string source;
  EXPECT_EQ(detail::detect_gpus(&source), (std::vector<int>{2, 3}));
  EXPECT_EQ(source, "CUDA_VISIBLE_DEVICES");
  env.set("CUDA_VISIBLE_DEVICES", nullptr);
  EXPECT_EQ(detail::detect_gpus(), (std::vector<int>{0, 1}));
  env.set("SLURM_STEP_GPUS", nullptr);
  EXPECT_EQ(detail::detect_gpus(), (std::vector<int>{5}));
  env.set("SLURM_JOB_GPUS", nullptr);
  EXPECT_TRUE(detail::detect_gpus().empty());
  env.set("CUDA_VISIBLE_DEVICES", "GPU-8f3c1a2b-0000");  // a UUID cannot be handed out by number
  EXPECT_TRUE(detail::detect_gpus().empty());
  env.set("CUDA_VISIBLE_DEVICES", "");
  EXPECT_TRUE(detail::detect_gpus().empty());
}

TEST(RunnerResources, GpuListsExpandRangesAndRefuseAnIdNamedTwice) {
  EXPECT_EQ(detail::parse_gpu_ids("0,2-4", "--gpus"), (std::vector<int>{0, 2, 3, 4}));
  EXPECT_TRUE(detail::parse_gpu_ids("", "--gpus").empty());
  expect_error([] { detail::parse_gpu_ids("0,1,0", "--gpus"); }, ErrorKind::kInvalidArgument, {"--gpus", "GPU 0 twice"});
  expect_error([] { detail::parse_gpu_ids("0,x", "--gpus"); }, ErrorKind::kInvalidArgument, {"--gpus", "\"x\""});
  expect_error([] { detail::parse_gpu_ids("-1", "--gpus"); }, ErrorKind::kInvalidArgument, {"--gpus"});
  expect_error([] { detail::parse_gpu_ids("3-1", "--gpus"); }, ErrorKind::kInvalidArgument, {"--gpus", "runs backwards; write it 1-3"});
}

TEST(RunnerResources, SlurmJobIdNamesTheArrayElement) {
  testing::EnvVars env;
  env.set("SLURM_JOB_ID", "1001");
  env.set("SLURM_ARRAY_JOB_ID", "1000");
  env.set("SLURM_ARRAY_TASK_ID", "3");
  EXPECT_EQ(detail::detect_slurm_job_id(), "1000_3");
  env.set("SLURM_ARRAY_TASK_ID", nullptr);
  EXPECT_EQ(detail::detect_slurm_job_id(), "1001");
  env.set("SLURM_JOB_ID", nullptr);
  EXPECT_EQ(detail::detect_slurm_job_id(), "");
}

TEST(RunnerResources, AGpuLockHeldByAnotherHolderIsBusyUntilReleased) {
  TempDir dir;
  detail::GpuLocks a(dir.path(), false), b(dir.path(), false);  // not /run/lock: real runners' locks
  EXPECT_EQ(a.dir(), dir.path());
  EXPECT_TRUE(a.try_lock(7));
  EXPECT_FALSE(b.try_lock(7));  // flock: another open file description holds it
  EXPECT_TRUE(b.try_lock(8));
  a.unlock(7);
  EXPECT_TRUE(b.try_lock(7));
}

}  // namespace
}  // namespace tensorhub
