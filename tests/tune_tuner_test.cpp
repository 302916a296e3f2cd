// The tuner with real runners (in-process Runner threads running shell commands as child
// processes) on a real SQLite hub: trials are tasks, results come back, the search resumes.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>
#include <thread>

#include "tensorhub/queue/runner.h"
#include "tensorhub/queue/task_queue.h"
#include "tensorhub/store/hub.h"
#include "tensorhub/tune/tuner.h"
#include "tensorhub/tune/trials.h"
#include "backend_factory.h"
#include "test_util.h"

namespace tensorhub {
namespace {

// A trial command: loss = (x - 2)^2 + (opt == "sgd" ? 1 : 0), written as the task's result.
// Its minimum over x in {1, 2, 3} and opt in {adam, sgd} is 0 at x = 2, opt = adam.
const char* kQuadratic =
    "awk -v x={x} -v opt={opt} 'BEGIN { printf \"{\\\"loss\\\": %g}\", (x - 2) ^ 2 + (opt == \"sgd\") }' "
    "> \"$TENSORHUB_RESULT_FILE\"";

// Runs on every backend: SQLite (runners poll) and PostgreSQL (runners and tuner wake on NOTIFY).
class TunerTest : public testing::BackendTest {
 protected:
  std::string uri() const { return db_->uri(); }

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

TEST_P(TunerTest, GridOfTwoByThreeRunsExactlySixTrialsAndFindsTheMinimum) {
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

TEST_P(TunerTest, RandomSearchOverASmallSpaceEndsWhenItIsUsedUp) {
  start_runners(2);
  auto o = options("random");
  o.oracle_options.max_trials = 20;  // more than the 6 points
  const auto s = Tuner(o).search();
  EXPECT_TRUE(s.done);
  EXPECT_EQ(trial_tasks().size(), 6u);
  ASSERT_TRUE(s.best);
  EXPECT_EQ(*s.best->trial.score, 0.0);
}

TEST_P(TunerTest, AStoppedTunerResumesWithoutRepeatingATrial) {
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

TEST_P(TunerTest, ResumingWithAnotherSpaceIsRefusedUnlessOverwritten) {
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

TEST_P(TunerTest, FailingTrialsStopTheSearchWithTheLastError) {
  start_runners(1);
  auto o = options("grid");
  o.command = "echo 'no such data set' >&2; exit 3";
  o.max_parallel_trials = 1;
  const auto msg = testing::error_message_of(ErrorKind::kFailedPrecondition, [&] { Tuner(o).search(); }, "failing");
  EXPECT_NE(msg.find("3 failed trials in a row"), std::string::npos) << msg;
  EXPECT_NE(msg.find("exit"), std::string::npos) << msg;
  EXPECT_EQ(trial_tasks().size(), 3u);
}

TEST_P(TunerTest, ASearchStoppedByFailuresResumesOnceTheirCauseIsFixed) {
  start_runners(1);
  auto o = options("grid");
  const auto marker = dir_ / "dataset-imported";
  // Fails until the marker exists, as a trial whose dataset is not imported yet.
  o.command = "test -f " + marker.string() + " || { echo 'no dataset' >&2; exit 3; }; " + kQuadratic;
  o.max_parallel_trials = 1;
  testing::error_message_of(ErrorKind::kFailedPrecondition, [&] { Tuner(o).search(); }, "failing");
  std::ofstream(marker) << "";
  const auto s = Tuner(o).search();  // the same search, resumed: not stopped again at once
  EXPECT_TRUE(s.done) << s.reason;
  ASSERT_TRUE(s.best);
  EXPECT_EQ(s.best->trial.status, TrialStatus::kCompleted);
}

TEST_P(TunerTest, TrialsFailingTogetherStopTheSearchAtTheLimitNotPastIt) {
  start_runners(2);
  auto o = options("grid");
  o.command = "exit 3";
  o.max_parallel_trials = 2;
  o.poll_s = 2;  // on SQLite both trials of a pair have failed by the tuner's next look
  const auto msg = testing::error_message_of(ErrorKind::kFailedPrecondition, [&] { Tuner(o).search(); }, "failing");
  EXPECT_NE(msg.find("stopped after 3 failed trials in a row (the limit is 3, --max-consecutive-failures)"),
            std::string::npos) << msg;
  EXPECT_EQ(msg.find("max_consecutive"), std::string::npos) << msg;
  // The stored search says the same.
  EXPECT_NE(load_search_summary(uri(), "tune", "s").reason.find("3 failed trials in a row"), std::string::npos);
}

TEST_P(TunerTest, TrialsWithoutTheObjectiveStopTheSearchNamingTheKeysTheyHad) {
  start_runners(1);
  auto o = options("grid");
  o.command = "echo '{\"accuracy\": 0.9, \"history\": [{\"accuracy\": 0.9}]}' > \"$TENSORHUB_RESULT_FILE\"";
  o.max_parallel_trials = 1;
  const auto msg = testing::error_message_of(ErrorKind::kFailedPrecondition, [&] { Tuner(o).search(); }, "no loss");
  EXPECT_NE(msg.find("finished without a finite 'loss' in its result (its keys: accuracy, history); is --objective's "
                     "name right?"),
            std::string::npos)
      << msg;
}

TEST_P(TunerTest, ATrialWithoutTheObjectiveFailsAndNeverRanks) {
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

// ASHA with the median stopping rule, end to end: trials report each epoch through
// `tensorhub task report-epoch`, the tuner feeds the values to the oracle, and a trial the rule
// stops is cancelled, so its runner kills it before it finishes. One runner slot runs the trials
// one after the other, which makes the sequence (and so the stops) a function of the seed.
TEST_P(TunerTest, AshaStopsATrialWorseThanTheMedianAndItsProcessIsKilled) {
  RunnerOptions r;
  r.hub_uri = uri();
  r.project_name = "tune";
  r.task_name = "trial";
  r.poll_s = 0.02;
  r.lease_s = 0.45;  // heartbeats (and so cancellation checks) every 0.15 s
  r.work_dir = dir_ / "work";
  r.log = [](const std::string&) {};
  runners_.push_back(std::make_unique<Runner>(r));
  threads_.emplace_back([runner = runners_.back().get()] { runner->run(); });

  auto o = options("asha");
  o.space = SearchSpace().Int("x", 1, 100);
  o.oracle_options.min_epochs = 1;
  o.oracle_options.max_epochs = 3;
  o.oracle_options.factor = 3;
  o.oracle_options.max_trials = 16;
  o.max_parallel_trials = 1;
  const std::string finished = (dir_ / "finished").string();
  // loss = x at every epoch; each epoch is reported, then takes 0.4 s.
  o.command = "e={tuner/initial_epoch}; while [ $e -lt {tuner/epochs} ]; do " + std::string(TENSORHUB_BIN_DIR) +
              "/tensorhub task report-epoch --epoch $e --logs '{\"loss\": '{x}'}' || exit 1; e=$((e + 1)); "
              "sleep 0.4; done; echo {x} >> " + finished + "; echo '{\"loss\": '{x}'}' > \"$TENSORHUB_RESULT_FILE\"";
  const auto s = Tuner(o).search();
  EXPECT_TRUE(s.done) << s.reason;

  int stopped = 0;
  std::map<int, std::vector<double>> values_at;  // epoch -> values of trials that reached it
  for (const auto& v : s.trials)
    for (const auto& [epoch, value] : v.trial.epoch_values) values_at[epoch].push_back(value);
  for (const auto& v : s.trials) {
    if (v.trial.status != TrialStatus::kStopped) continue;
    ++stopped;
    EXPECT_EQ(v.task_status, "cancelled");
    const int x = v.trial.hyper_parameters.at("x").get<int>();
    // The rule: stopped at an epoch past the grace, worse than the median of at least 3 others.
    const auto& [epoch, value] = *v.trial.epoch_values.rbegin();
    EXPECT_GE(epoch, 1);
    EXPECT_EQ(value, x);
    std::vector<double> others = values_at[epoch];
    others.erase(std::find(others.begin(), others.end(), value));
    ASSERT_GE(others.size(), 3u);
    std::sort(others.begin(), others.end());
    EXPECT_GT(value, others[others.size() / 2 - (others.size() % 2 ? 0 : 1)]) << "x = " << x;
  }
  std::cerr << stopped << " of " << s.trials.size() << " trials stopped\n";
  EXPECT_GE(stopped, 1) << "no trial was stopped with this seed; pick one whose sequence stops a trial";
  // Killed trials never reached the end of their command.
  for (const auto& t : trial_tasks()) {
    if (t.status != TaskStatus::kCancelled) continue;
    const std::string x = t.spec.hyper_parameters.at("x").dump();
    const std::string lines = testing::run_command("grep -cx '" + x + "' " + finished + " || true");
    // a promoted trial shares x with its rung-0 parent, which finished once
    EXPECT_EQ(lines, "1\n") << "x = " << x;
  }
}

// ---- one tuner per search (the search's lease) -------------------------------------------

std::string this_process() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return "host " + std::string(host) + ", pid " + std::to_string(getpid());
}

TEST_P(TunerTest, ASecondTunerOnARunningSearchIsRefusedNamingTheOneThatRunsIt) {
  {
    Tuner first(options("grid"));
    const auto msg = testing::error_message_of(ErrorKind::kFailedPrecondition, [&] { Tuner second(options("grid")); },
                                               "second tuner");
    EXPECT_NE(msg.find("search 's' of project 'tune' is being run by another tuner (" + this_process() + ", tuner "),
              std::string::npos) << msg;
    // --overwrite is refused too, before it deletes anything.
    auto overwrite = options("grid");
    overwrite.overwrite = true;
    testing::error_message_of(ErrorKind::kFailedPrecondition, [&] { Tuner t(overwrite); }, "overwrite");
    EXPECT_EQ(Hub(uri(), "tune").find_documents(kTrials, {{"kind", "search"}, {"search", "s"}}).size(), 1u);
    // Another search of the project is another lease.
    auto other = options("grid");
    other.search_name = "t";
    Tuner t(other);
  }
  // The first tuner ended (and released its lease): a new one runs the search.
  start_runners(2);
  const auto s = Tuner(options("grid")).search();
  EXPECT_TRUE(s.done);
  EXPECT_EQ(trial_tasks().size(), 6u);
}

TEST_P(TunerTest, AStalledTunersLeaseExpiresANewTunerResumesAndTheStalledOneStops) {
  auto o = options("grid");
  o.lease_s = 1.5;  // long enough for the refusal below to come before it expires on a busy machine
  // The first tuner creates two trials, then stalls (it keeps its Tuner but never polls again,
  // as a tuner that hangs or is cut off; a SIGKILLed one is the same for the lease).
  Tuner stalled(o);
  try {
    stalled.search([](const SearchSummary& s) {
      if (s.trials.size() >= 2) throw std::runtime_error("stall");
    });
  } catch (const std::runtime_error&) {
  }
  ASSERT_EQ(trial_tasks().size(), 2u);
  testing::error_message_of(ErrorKind::kFailedPrecondition, [&] { Tuner t(o); }, "while the lease runs");

  std::this_thread::sleep_for(std::chrono::milliseconds(3000));  // twice the lease
  start_runners(2);
  Tuner next(o);
  const auto s = next.search();
  EXPECT_TRUE(s.done);
  std::set<std::string> trial_ids;
  for (const auto& t : trial_tasks()) trial_ids.insert(t.spec.tags.at("trial_id").get<std::string>());
  EXPECT_EQ(trial_ids.size(), 6u);
  EXPECT_EQ(trial_tasks().size(), 6u);

  // The stalled tuner wakes up: it finds its lease taken and stops without creating a trial.
  const auto msg = testing::error_message_of(ErrorKind::kFailedPrecondition, [&] { stalled.search(); }, "stalled");
  EXPECT_NE(msg.find("lost its lease to another tuner"), std::string::npos) << msg;
  EXPECT_EQ(trial_tasks().size(), 6u);
}

INSTANTIATE_TEST_SUITE_P(Backends, TunerTest, ::testing::ValuesIn(testing::backend_params()),
                         testing::backend_param_name);

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
}  // namespace tensorhub
