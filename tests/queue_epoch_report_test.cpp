// Epoch reports (queue/epoch_report.h) on every backend: the stored form that TaskContext,
// the CLI and the tuner share, and the reading of a task's reports in id order.
#include <gtest/gtest.h>

#include <numeric>

#include "backend_factory.h"
#include "tensorhub/core/error.h"
#include "tensorhub/queue/epoch_report.h"

namespace tensorhub {
namespace {

using testing::BackendParam;

// Where hubs of the store's schema 2 kept epoch reports: the tuner's collection.
constexpr Collection kOldPlace{"trials"};

class EpochReportTest : public testing::BackendTest {
 protected:
  void set_up() override { hub_ = std::make_unique<Hub>(db_->uri(), "test"); }
  std::unique_ptr<Hub> hub_;
};

TEST_P(EpochReportTest, StoresTheDocumentTheTunerAndTheCliRead) {
  const std::int64_t id = save_epoch_report(*hub_, 7, 2, 0, {{"loss", 0.5}});
  const auto docs = hub_->find_documents(kEpochReports, {{"kind", "epoch"}});
  ASSERT_EQ(docs.size(), 1u);
  EXPECT_EQ(docs[0].id, id);
  EXPECT_EQ(docs[0].tags,
            (Json{{"kind", "epoch"}, {"task_id", 7}, {"attempt", 2}, {"epoch", 0}, {"logs", {{"loss", 0.5}}}}));
  testing::expect_error([&] { save_epoch_report(*hub_, 7, 2, 0, Json::array()); }, ErrorKind::kInvalidArgument,
                        {"logs must be a JSON object", "[]"});
}

TEST_P(EpochReportTest, FindsTheTasksReportsOldestFirstAfterAnId) {
  const auto a0 = save_epoch_report(*hub_, 7, 1, 0, {{"val_loss", 0.5}});
  save_epoch_report(*hub_, 8, 1, 0, {{"val_loss", 0.9}});  // another task
  const auto a1 = save_epoch_report(*hub_, 7, 1, 1, {{"val_loss", 0.4}});
  hub_->save_document(kOldPlace, {{"kind", "state"}, {"task_id", 7}});  // the tuner's own documents are not reports

  const auto all = find_epoch_reports(*hub_, {7});
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].id, a0);
  EXPECT_EQ(all[0].task_id, 7);
  EXPECT_EQ(all[0].attempt, 1);
  EXPECT_EQ(all[0].epoch, 0);
  EXPECT_EQ(all[0].logs, (Json{{"val_loss", 0.5}}));
  EXPECT_GT(all[0].time, 0);
  EXPECT_EQ(all[1].id, a1);
  EXPECT_EQ(all[1].epoch, 1);

  const auto later = find_epoch_reports(*hub_, {7, 8}, a0);
  ASSERT_EQ(later.size(), 2u);
  EXPECT_EQ(later[0].task_id, 8);
  EXPECT_EQ(later[1].id, a1);
  EXPECT_TRUE(find_epoch_reports(*hub_, {}).empty());
}

TEST_P(EpochReportTest, ReportsAnOlderHubKeptWithTheTunersDocumentsMoveToTheirOwnCollection) {
  // As an older tensorhub wrote them; nothing has touched the queue's tables on this hub yet.
  const auto old = hub_->save_document(kOldPlace, {{"kind", "epoch"}, {"task_id", 7}, {"attempt", 1}, {"epoch", 0},
                                                   {"logs", {{"loss", 0.7}}}});
  const auto search = hub_->save_document(kOldPlace, {{"kind", "search"}, {"search", "s"}});
  const auto r = find_epoch_reports(*hub_, {7});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].id, old);  // the same document, moved: the tuner's last_report_id still holds
  EXPECT_EQ(r[0].logs, (Json{{"loss", 0.7}}));
  const auto left = hub_->find_documents(kOldPlace, Json::object());
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].id, search);  // the tuner's own documents stay where they are
}

TEST_P(EpochReportTest, AReportOfAnotherAttemptIsNotThisAttemptsProgress) {
  save_epoch_report(*hub_, 7, 1, 3, Json::object());
  hub_->save_document(kEpochReports, {{"kind", "epoch"}, {"task_id", 7}, {"epoch", 4}, {"logs", Json::object()}});  // no attempt
  hub_->save_document(kEpochReports, {{"kind", "epoch"}, {"task_id", 7}, {"attempt", "x"}, {"epoch", 5}});
  const auto r = find_epoch_reports(*hub_, {7});
  ASSERT_EQ(r.size(), 3u);
  EXPECT_TRUE(r[0].of_attempt(1));
  EXPECT_FALSE(r[0].of_attempt(2));
  EXPECT_FALSE(r[1].attempt.has_value());
  EXPECT_TRUE(r[1].of_attempt(2));
  EXPECT_EQ(r[2].attempt, -1);
  EXPECT_FALSE(r[2].of_attempt(1));
  EXPECT_EQ(r[2].logs, Json::object());  // missing logs read as none
}

TEST_P(EpochReportTest, ManyTasksAreReadInSeveralQueriesAndMergedInIdOrder) {
  std::vector<std::int64_t> ids(1200);
  std::iota(ids.begin(), ids.end(), 1);
  const auto last = save_epoch_report(*hub_, 1200, 1, 0, Json::object());  // third query
  const auto first = save_epoch_report(*hub_, 1, 1, 0, Json::object());    // first query
  const auto r = find_epoch_reports(*hub_, ids);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].id, last);
  EXPECT_EQ(r[1].id, first);
}

INSTANTIATE_TEST_SUITE_P(Backends, EpochReportTest, ::testing::ValuesIn(testing::backend_params()),
                         testing::backend_param_name);

}  // namespace
}  // namespace tensorhub
