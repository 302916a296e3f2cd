// What an attempt used (issue 25): the task_attempts rows on both backends, the GPU sampler's
// logic with an injected fake reader (no GPU here), a missing NVML library as "no samples", and
// the choice between cgroup and rusage figures.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cmath>
#include <fstream>

#include "../src/queue/attempt_usage.h"
#include "backend_factory.h"
#include "tensorhub/queue/task_attempt.h"
#include "tensorhub/queue/task_queue.h"
#include "tensorhub/store/hub.h"

namespace tensorhub {
namespace {

using namespace testing;

class TaskAttemptRowsTest : public BackendTest {
 protected:
  void set_up() override {
    hub = std::make_unique<Hub>(db_->uri(), "p");
    queue = std::make_unique<TaskQueue>(*hub);
  }
  std::int64_t create() {
    TaskSpec s;
    s.task_name = "t";
    s.command = "true";
    return queue->create_task(s);
  }
  std::unique_ptr<Hub> hub;
  std::unique_ptr<TaskQueue> queue;
};

TaskAttempt row(std::int64_t task_id, int attempt, const std::string& owner = "o") {
  TaskAttempt a;
  a.task_id = task_id;
  a.attempt = attempt;
  a.owner = owner;
  a.host = "h";
  return a;
}

TEST_P(TaskAttemptRowsTest, BeginEndAndFindRoundTripEveryField) {
  const auto id = create();
  TaskAttempt a;
  a.task_id = id;
  a.attempt = 1;
  a.owner = "host-a:12";
  a.host = "host-a";
  a.cpus = 2.5;
  a.memory_limit_bytes = 8LL << 30;
  a.gpus = {1, 3};
  queue->begin_attempt(a);
  auto rows = queue->find_attempts(id);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].outcome, "running");
  EXPECT_GT(rows[0].started_at, 0);
  EXPECT_EQ(rows[0].finished_at, 0);
  EXPECT_EQ(rows[0].gpus, (std::vector<int>{1, 3}));
  EXPECT_EQ(rows[0].memory_limit_bytes, 8LL << 30);

  AttemptUsage u;
  u.wall_s = 12.5;
  u.cpu_s = 3.25;
  u.peak_memory_bytes = 123456789;
  u.memory_source = "rusage";
  u.gpu_samples = {{0, 10, 1000, 1}, {0, 30, 2000, 3}, {5, 50, 3000, 1}};
  EXPECT_TRUE(queue->end_attempt(id, 1, "failed", "the task exited with status 3", u));
  EXPECT_FALSE(queue->end_attempt(id, 7, "failed", "", u));  // no such attempt
  rows = queue->find_attempts(id);
  ASSERT_EQ(rows.size(), 1u);
  const TaskAttempt& r = rows[0];
  EXPECT_EQ(r.task_id, id);
  EXPECT_EQ(r.attempt, 1);
  EXPECT_EQ(r.project_name, "p");
  EXPECT_EQ(r.owner, "host-a:12");
  EXPECT_EQ(r.host, "host-a");
  EXPECT_EQ(r.outcome, "failed");
  EXPECT_EQ(r.error, "the task exited with status 3");
  EXPECT_DOUBLE_EQ(r.cpus, 2.5);
  EXPECT_DOUBLE_EQ(r.usage.wall_s, 12.5);
  EXPECT_DOUBLE_EQ(r.usage.cpu_s, 3.25);
  EXPECT_EQ(r.usage.peak_memory_bytes, 123456789);
  EXPECT_EQ(r.usage.memory_source, "rusage");
  ASSERT_EQ(r.usage.gpu_samples.size(), 3u);
  EXPECT_DOUBLE_EQ(r.usage.gpu_samples[2].t, 5);
  EXPECT_DOUBLE_EQ(r.usage.gpu_samples[2].utilization, 50);
  EXPECT_EQ(r.usage.gpu_samples[2].memory_bytes, 3000);
  EXPECT_EQ(r.usage.gpu_samples[1].gpu, 3);
  EXPECT_GE(r.finished_at, r.started_at);
  const Json j = r.to_json();
  EXPECT_DOUBLE_EQ(j.at("gpu_utilization_mean").get<double>(), 30.0);  // (10 + 30 + 50) / 3
  EXPECT_DOUBLE_EQ(j.at("gpu_utilization_max").get<double>(), 50.0);
  EXPECT_EQ(j.at("gpu_samples").size(), 3u);
}

TEST_P(TaskAttemptRowsTest, FindAttemptsOfManyTasksInOrderAndOnlyThisProjects) {
  const auto a = create(), b = create(), c = create();
  for (int attempt : {2, 1}) queue->begin_attempt(row(a, attempt, "o"));
  queue->begin_attempt(row(c, 1, "o"));
  Hub other_hub(db_->uri(), "other");
  TaskQueue other(other_hub);
  other.begin_attempt(row(b, 1, "o"));  // same id, another project
  const auto found = queue->find_attempts(std::vector<std::int64_t>{a, b, c});
  ASSERT_EQ(found.size(), 2u);
  ASSERT_EQ(found.at(a).size(), 2u);
  EXPECT_EQ(found.at(a)[0].attempt, 1);
  EXPECT_EQ(found.at(a)[1].attempt, 2);
  EXPECT_EQ(found.at(c).size(), 1u);
  EXPECT_EQ(found.count(b), 0u);
  // More ids than one query takes: every one is still found.
  std::vector<std::int64_t> many;
  for (std::int64_t i = 0; i < 1200; ++i) many.push_back(1000000 + i);
  many.push_back(c);
  EXPECT_EQ(queue->find_attempts(many).at(c).size(), 1u);
}

TEST_P(TaskAttemptRowsTest, AnExpiredLeaseMarksTheRunningAttemptLost) {
  const auto id = create();
  const auto task = queue->claim("t", "dead-runner", 0.05);
  ASSERT_TRUE(task);
  queue->begin_attempt(row(id, task->attempt, "dead-runner"));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(queue->reap_expired(), 1);
  const auto rows = queue->find_attempts(id);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].outcome, "lost");
  EXPECT_NE(rows[0].error.find("lease of runner dead-runner expired"), std::string::npos) << rows[0].error;
  EXPECT_GT(rows[0].finished_at, 0);
}

TEST_P(TaskAttemptRowsTest, DeletingTasksDeletesTheirAttemptsOnly) {
  const auto gone = create(), kept = create();
  for (int attempt : {1, 2}) queue->begin_attempt(row(gone, attempt));
  queue->begin_attempt(row(kept, 1));
  EXPECT_EQ(queue->delete_tasks({{"id", gone}}), 1);
  EXPECT_TRUE(queue->find_attempts(gone).empty());
  EXPECT_EQ(queue->find_attempts(kept).size(), 1u);
  // No row is left behind, whatever project: the table holds the kept task's row alone.
  EXPECT_EQ(hub->sql().execute("SELECT COUNT(*) FROM task_attempts").int64(0, 0), 1);
}

INSTANTIATE_TEST_SUITE_P(Backends, TaskAttemptRowsTest, ::testing::ValuesIn(backend_params()), backend_param_name);

TEST(GpuSampler, SamplesEachGpuAtItsIntervalThroughTheInjectedReader) {
  std::vector<int> asked;
  GpuReader fake = [&](int gpu) -> std::optional<GpuReading> {
    asked.push_back(gpu);
    return GpuReading{gpu * 10.0, gpu * 1000LL};
  };
  GpuSampler s({2, 5}, fake, 5, 500);
  EXPECT_TRUE(s.poll(0));
  EXPECT_FALSE(s.poll(4.9));  // not due
  EXPECT_NEAR(s.due_in(4.9), 0.1, 1e-9);
  EXPECT_TRUE(s.poll(5.0));
  EXPECT_EQ(asked, (std::vector<int>{2, 5, 2, 5}));
  ASSERT_EQ(s.samples().size(), 4u);
  EXPECT_DOUBLE_EQ(s.samples()[3].t, 5.0);
  EXPECT_EQ(s.samples()[3].gpu, 5);
  EXPECT_DOUBLE_EQ(s.samples()[3].utilization, 50);
  EXPECT_EQ(s.samples()[3].memory_bytes, 5000);
}

TEST(GpuSampler, DownsamplesToTheCapEvenlyOverTheWholeAttempt) {
  GpuReader fake = [](int) -> std::optional<GpuReading> { return GpuReading{1, 1}; };
  GpuSampler s({0}, fake, 1, 10);
  // An hour of polling every 0.5 s: never more than 10 samples, spread over the hour.
  for (double t = 0; t <= 3600; t += 0.5) s.poll(t);
  ASSERT_LE(s.samples().size(), 10u);
  ASSERT_GE(s.samples().size(), 5u);
  EXPECT_DOUBLE_EQ(s.samples().front().t, 0);
  EXPECT_GT(s.samples().back().t, 3600 * 0.5);  // the end of the attempt is still there
  for (std::size_t i = 1; i < s.samples().size(); ++i) {
    const double gap = s.samples()[i].t - s.samples()[i - 1].t;
    EXPECT_DOUBLE_EQ(gap, s.samples()[1].t - s.samples()[0].t) << "uneven at " << i;
  }
  EXPECT_GE(s.interval_s(), 3600.0 / 10 / 2);  // the interval grew with the attempt
}

TEST(GpuSampler, AReaderThatFailsOrNoneGivesNoSamples) {
  GpuSampler failing({0}, [](int) -> std::optional<GpuReading> { return std::nullopt; }, 1, 10);
  EXPECT_TRUE(failing.poll(0));
  EXPECT_TRUE(failing.samples().empty());
  GpuSampler none({0}, nullptr, 1, 10);
  EXPECT_FALSE(none.active());
  EXPECT_FALSE(none.poll(0));
  GpuSampler no_gpus({}, [](int) -> std::optional<GpuReading> { return GpuReading{}; }, 1, 10);
  EXPECT_FALSE(no_gpus.poll(0));
}

TEST(NvmlReader, AMissingLibraryIsSilentlyNoReader) {
  EXPECT_EQ(nvml_gpu_reader("libtensorhub-no-such-nvml.so.1"), nullptr);
  // A library that is there but is not NVML (no nvmlInit_v2): no reader either.
  EXPECT_EQ(nvml_gpu_reader("libm.so.6"), nullptr);
}

TEST(AttemptMeter, WithoutGpusItNeverWakesTheRunnerForSamples) {
  AttemptMeter m({}, nullptr);
  EXPECT_GT(m.due_in(), 1e9);
  m.sample();
  EXPECT_TRUE(m.usage().gpu_samples.empty());
}

TEST(FillUsage, CgroupFiguresWinOverRusageAndSayWhere) {
  rusage ru{};
  ru.ru_utime = {1, 500000};
  ru.ru_stime = {0, 250000};
  ru.ru_maxrss = 2048;  // kilobytes on Linux
  AttemptUsage from_rusage;
  fill_usage(from_rusage, {}, &ru);
  EXPECT_DOUBLE_EQ(from_rusage.cpu_s, 1.75);
  EXPECT_EQ(from_rusage.peak_memory_bytes, 2048 * 1024);
  EXPECT_EQ(from_rusage.memory_source, "rusage");
  AttemptUsage from_cgroup;
  fill_usage(from_cgroup, {3.5, 1 << 30}, &ru);
  EXPECT_DOUBLE_EQ(from_cgroup.cpu_s, 3.5);
  EXPECT_EQ(from_cgroup.peak_memory_bytes, 1 << 30);
  EXPECT_EQ(from_cgroup.memory_source, "cgroup");
  AttemptUsage unknown;
  fill_usage(unknown, {}, nullptr);
  EXPECT_EQ(unknown.memory_source, "");
}

TEST(CgroupFiles, CpuStatAndPeakMemoryAreReadFromTheirFiles) {
  TempDir dir;
  const auto v2 = dir.path() / "v2", v1 = dir.path() / "v1";
  std::filesystem::create_directories(v2);
  std::filesystem::create_directories(v1);
  // The format of Documentation/admin-guide/cgroup-v2.rst: flat keyed "key value" lines.
  std::ofstream(v2 / "cpu.stat") << "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n";
  EXPECT_DOUBLE_EQ(*cgroup_cpu_seconds(v2), 2.5);
  EXPECT_FALSE(cgroup_peak_memory(v2, {}).has_value());
  std::ofstream(v1 / "memory.max_usage_in_bytes") << "104857600\n";
  EXPECT_EQ(*cgroup_peak_memory(v2, v1), 104857600);
  std::ofstream(v2 / "memory.peak") << "209715200\n";
  EXPECT_EQ(*cgroup_peak_memory(v2, v1), 209715200);  // v2 first
  EXPECT_FALSE(cgroup_cpu_seconds(dir.path() / "absent").has_value());
}

}  // namespace
}  // namespace tensorhub
