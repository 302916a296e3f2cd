// TaskContext::report_epoch: per-epoch metrics into the hub's trials collection under a runner
// (the environment and set_result are tested in queue_task_queue_test.cpp).
#include "tensorhub/queue/task_context.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "tensorhub/queue/task_queue.h"
#include "tensorhub/store/hub.h"
#include "tensorhub/queue/epoch_report.h"
#include "test_util.h"

namespace tensorhub {
namespace {

using testing::TempDir;

// Sets the runner's variables for one test and removes them afterwards.
class TaskContextReportTest : public ::testing::Test {
 protected:
  TempDir dir;
  std::string uri = "sqlite://" + (dir.path() / "hub.db").string();

  void SetUp() override {
    setenv("TENSORHUB_URI", uri.c_str(), 1);
    setenv("TENSORHUB_PROJECT", "ctx", 1);
    setenv("TENSORHUB_HYPER_PARAMETERS", R"({"units": 64, "optimizer": "Adam"})", 1);
  }
  void TearDown() override {
    for (const char* v : {"TENSORHUB_URI", "TENSORHUB_PROJECT", "TENSORHUB_HYPER_PARAMETERS", "TENSORHUB_TASK_ID",
                          "TENSORHUB_RESULT_FILE"})
      unsetenv(v);
  }
};

// The task a runner would have started, in the hub the variables name; returns its id.
std::int64_t create_task(const std::string& uri) {
  Hub hub(uri, "ctx");
  TaskSpec spec;
  spec.task_name = "t";
  spec.command = "true";
  return TaskQueue(hub).create_task(spec);
}

TEST_F(TaskContextReportTest, ReportEpochUnderARunnerStoresATrialDocument) {
  const std::int64_t id = create_task(uri);
  setenv("TENSORHUB_TASK_ID", std::to_string(id).c_str(), 1);
  TaskContext ctx = TaskContext::from_environment();
  ASSERT_TRUE(ctx.under_runner());
  EXPECT_EQ(ctx.get<int>("units", 0), 64);
  ctx.report_epoch(0, {{"loss", 0.5}, {"val_accuracy", 0.8}});
  ctx.report_epoch(1, {{"loss", 0.25}, {"val_accuracy", 0.875}});

  Hub hub(uri, "ctx");
  const auto trials = hub.find_documents(kEpochReports, {{"kind", "epoch"}, {"task_id", id}});
  ASSERT_EQ(trials.size(), 2u);  // oldest first
  EXPECT_EQ(trials[0].tags["epoch"], 0);
  EXPECT_EQ(trials[0].tags["logs"], Json({{"loss", 0.5}, {"val_accuracy", 0.8}}));
  EXPECT_EQ(trials[1].tags["epoch"], 1);
  EXPECT_EQ(trials[1].tags["logs"]["val_accuracy"], 0.875);
  EXPECT_TRUE(Hub(uri, "other").find_documents(kEpochReports, Json::object()).empty());  // the runner's project only
}

TEST_F(TaskContextReportTest, ReportEpochOutsideARunnerDoesNothing) {
  TaskContext ctx = TaskContext::from_environment();
  ASSERT_FALSE(ctx.under_runner());
  ctx.report_epoch(0, {{"loss", 0.5}});
  // Not even opened: no database file was created.
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "hub.db"));
}

TEST_F(TaskContextReportTest, ReportEpochForATaskNotInTheHubIsNotFound) {
  create_task(uri);  // task 1
  setenv("TENSORHUB_TASK_ID", "999", 1);
  TaskContext ctx = TaskContext::from_environment();
  testing::expect_error([&] { ctx.report_epoch(0, {{"loss", 0.5}}); }, ErrorKind::kNotFound,
                        {"task 999 (TENSORHUB_TASK_ID) is not in project \"ctx\""});
  EXPECT_TRUE(Hub(uri, "ctx").find_documents(kEpochReports, Json::object()).empty());
}

TEST_F(TaskContextReportTest, ReportEpochWithoutAHubCreatesNone) {
  setenv("TENSORHUB_TASK_ID", "1", 1);
  TaskContext ctx = TaskContext::from_environment();
  testing::expect_error([&] { ctx.report_epoch(0, {{"loss", 0.5}}); }, ErrorKind::kNotFound, {"no hub at"});
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "hub.db"));
}

TEST_F(TaskContextReportTest, ReportEpochRejectsNonObjectLogs) {
  setenv("TENSORHUB_TASK_ID", "3", 1);
  TaskContext ctx = TaskContext::from_environment();
  testing::expect_error([&] { ctx.report_epoch(0, Json::array({1, 2})); }, ErrorKind::kInvalidArgument,
                        {"logs must be a JSON object"});
}

}  // namespace
}  // namespace tensorhub
