// The pruners (tune/pruner.h): Optuna's own PercentilePruner decisions on 600 random studies
// (fixtures/optuna_pruner, written by Optuna 3.1), hand-checked cases of each rule, and the
// tuner pruning trials of known curves run by real runners on both backends.
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "backend_factory.h"
#include "tune_runner_fixture.h"
#include "tensorhub/core/error.h"
#include "tensorhub/queue/epoch_report.h"
#include "tensorhub/queue/runner.h"
#include "tensorhub/queue/task_queue.h"
#include "tensorhub/store/hub.h"
#include "tensorhub/tune/pruner.h"
#include "tensorhub/tune/tuner.h"
#include "process_util.h"
#include "test_util.h"

namespace tensorhub {
namespace {

using namespace std::chrono_literals;

Trial trial_of(const std::string& id, TrialStatus status, const std::map<int, double>& values) {
  Trial t;
  t.trial_id = id;
  t.status = status;
  t.epoch_values = values;
  return t;
}

// The fixture's {"0": 1.5, "2": null} as epoch values (null: NaN).
std::map<int, double> values_of(const Json& j) {
  std::map<int, double> out;
  for (const auto& [k, v] : j.items()) out[std::stoi(k)] = v.is_null() ? std::nan("") : v.get<double>();
  return out;
}

TEST(Pruner, DecidesAsOptunasPercentilePrunerOn600Studies) {
  std::ifstream in(std::string(TENSORHUB_SOURCE_DIR) + "/tests/fixtures/optuna_pruner/cases.json");
  ASSERT_TRUE(in);
  std::stringstream text;
  text << in.rdbuf();
  const Json fixture = Json::parse(text.str());
  ASSERT_EQ(fixture.at("cases").size(), 600u);
  int pruned = 0;
  for (std::size_t i = 0; i < fixture["cases"].size(); ++i) {
    const Json& c = fixture["cases"][i];
    PrunerOptions o;
    o.name = "percentile";
    o.percentile = c["percentile"].get<double>();
    o.n_startup_trials = c["n_startup_trials"].get<int>();
    o.n_warmup_steps = c["n_warmup_steps"].get<int>();
    o.interval_steps = c["interval_steps"].get<int>();
    o.n_min_trials = c["n_min_trials"].get<int>();
    Objective objective{"loss", c["direction"] == "maximize"};
    std::map<std::string, Trial> trials;
    for (const auto& values : c["completed"]) {
      const std::string id = std::to_string(trials.size());
      trials[id] = trial_of(id, TrialStatus::kCompleted, values_of(values));
    }
    for (const auto& other : c["others"]) {
      const std::string id = std::to_string(trials.size());
      const auto status = other["status"] == "pruned" ? TrialStatus::kPruned : TrialStatus::kFailed;
      trials[id] = trial_of(id, status, values_of(other["epoch_values"]));
    }
    const Trial running = trial_of("running", TrialStatus::kRunning, values_of(c["trial"]));
    trials["running"] = running;
    EXPECT_EQ(should_prune(o, objective, running, trials), c["prune"].get<bool>()) << "case " << i << ": " << c.dump();
    pruned += c["prune"].get<bool>();
  }
  EXPECT_EQ(pruned, 105);  // the fixture prunes in 105 of its 600 cases: both answers are exercised
}

// numpy's documented example (numpy.percentile): a = [[10, 7, 4], [3, 2, 1]], np.percentile(a, 50)
// is 3.5; and by the linear rule's definition the 0th and 100th are the extremes.
TEST(Pruner, PercentileIsNumpysLinearRule) {
  EXPECT_DOUBLE_EQ(linear_percentile({10, 7, 4, 3, 2, 1}, 50), 3.5);
  EXPECT_DOUBLE_EQ(linear_percentile({10, 7, 4, 3, 2, 1}, 0), 1);
  EXPECT_DOUBLE_EQ(linear_percentile({10, 7, 4, 3, 2, 1}, 100), 10);
  EXPECT_DOUBLE_EQ(linear_percentile({1, 2, 3, 4}, 25), 1.75);  // rank 0.75 between 1 and 2
  EXPECT_DOUBLE_EQ(linear_percentile({5}, 30), 5);
}

class MedianRule : public ::testing::Test {
 protected:
  // Three completed curves; at epoch 2 their values are 0.5, 0.6, 0.7 (median 0.6).
  void SetUp() override {
    o.name = "median";
    o.n_startup_trials = 3;
    trials["a"] = trial_of("a", TrialStatus::kCompleted, {{0, 1.0}, {1, 0.8}, {2, 0.5}});
    trials["b"] = trial_of("b", TrialStatus::kCompleted, {{0, 1.1}, {1, 0.9}, {2, 0.6}});
    trials["c"] = trial_of("c", TrialStatus::kCompleted, {{0, 1.2}, {1, 1.0}, {2, 0.7}});
  }
  bool prunes(const std::map<int, double>& curve, bool maximize = false) {
    trials["t"] = trial_of("t", TrialStatus::kRunning, curve);
    return should_prune(o, Objective{"loss", maximize}, trials["t"], trials);
  }
  PrunerOptions o;
  std::map<std::string, Trial> trials;
};

TEST_F(MedianRule, TheBestValueSoFarIsComparedWithTheMedianAtTheLastEpoch) {
  EXPECT_TRUE(prunes({{0, 1.0}, {1, 0.9}, {2, 0.65}}));   // 0.65 > 0.6
  EXPECT_FALSE(prunes({{0, 1.0}, {1, 0.9}, {2, 0.6}}));   // equal to the median: kept
  EXPECT_FALSE(prunes({{0, 0.4}, {1, 0.9}, {2, 0.65}}));  // its best so far, 0.4, is ahead
  EXPECT_TRUE(prunes({{0, 1.0}, {1, 0.95}}));             // epoch 1: median 0.9
  // Maximising, the values are compared the other way round: 0.65 > 0.6 is ahead.
  EXPECT_FALSE(prunes({{0, 0.0}, {1, 0.0}, {2, 0.65}}, true));
  EXPECT_TRUE(prunes({{0, 0.0}, {1, 0.0}, {2, 0.55}}, true));
}

TEST_F(MedianRule, NothingIsPrunedBeforeTheStartupTrialsOrTheWarmup) {
  o.n_startup_trials = 4;  // three completed
  EXPECT_FALSE(prunes({{0, 9.0}, {1, 9.0}, {2, 9.0}}));
  o.n_startup_trials = 3;
  o.n_warmup_steps = 3;  // epochs 0..2 are the warm-up
  EXPECT_FALSE(prunes({{0, 9.0}, {1, 9.0}, {2, 9.0}}));
  o.n_warmup_steps = 2;
  EXPECT_TRUE(prunes({{0, 9.0}, {1, 9.0}, {2, 9.0}}));
  // Pruned, stopped and failed trials never count as completed.
  trials["a"].status = TrialStatus::kPruned;
  trials["b"].status = TrialStatus::kStopped;
  o.n_startup_trials = 2;
  EXPECT_FALSE(prunes({{0, 9.0}, {1, 9.0}, {2, 9.0}}));
}

TEST_F(MedianRule, IntervalsCheckTheFirstReportInEachAndANaNCurveIsPruned) {
  o.interval_steps = 2;  // checks at epochs 0, 2, 4, ...
  EXPECT_FALSE(prunes({{0, 0.1}, {1, 9.0}}));   // epoch 1 is inside the interval begun at 0
  EXPECT_TRUE(prunes({{0, 9.0}, {1, 9.0}, {2, 9.0}}));
  EXPECT_TRUE(prunes({{0, 9.0}, {2, 9.0}}));    // epoch 1 skipped: 2 is the interval's first
  o.interval_steps = 1;
  EXPECT_TRUE(prunes({{0, std::nan("")}, {1, std::nan("")}}));  // nothing but NaN: diverged
  EXPECT_FALSE(prunes({{0, 1.0}, {1, 0.9}, {2, 0.6}, {3, 9.0}}));  // no completed trial reached epoch 3
  o.n_min_trials = 4;  // three completed trials reached epoch 2
  EXPECT_FALSE(prunes({{0, 9.0}, {1, 9.0}, {2, 9.0}}));
}

TEST(Pruner, OptionsAreCheckedAndRoundTripThroughJson) {
  PrunerOptions o;
  EXPECT_TRUE(o.to_json().is_null());
  EXPECT_FALSE(PrunerOptions::from_json(nullptr).enabled());
  o.name = "percentile";
  o.percentile = 25;
  o.n_startup_trials = 2;
  o.n_warmup_steps = 3;
  o.interval_steps = 2;
  o.n_min_trials = 4;
  const PrunerOptions back = PrunerOptions::from_json(o.to_json());
  EXPECT_EQ(back.to_json(), o.to_json());
  EXPECT_EQ(back.percentile, 25);
  auto refused = [](auto change, const char* word) {
    PrunerOptions p;
    p.name = "percentile";
    change(p);
    testing::expect_error([&] { p.check(); }, ErrorKind::kInvalidArgument, {word});
  };
  refused([](PrunerOptions& p) { p.name = "hyperband"; }, "median");
  refused([](PrunerOptions& p) { p.percentile = 101; }, "percentile");
  refused([](PrunerOptions& p) { p.n_startup_trials = -1; }, "n_startup_trials");
  refused([](PrunerOptions& p) { p.interval_steps = 0; }, "interval_steps");
  refused([](PrunerOptions& p) { p.n_min_trials = 0; }, "n_min_trials");
  refused([](PrunerOptions& p) { p.name = "median"; p.percentile = 25; }, "percentile");
  testing::expect_error([] { PrunerOptions::from_json({{"name", "median"}}); }, ErrorKind::kInvalidArgument,
                        {"percentile", "missing"});
}

TEST(Pruner, APrunedTrialKeepsItsCurveAndLastValueButNeverRanks) {
  auto oracle = make_oracle("random", SearchSpace().Int("x", 1, 9), OracleOptions{});
  const auto a = oracle->create_trial().trial.trial_id;
  const auto b = oracle->create_trial().trial.trial_id;
  oracle->report(b, 0, 0.2);
  oracle->report(b, 1, 0.1);
  oracle->end_trial(a, TrialStatus::kCompleted, 0.5);
  oracle->end_trial(b, TrialStatus::kPruned, 0.1);  // a better value than a's: still not ranked
  const auto best = oracle->best_trials(0);
  ASSERT_EQ(best.size(), 1u);
  EXPECT_EQ(best[0].trial_id, a);
  // The state keeps the pruned trial as it was.
  auto restored = make_oracle("random", SearchSpace().Int("x", 1, 9), OracleOptions{});
  restored->set_state(oracle->get_state());
  const Trial& t = restored->trials().at(b);
  EXPECT_EQ(t.status, TrialStatus::kPruned);
  EXPECT_EQ(to_string(t.status), "pruned");
  EXPECT_EQ(t.score, 0.1);
  EXPECT_EQ(t.epoch_values, (std::map<int, double>{{0, 0.2}, {1, 0.1}}));
}

TEST(Pruner, HyperbandAndAshaRefuseAPruner) {
  testing::TempDir dir;
  for (const char* oracle : {"hyperband", "asha"}) {
    TunerOptions o;
    o.hub_uri = "sqlite://" + (dir.path() / "hub.db").string();
    o.oracle = oracle;
    o.space = SearchSpace().Int("x", 1, 9);
    o.command = "true";
    o.pruner.name = "median";
    testing::expect_error([&] { Tuner t(o); }, ErrorKind::kInvalidArgument, {oracle, "own schedule"});
  }
}

// ---- the tuner pruning running trials ------------------------------------------------------

// Five trials of the grid, in order, one at a time; each reports its curve of val_loss (one
// value per epoch, 0.3 s apart) and then writes its last value as its result. With the median
// pruner, 2 startup trials and a warm-up of 1 epoch (values checked by hand):
//   0000 1.0 0.8 0.6 0.5 0.4    completed (nothing completed before it)
//   0001 1.2 0.9 0.7 0.6 0.5    completed: at epoch 1, 0.9 > 0.8 would prune it, but one trial
//                               completed so far is fewer than the 2 startup trials
//   0002 1.5 1.4 1.3 1.2 1.1    pruned at epoch 1: 1.4 > median(0.8, 0.9) = 0.85
//   0003 3.0 0.5 0.4 0.3 0.2    completed: epoch 0's 3.0 is worst but inside the warm-up
//   0004 0.9 0.7 0.6 0.6 0.6    pruned at epoch 3: best 0.6 > median(0.5, 0.6, 0.3) = 0.5
//                               (at epoch 1, 0.7 < 0.8; at epoch 2, 0.6 = median(0.6, 0.7, 0.4))
const char* kCurves[] = {"1.0,0.8,0.6,0.5,0.4", "1.2,0.9,0.7,0.6,0.5", "1.5,1.4,1.3,1.2,1.1",
                         "3.0,0.5,0.4,0.3,0.2", "0.9,0.7,0.6,0.6,0.6"};

class TunerPruningTest : public testing::TunerRunnerTest {};

TEST_P(TunerPruningTest, ExactlyTheTrialsTheMedianRulePrunesArePrunedAtTheirCrossing) {
  start_runner(1, 0.45);  // cancellation checks every 0.15 s
  std::vector<std::string> curves(std::begin(kCurves), std::end(kCurves));
  TunerOptions o = search_options("pruned", "grid", SearchSpace().Choice("curve", std::vector<Json>(curves.begin(), curves.end())),
                                  "");  // its command below
  o.oracle_options.objective = Objective::parse("val_loss");
  o.max_parallel_trials = 1;
  o.pruner.name = "median";
  o.pruner.n_startup_trials = 2;
  o.pruner.n_warmup_steps = 1;
  const std::string finished = (dir_.path() / "finished").string();
  o.command = "e=0; for v in $(echo {curve} | tr , ' '); do " + std::string(TENSORHUB_BIN_DIR) +
              "/tensorhub task report-epoch --epoch $e --logs '{\"val_loss\": '$v'}' || exit 1; e=$((e + 1)); "
              "sleep 0.3; done; echo {curve} >> " + finished +
              "; echo '{\"val_loss\": '$v'}' > \"$TENSORHUB_RESULT_FILE\"";
  const auto s = Tuner(o).search();
  ASSERT_TRUE(s.done) << s.reason;
  ASSERT_EQ(s.trials.size(), 5u);

  std::map<std::string, const TrialView*> by_id;
  for (const auto& v : s.trials) by_id[v.trial.trial_id] = &v;
  const std::map<std::string, int> pruned_at = {{"0002", 1}, {"0004", 3}};
  Hub hub(db_->uri(), "tune");
  for (const auto& [id, v] : by_id) {
    const auto p = pruned_at.find(id);
    if (p == pruned_at.end()) {
      EXPECT_EQ(v->trial.status, TrialStatus::kCompleted) << "trial " << id;
      EXPECT_EQ(v->trial.epoch_values.size(), 5u) << "trial " << id << ": its whole curve";
      continue;
    }
    EXPECT_EQ(v->trial.status, TrialStatus::kPruned) << "trial " << id;
    EXPECT_EQ(v->task_status, "cancelled") << "trial " << id;
    // Pruned at the report that crossed, and its curve kept up to it.
    ASSERT_FALSE(v->trial.epoch_values.empty());
    EXPECT_EQ(v->trial.epoch_values.rbegin()->first, p->second) << "trial " << id;
    EXPECT_EQ(v->trial.epoch_values.size(), static_cast<std::size_t>(p->second + 1)) << "trial " << id;
    // Its process was killed within one more report, before it could finish.
    const auto reports = find_epoch_reports(hub, {v->task_id});
    EXPECT_LE(reports.size(), static_cast<std::size_t>(p->second + 2)) << "trial " << id;
  }
  ASSERT_TRUE(s.best);
  EXPECT_EQ(s.best->trial.trial_id, "0003");  // 0.2; pruned trials never rank
  const std::string lines = testing::read_text(finished);
  EXPECT_EQ(lines, std::string(kCurves[0]) + "\n" + kCurves[1] + "\n" + kCurves[3] + "\n");
}

TEST_P(TunerPruningTest, ResumingWithAnotherPrunerIsRefused) {
  TunerOptions o = search_options("s", "random", SearchSpace().Int("x", 1, 9), "true");
  { Tuner first(o); }
  o.pruner.name = "median";
  testing::expect_error([&] { Tuner second(o); }, ErrorKind::kFailedPrecondition, {"pruner differs"});
}

INSTANTIATE_TEST_SUITE_P(Backends, TunerPruningTest, ::testing::ValuesIn(testing::backend_params()),
                         testing::backend_param_name);

}  // namespace
}  // namespace tensorhub
