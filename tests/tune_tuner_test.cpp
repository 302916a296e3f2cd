// The tuner with real runners (in-process Runner threads running shell commands as child
// processes) on a real SQLite hub: trials are tasks, results come back, the search resumes.
#include <algorithm>
#include <set>
#include <thread>

#include "tensorhub/queue/runner.h"
#include "tensorhub/queue/task_queue.h"
#include "tensorhub/store/hub.h"
#include "tensorhub/tune/tuner.h"
#include "test_util.h"

namespace tensorhub::tune {
namespace {

// A trial command: loss = (x - 2)^2 + (opt == "sgd" ? 1 : 0), written as the task's result.
// Its minimum over x in {1, 2, 3} and opt in {adam, sgd} is 0 at x = 2, opt = adam.
const char* kQuadratic =
    "awk -v x={x} -v opt={opt} 'BEGIN { printf \"{\\\"loss\\\": %g}\", (x - 2) ^ 2 + (opt == \"sgd\") }' "
    "> \"$TENSORHUB_RESULT_FILE\"";

class TunerTest : public ::testing::Test {
 protected:
  std::string uri() const { return "sqlite://" + (dir_ / "hub.db").string(); }

  TunerOptions options(const std::string& oracle) const {
    TunerOptions o;
    o.hub_uri = uri();
    o.project_name = "tune";
    o.search_name = "s";
    o.oracle = oracle;
    o.space = SearchSpace().Int("x", 1, 3).Choice("opt", {"adam", "sgd"});
    o.oracle_options.objective = Objective::parse("loss");
    o.oracle_options.seed = 7;
    o.command = kQuadratic;
    o.max_parallel_trials = 2;
    o.poll_s = 0.05;
    return o;
  }

  // Runners that take trials while the test runs; stopped in TearDown.
  void start_runners(int slots) {
    RunnerOptions r;
    r.hub_uri = uri();
    r.project_name = "tune";
    r.task_name = "trial";
    r.slots = slots;
    r.poll_s = 0.02;
    r.lease_s = 10;
    r.work_dir = dir_ / ("work" + std::to_string(runners_.size()));
    r.log = [](const std::string&) {};
    runners_.push_back(std::make_unique<Runner>(r));
    threads_.emplace_back([runner = runners_.back().get()] { runner->run(); });
  }

  void TearDown() override {
    for (auto& r : runners_) r->request_stop();
    for (auto& t : threads_) t.join();
  }

  std::vector<Task> trial_tasks() {
    Hub hub(uri(), "tune");
    return TaskQueue(hub).find_tasks({{"search", "s"}});
  }

  testing::TempDir dir_;
  std::vector<std::unique_ptr<Runner>> runners_;
  std::vector<std::thread> threads_;
};

TEST_F(TunerTest, GridOfTwoByThreeRunsExactlySixTrialsAndFindsTheMinimum) {
  start_runners(2);
  const auto s = Tuner(options("grid")).search();
  EXPECT_TRUE(s.done);
  ASSERT_EQ(s.trials.size(), 6u);
  const auto tasks = trial_tasks();
  ASSERT_EQ(tasks.size(), 6u);
  std::set<std::string> points;
  for (const auto& t : tasks) {
    EXPECT_EQ(t.status, TaskStatus::kFinished) << t.error;
    points.insert(t.spec.hyper_parameters.dump());
  }
  EXPECT_EQ(points.size(), 6u);  // every grid point once
  ASSERT_TRUE(s.best);
  EXPECT_EQ(*s.best->trial.score, 0.0);
  EXPECT_EQ(s.best->trial.hyper_parameters, (Json{{"x", 2}, {"opt", "adam"}}));
  // Ranked best first: adam scores 1, 0, 1 and sgd 2, 1, 2 for x = 1, 2, 3.
  std::vector<double> scores;
  for (const auto& v : s.trials) scores.push_back(*v.trial.score);
  EXPECT_EQ(scores, (std::vector<double>{0, 1, 1, 1, 2, 2}));
}

TEST_F(TunerTest, RandomSearchOverASmallSpaceEndsWhenItIsUsedUp) {
  start_runners(2);
  auto o = options("random");
  o.oracle_options.max_trials = 20;  // more than the 6 points
  const auto s = Tuner(o).search();
  EXPECT_TRUE(s.done);
  EXPECT_EQ(trial_tasks().size(), 6u);
  ASSERT_TRUE(s.best);
  EXPECT_EQ(*s.best->trial.score, 0.0);
}

TEST_F(TunerTest, AStoppedTunerResumesWithoutRepeatingATrial) {
  // First tuner: no runner yet, so its trials stay pending; it stops once two exist.
  {
    Tuner first(options("grid"));
    first.search([&](const SearchSummary& s) {
      if (s.trials.size() >= 2) first.request_stop();
    });
  }
  ASSERT_EQ(trial_tasks().size(), 2u);
  start_runners(2);
  const auto s = Tuner(options("grid")).search();
  EXPECT_TRUE(s.done);
  const auto tasks = trial_tasks();
  EXPECT_EQ(tasks.size(), 6u);
  std::set<std::string> trial_ids;
  for (const auto& t : tasks) trial_ids.insert(t.spec.tags.at("trial_id").get<std::string>());
  EXPECT_EQ(trial_ids.size(), 6u);
  // The stored summary says the same.
  const auto stored = load_search_summary(uri(), "tune", "s");
  EXPECT_TRUE(stored.done);
  EXPECT_EQ(stored.trials.size(), 6u);
  EXPECT_EQ(*stored.best->trial.score, 0.0);
}

TEST_F(TunerTest, ResumingWithAnotherSpaceIsRefusedUnlessOverwritten) {
  { Tuner first(options("grid")); }
  auto other = options("grid");
  other.space = SearchSpace().Int("x", 1, 4);
  const auto msg = testing::error_message_of(ErrorKind::kFailedPrecondition, [&] { Tuner t(other); }, "other space");
  EXPECT_NE(msg.find("space differs"), std::string::npos) << msg;
  other.overwrite = true;
  other.command = "awk -v x={x} 'BEGIN { printf \"{\\\"loss\\\": %g}\", x }' > \"$TENSORHUB_RESULT_FILE\"";
  start_runners(1);
  const auto s = Tuner(other).search();
  EXPECT_EQ(s.trials.size(), 4u);
  EXPECT_EQ(*s.best->trial.score, 1.0);
}

TEST_F(TunerTest, FailingTrialsStopTheSearchWithTheLastError) {
  start_runners(1);
  auto o = options("grid");
  o.command = "echo 'no such data set' >&2; exit 3";
  o.max_parallel_trials = 1;
  const auto msg = testing::error_message_of(ErrorKind::kFailedPrecondition, [&] { Tuner(o).search(); }, "failing");
  EXPECT_NE(msg.find("3 failed trials in a row"), std::string::npos) << msg;
  EXPECT_NE(msg.find("exit"), std::string::npos) << msg;
  EXPECT_EQ(trial_tasks().size(), 3u);
}

TEST_F(TunerTest, ATrialWithoutTheObjectiveFailsAndNeverRanks) {
  start_runners(1);
  auto o = options("grid");
  o.space = SearchSpace().Int("x", 1, 2);
  // x = 1 reports "loss", x = 2 reports only "accuracy".
  o.command =
      "if [ {x} = 1 ]; then echo '{\"loss\": 0.5}'; else echo '{\"accuracy\": 0.9}'; fi > \"$TENSORHUB_RESULT_FILE\"";
  const auto s = Tuner(o).search();
  EXPECT_TRUE(s.done);
  ASSERT_EQ(s.trials.size(), 2u);
  ASSERT_TRUE(s.best);
  EXPECT_EQ(s.best->trial.hyper_parameters.at("x"), 1);
  EXPECT_EQ(s.trials[1].trial.status, TrialStatus::kFailed);
}

TEST(TunerScore, BestEpochOfTheHistoryElseTheResultKey) {
  const auto acc = Objective::parse("val_accuracy");
  const auto loss = Objective::parse("val_loss");
  const Json r = {{"val_accuracy", 0.7},
                  {"val_loss", 0.9},
                  {"history", {{{"val_accuracy", 0.6}, {"val_loss", 1.0}},
                               {{"val_accuracy", 0.8}, {"val_loss", 0.8}},
                               {{"val_accuracy", 0.7}, {"val_loss", 0.9}}}}};
  EXPECT_EQ(score_of_result(r, acc), 0.8);
  EXPECT_EQ(score_of_result(r, loss), 0.8);
  EXPECT_EQ(score_of_result({{"val_loss", 0.25}}, loss), 0.25);
  EXPECT_FALSE(score_of_result({{"val_loss", nullptr}}, loss));
  EXPECT_FALSE(score_of_result({{"loss", 0.1}}, loss));
  EXPECT_FALSE(score_of_result(Json(nullptr), loss));
}

}  // namespace
}  // namespace tensorhub::tune
