// Hyperband: Keras Tuner's schedule (numbers computed with keras_tuner/tuners/hyperband.py's
// _get_num_brackets/_get_size/_get_epochs formulas in Debian's python3), and simulated runs in
// which the promoted trials must be the best of their round and failed trials never promoted.
#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "tensorhub/tune/oracle.h"
#include "test_util.h"

namespace tensorhub {
namespace {

struct Totals {
  int brackets = 0, trials = 0, epochs = 0;
};

Totals totals(const std::vector<HyperbandRound>& schedule) {
  Totals t;
  std::set<int> brackets;
  for (const auto& r : schedule) {
    brackets.insert(r.bracket);
    t.trials += r.trials;
    t.epochs += r.trials * (r.epochs - r.initial_epoch);  // a promoted trial resumes its parent
  }
  t.brackets = static_cast<int>(brackets.size());
  return t;
}

TEST(HyperbandSchedule, MatchesKerasTuner) {
  // (max_epochs 10, factor 3): brackets 2, 1, 0 with (trials, epochs) rounds
  // [(12, 2), (4, 4), (2, 10)], [(6, 4), (2, 10)], [(4, 10)].
  const auto s = hyperband_schedule(10, 3);
  const std::vector<std::array<int, 5>> expected{{2, 0, 12, 2, 0}, {2, 1, 4, 4, 2}, {2, 2, 2, 10, 4},
                                                 {1, 0, 6, 4, 0},  {1, 1, 2, 10, 4}, {0, 0, 4, 10, 0}};
  ASSERT_EQ(s.size(), expected.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    EXPECT_EQ((std::array<int, 5>{s[i].bracket, s[i].round, s[i].trials, s[i].epochs, s[i].initial_epoch}), expected[i]) << i;
  }
  const Totals ten = totals(s);
  EXPECT_EQ(ten.brackets, 3);
  EXPECT_EQ(ten.trials, 30);
  EXPECT_EQ(ten.epochs, 120);
  const Totals hundred = totals(hyperband_schedule(100, 3));
  EXPECT_EQ(hundred.brackets, 5);
  EXPECT_EQ(hundred.trials, 254);
  EXPECT_EQ(hundred.epochs, 2672);
  // More from the same formulas: (27, 3) -> 4, 70, 375 (log(27) / log(3) is 3.0000000000000004
  // in floating point, so Keras Tuner's ceil(1 + ...) is 5, not 4); (1, 3) -> 1, 1, 1.
  const Totals t27 = totals(hyperband_schedule(27, 3));
  EXPECT_EQ((std::array<int, 3>{t27.brackets, t27.trials, t27.epochs}), (std::array<int, 3>{4, 70, 375}));
  const Totals t1 = totals(hyperband_schedule(1, 3));
  EXPECT_EQ((std::array<int, 3>{t1.brackets, t1.trials, t1.epochs}), (std::array<int, 3>{1, 1, 1}));
  testing::expect_error([] { hyperband_schedule(10, 1); }, ErrorKind::kInvalidArgument, {"factor"});
  testing::expect_error([] { hyperband_schedule(0, 3); }, ErrorKind::kInvalidArgument, {"max_epochs"});
}

OracleOptions hyperband_options(int max_epochs, int iterations = 1) {
  OracleOptions o;
  o.objective = Objective::parse("val_loss");
  o.max_epochs = max_epochs;
  o.factor = 3;
  o.hyperband_iterations = iterations;
  o.seed = 17;
  return o;
}

SearchSpace space() {
  SearchSpace s;
  s.Float("x", 0, 1).Int("units", 8, 256);
  return s;
}

double loss_of(const Json& hp) {
  return std::pow(hp["x"].get<double>() - 0.3, 2) + std::abs(hp["units"].get<double>() - 100) / 1000;
}

struct SimulatedRun {
  int trials = 0, epochs = 0;
  std::map<std::string, Json> hp;  // trial id -> hyperparameters
};

// Runs the oracle to the end, one trial at a time; `fail` decides which trials fail.
SimulatedRun run_to_end(Oracle& oracle, const std::function<bool(const Trial&)>& fail) {
  SimulatedRun run;
  for (int guard = 0; guard < 10000; ++guard) {
    const auto r = oracle.create_trial();
    if (r.kind == TrialRequest::Kind::kDone) return run;
    EXPECT_EQ(r.kind, TrialRequest::Kind::kRun) << r.reason;
    if (r.kind != TrialRequest::Kind::kRun) return run;
    const Json& hp = r.trial.hyper_parameters;
    ++run.trials;
    run.epochs += hp["tuner/epochs"].get<int>() - hp["tuner/initial_epoch"].get<int>();
    run.hp[r.trial.trial_id] = hp;
    if (fail(r.trial)) oracle.end_trial(r.trial.trial_id, TrialStatus::kFailed, std::nullopt);
    else oracle.end_trial(r.trial.trial_id, TrialStatus::kCompleted, loss_of(hp));
  }
  ADD_FAILURE() << "no end";
  return run;
}

// For every round r >= 1: its parents are exactly the best trials of round r - 1 (failed ones
// excluded), and it resumes at the previous round's epochs.
void expect_best_promoted(const Oracle& oracle, const SimulatedRun& run) {
  std::map<std::pair<int, int>, std::vector<std::string>> rounds;  // (bracket, round) -> ids
  for (const auto& [id, hp] : run.hp) rounds[{hp["tuner/bracket"].get<int>(), hp["tuner/round"].get<int>()}].push_back(id);
  for (const auto& [key, ids] : rounds) {
    const auto [bracket, round] = key;
    if (round == 0) continue;
    std::vector<std::pair<double, std::string>> previous;
    for (const auto& id : rounds.at({bracket, round - 1})) {
      const Trial& t = oracle.trials().at(id);
      if (t.status == TrialStatus::kCompleted) previous.push_back({*t.score, id});
    }
    std::sort(previous.begin(), previous.end());
    std::set<std::string> best, parents;
    for (std::size_t i = 0; i < ids.size(); ++i) best.insert(previous.at(i).second);
    for (const auto& id : ids) {
      const Json& hp = run.hp.at(id);
      parents.insert(hp["tuner/trial_id"].get<std::string>());
      EXPECT_EQ(oracle.trials().at(hp["tuner/trial_id"].get<std::string>()).status, TrialStatus::kCompleted);
      EXPECT_EQ(hp["tuner/initial_epoch"], run.hp.at(hp["tuner/trial_id"].get<std::string>())["tuner/epochs"]);
      EXPECT_EQ(hp["x"], run.hp.at(hp["tuner/trial_id"].get<std::string>())["x"]);
    }
    EXPECT_EQ(parents, best) << "bracket " << bracket << " round " << round;
  }
}

TEST(HyperbandOracle, FullRunFollowsTheScheduleAndPromotesTheBest) {
  auto oracle = make_oracle("hyperband", space(), hyperband_options(10));
  const SimulatedRun run = run_to_end(*oracle, [](const Trial&) { return false; });
  EXPECT_EQ(run.trials, 30);
  EXPECT_EQ(run.epochs, 120);
  expect_best_promoted(*oracle, run);
  // Per (bracket, round): the schedule's trial counts.
  std::map<std::pair<int, int>, int> counts;
  for (const auto& [id, hp] : run.hp) ++counts[std::make_pair(hp["tuner/bracket"].get<int>(), hp["tuner/round"].get<int>())];
  for (const auto& r : hyperband_schedule(10, 3)) {
    EXPECT_EQ(counts[std::make_pair(r.bracket, r.round)], r.trials) << r.bracket << "/" << r.round;
  }
}

TEST(HyperbandOracle, IterationsRepeatTheSchedule) {
  auto oracle = make_oracle("hyperband", space(), hyperband_options(10, 2));
  const SimulatedRun run = run_to_end(*oracle, [](const Trial&) { return false; });
  EXPECT_EQ(run.trials, 60);
  EXPECT_EQ(run.epochs, 240);
}

TEST(HyperbandOracle, FailedTrialsAreNeverPromoted) {
  auto oracle = make_oracle("hyperband", space(), hyperband_options(10));
  // Fail every round-0 trial with an even id; each round then promotes the best of the
  // successful trials only.
  const SimulatedRun run = run_to_end(*oracle, [](const Trial& t) {
    return t.hyper_parameters["tuner/round"] == 0 && std::stoi(t.trial_id) % 2 == 0;
  });
  expect_best_promoted(*oracle, run);
  int failed = 0;
  for (const auto& [id, t] : oracle->trials()) failed += t.status == TrialStatus::kFailed;
  EXPECT_GT(failed, 0);
}

TEST(HyperbandOracle, SmallSpaceEndsWhenUsedUp) {
  // 4 points for bracket 2's 12 first trials: round 0 ends with 4, round 1 promotes
  // min(4, 4) = 4 at epochs 2 -> 4, round 2 promotes 2 at 4 -> 10; brackets 1 and 0 find no
  // untried point. Trials 4 + 4 + 2 = 10, epochs 4 * 2 + 4 * 2 + 2 * 6 = 28.
  SearchSpace s;
  s.Choice("x", {0.1, 0.2, 0.3, 0.4}).Fixed("units", 64);
  auto oracle = make_oracle("hyperband", s, hyperband_options(10));
  const SimulatedRun run = run_to_end(*oracle, [](const Trial&) { return false; });
  EXPECT_EQ(run.trials, 10);
  EXPECT_EQ(run.epochs, 28);
  expect_best_promoted(*oracle, run);
}

TEST(HyperbandOracle, RoundWaitsForAllItsTrialsAndBracketsOverlap) {
  auto oracle = make_oracle("hyperband", space(), hyperband_options(10));
  // Nothing ends: all round-0 trials of the three brackets start (12 + 6 + 4), then wait.
  std::vector<std::string> ids;
  for (int i = 0; i < 22; ++i) {
    const auto r = oracle->create_trial();
    ASSERT_EQ(r.kind, TrialRequest::Kind::kRun) << i;
    EXPECT_EQ(r.trial.hyper_parameters["tuner/round"], 0);
    ids.push_back(r.trial.trial_id);
  }
  EXPECT_EQ(oracle->create_trial().kind, TrialRequest::Kind::kWait);
  // Ending 11 of bracket 2's 12 first trials is not enough to promote.
  for (int i = 0; i < 11; ++i) oracle->end_trial(ids[static_cast<std::size_t>(i)], TrialStatus::kCompleted, 1.0 - 0.01 * i);
  EXPECT_EQ(oracle->create_trial().kind, TrialRequest::Kind::kWait);
  oracle->end_trial(ids[11], TrialStatus::kCompleted, 0.5);
  const auto r = oracle->create_trial();
  ASSERT_EQ(r.kind, TrialRequest::Kind::kRun);
  EXPECT_EQ(r.trial.hyper_parameters["tuner/trial_id"], "0011");  // the best, 0.5
  EXPECT_EQ(r.trial.hyper_parameters["tuner/round"], 1);
}

}  // namespace
}  // namespace tensorhub
