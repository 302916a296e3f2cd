// The Bayesian optimisation oracle: better than random search on Branin and Hartmann-6 at
// equal trial counts (median over seeds), exact continuation after get_state/set_state,
// failed and NaN trials left out, distinct points for parallel runners, discrete spaces used
// up without repeats, and its option checks.
//
// Test functions and their known minima: Surjanovic & Bingham, "Virtual Library of
// Simulation Experiments" (www.sfu.ca/~ssurjano): Branin-Hoo on [-5, 10] x [0, 15], global
// minimum 0.397887 at (-pi, 12.275), (pi, 2.275), (9.42478, 2.475); Hartmann-6 on [0, 1]^6,
// global minimum -3.32237 at (0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573).
#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <set>

#include "tensorhub/tune/oracle.h"
#include "tune_test_functions.h"
#include "test_util.h"

namespace tensorhub {
namespace {

struct Problem {
  SearchSpace space;
  std::function<double(const Json&)> loss;
};

Problem branin_problem() {
  SearchSpace s;
  s.Float("x1", -5, 10).Float("x2", 0, 15);
  return {s, [](const Json& hp) { return branin(hp["x1"].get<double>(), hp["x2"].get<double>()); }};
}

Problem hartmann_problem() {
  SearchSpace s;
  for (int j = 0; j < 6; ++j) s.Float("x" + std::to_string(j), 0, 1);
  return {s, [](const Json& hp) {
            std::array<double, 6> x{};
            for (int j = 0; j < 6; ++j) x[j] = hp["x" + std::to_string(j)].get<double>();
            return hartmann6(x);
          }};
}

OracleOptions options(std::uint64_t seed, int max_trials = 0) {
  OracleOptions o;
  o.objective = Objective::parse("loss");
  o.seed = seed;
  o.max_trials = max_trials;
  return o;
}

// Runs `trials` sequential trials and returns the best loss.
double best_after(const std::string& oracle_name, const Problem& problem, int trials, std::uint64_t seed) {
  auto oracle = make_oracle(oracle_name, problem.space, options(seed, trials));
  for (int i = 0; i < trials; ++i) {
    auto r = oracle->create_trial();
    if (r.kind != TrialRequest::Kind::kRun) ADD_FAILURE() << oracle_name << " stopped at trial " << i << ": " << r.reason;
    if (r.kind != TrialRequest::Kind::kRun) break;
    oracle->end_trial(r.trial.trial_id, TrialStatus::kCompleted, problem.loss(r.trial.hyper_parameters));
  }
  const auto best = oracle->best_trials(1);
  return best.empty() ? INFINITY : *best[0].score;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

TEST(TestFunctions, KnownMinimaAtTheirMinimisers) {
  EXPECT_NEAR(branin(-M_PI, 12.275), 0.397887, 1e-6);
  EXPECT_NEAR(branin(M_PI, 2.275), 0.397887, 1e-6);
  EXPECT_NEAR(branin(9.42478, 2.475), 0.397887, 1e-6);
  EXPECT_NEAR(hartmann6({0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573}), -3.32237, 1e-5);
  // Elsewhere the values are higher (a sanity check of the constants' transcription).
  EXPECT_GT(branin(0, 0), 0.397887 + 1);
  EXPECT_GT(hartmann6({0.5, 0.5, 0.5, 0.5, 0.5, 0.5}), -3.32237 + 0.5);
}

// Median best over 5 seeds, Bayesian against random search with the same number of trials
// (Keras Tuner's default num_initial_points: 6 random trials for Branin, 18 for Hartmann-6).
void expect_bayesian_beats_random(const Problem& problem, int trials, double bayes_at_most) {
  std::vector<double> bayes, random;
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    bayes.push_back(best_after("bayesian", problem, trials, seed));
    random.push_back(best_after("random", problem, trials, seed));
  }
  const double mb = median(bayes), mr = median(random);
  ::testing::Test::RecordProperty("bayesian_median", std::to_string(mb));
  ::testing::Test::RecordProperty("random_median", std::to_string(mr));
  EXPECT_LT(mb, mr) << "bayesian " << mb << " vs random " << mr;
  EXPECT_LT(mb, bayes_at_most) << "bayesian median best " << mb;
}

TEST(BayesianOracle, BeatsRandomSearchOnBranin) {
  // 0.397887 is the optimum; random search's median best after 25 trials is typically ~1.5.
  expect_bayesian_beats_random(branin_problem(), 25, 0.6);
}

TEST(BayesianOracle, BeatsRandomSearchOnHartmann6) {
  // -3.32237 is the optimum; random search's median best after 40 trials is typically ~-2.2.
  expect_bayesian_beats_random(hartmann_problem(), 40, -2.8);
}

TEST(BayesianOracle, ContinuesIdenticallyAfterSetState) {
  const Problem problem = branin_problem();
  auto a = make_oracle("bayesian", problem.space, options(3, 14));
  auto run_one = [&](Oracle& o) {
    auto r = o.create_trial();
    EXPECT_EQ(r.kind, TrialRequest::Kind::kRun) << r.reason;
    o.end_trial(r.trial.trial_id, TrialStatus::kCompleted, problem.loss(r.trial.hyper_parameters));
    return r.trial.hyper_parameters;
  };
  for (int i = 0; i < 9; ++i) run_one(*a);  // 6 random trials, then the GP
  // One trial left running when the state is taken: it is hallucinated on both sides.
  auto pending = a->create_trial();
  ASSERT_EQ(pending.kind, TrialRequest::Kind::kRun);
  const Json state = a->get_state();
  auto b = make_oracle("bayesian", branin_problem().space, options(99));  // seed and max_trials come from the state
  b->set_state(Json::parse(state.dump()));  // through text, as the tuner stores it
  EXPECT_EQ(b->get_state(), state);
  for (auto* o : {a.get(), b.get()}) o->end_trial(pending.trial.trial_id, TrialStatus::kCompleted, 5.0);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(run_one(*a), run_one(*b)) << i;
  EXPECT_EQ(a->create_trial().kind, TrialRequest::Kind::kDone);  // max_trials 14
  EXPECT_EQ(b->create_trial().kind, TrialRequest::Kind::kDone);
  testing::expect_error([&] { b->set_state(make_oracle("random", problem.space, options(1))->get_state()); },
                        ErrorKind::kInvalidArgument, {"oracle", "bayesian"});
}

TEST(BayesianOracle, FailedAndNanTrialsNeverEnterTheModelOrTheRanking) {
  const Problem problem = branin_problem();
  OracleOptions o = options(4);
  o.num_initial_points = 3;  // the GP takes over after trial 6, with failures in between
  auto oracle = make_oracle("bayesian", problem.space, o);
  std::vector<std::string> failed;
  for (int i = 0; i < 16; ++i) {
    auto r = oracle->create_trial();
    ASSERT_EQ(r.kind, TrialRequest::Kind::kRun) << i << ": " << r.reason;
    if (i % 3 == 1) {
      oracle->end_trial(r.trial.trial_id, TrialStatus::kCompleted, std::nan(""));
      failed.push_back(r.trial.trial_id);
    } else if (i % 3 == 2) {
      oracle->end_trial(r.trial.trial_id, TrialStatus::kFailed, std::nullopt);
      failed.push_back(r.trial.trial_id);
    } else {
      oracle->end_trial(r.trial.trial_id, TrialStatus::kCompleted, problem.loss(r.trial.hyper_parameters));
    }
  }
  const auto ranked = oracle->best_trials(0);
  EXPECT_EQ(ranked.size(), 6u);  // trials 0, 3, 6, 9, 12, 15
  for (const auto& t : ranked) EXPECT_EQ(std::count(failed.begin(), failed.end(), t.trial_id), 0) << t.trial_id;
  for (const auto& id : failed) EXPECT_EQ(oracle->trials().at(id).status, TrialStatus::kFailed) << id;
}

TEST(BayesianOracle, ParallelRunnersGetDistinctSpreadPoints) {
  const Problem problem = branin_problem();
  auto oracle = make_oracle("bayesian", problem.space, options(6));
  for (int i = 0; i < 10; ++i) {
    auto r = oracle->create_trial();
    oracle->end_trial(r.trial.trial_id, TrialStatus::kCompleted, problem.loss(r.trial.hyper_parameters));
  }
  // Four runners ask before any reports back: the running trials are hallucinated as
  // pessimistic values, so the proposals spread instead of piling on one optimum.
  std::vector<std::vector<double>> units;
  for (int i = 0; i < 4; ++i) {
    auto r = oracle->create_trial();
    ASSERT_EQ(r.kind, TrialRequest::Kind::kRun);
    units.push_back(oracle->space().to_unit(r.trial.hyper_parameters));
  }
  for (std::size_t i = 0; i < units.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      const double dist = std::hypot(units[i][0] - units[j][0], units[i][1] - units[j][1]);
      EXPECT_GT(dist, 0.02) << i << " vs " << j;
    }
  }
}

TEST(BayesianOracle, DiscreteSpaceIsUsedUpWithoutRepeats) {
  SearchSpace s;
  s.Int("units", 16, 64, 16).Choice("activation", {"relu", "tanh", "gelu"});  // 4 x 3 points
  auto oracle = make_oracle("bayesian", s, options(8));
  std::set<Json> seen;
  for (int i = 0; i < 12; ++i) {
    auto r = oracle->create_trial();
    ASSERT_EQ(r.kind, TrialRequest::Kind::kRun) << i << ": " << r.reason;
    s.validate(r.trial.hyper_parameters);
    EXPECT_TRUE(seen.insert(r.trial.hyper_parameters).second) << r.trial.hyper_parameters.dump();
    const double loss = 1 - r.trial.hyper_parameters["units"].get<double>() / 100 +
                        (r.trial.hyper_parameters["activation"] == "gelu" ? 0 : 0.1);
    oracle->end_trial(r.trial.trial_id, TrialStatus::kCompleted, loss);
  }
  const auto done = oracle->create_trial();
  EXPECT_EQ(done.kind, TrialRequest::Kind::kDone);
  EXPECT_NE(done.reason.find("12"), std::string::npos) << done.reason;
  EXPECT_EQ(oracle->best_trials(1)[0].hyper_parameters, (Json{{"units", 64}, {"activation", "gelu"}}));
}

// Keras Tuner's default num_initial_points is max(3 x parameters, 3) (6 for Branin's two):
// those trials are random search's draws from the same seed, and the GP's come after.
TEST(BayesianOracle, FirstTrialsAreRandomUntilNumInitialPoints) {
  const Problem problem = branin_problem();
  for (const int initial : {0, 2}) {
    OracleOptions o = options(21, 8);
    o.num_initial_points = initial;
    auto bayes = make_oracle("bayesian", problem.space, o);
    auto random = make_oracle("random", problem.space, o);
    const int expected_random = initial == 0 ? 6 : 2;
    for (int i = 0; i < 8; ++i) {
      auto a = bayes->create_trial(), b = random->create_trial();
      ASSERT_EQ(a.kind, TrialRequest::Kind::kRun);
      if (i < expected_random) EXPECT_EQ(a.trial.hyper_parameters, b.trial.hyper_parameters) << initial << " " << i;
      else EXPECT_NE(a.trial.hyper_parameters, b.trial.hyper_parameters) << initial << " " << i;
      bayes->end_trial(a.trial.trial_id, TrialStatus::kCompleted, problem.loss(a.trial.hyper_parameters));
      random->end_trial(b.trial.trial_id, TrialStatus::kCompleted, problem.loss(b.trial.hyper_parameters));
    }
  }
}

TEST(BayesianOracle, ConditionalSpaceGivesValidPointsWithoutRepeats) {
  // momentum only exists for SGD; inactive parameters sit at 0.5 in the unit cube.
  SearchSpace s;
  s.Choice("optimizer", {"adam", "sgd"}).Float("momentum", 0, 0.9).conditional_on("optimizer", {"sgd"});
  s.Int("units", 8, 64, 8);
  auto oracle = make_oracle("bayesian", s, options(9, 20));
  std::set<Json> seen;
  for (int i = 0; i < 20; ++i) {
    auto r = oracle->create_trial();
    ASSERT_EQ(r.kind, TrialRequest::Kind::kRun) << i << ": " << r.reason;
    const Json& hp = r.trial.hyper_parameters;
    s.validate(hp);
    EXPECT_EQ(hp.contains("momentum"), hp["optimizer"] == "sgd") << hp.dump();
    EXPECT_TRUE(seen.insert(hp).second) << hp.dump();
    // Best: SGD with momentum 0.9 and 64 units.
    const double loss = (hp["optimizer"] == "sgd" ? 1 - hp["momentum"].get<double>() : 0.5) +
                        (64 - hp["units"].get<double>()) / 64;
    oracle->end_trial(r.trial.trial_id, TrialStatus::kCompleted, loss);
  }
  const auto best = oracle->best_trials(1).at(0);
  EXPECT_EQ(best.hyper_parameters["optimizer"], "sgd") << best.hyper_parameters.dump();
  EXPECT_LT(*best.score, 0.35) << best.hyper_parameters.dump();  // optimum 0.1
}

TEST(BayesianOracle, MaximisesWithUcbToo) {
  // val_accuracy-like objective: maximise -branin with Keras Tuner's UCB acquisition.
  const Problem problem = branin_problem();
  OracleOptions o = options(2, 25);
  o.objective = Objective::parse("val_accuracy");
  o.acquisition = "ucb";
  auto oracle = make_oracle("bayesian", problem.space, o);
  for (int i = 0; i < 25; ++i) {
    auto r = oracle->create_trial();
    ASSERT_EQ(r.kind, TrialRequest::Kind::kRun) << r.reason;
    oracle->end_trial(r.trial.trial_id, TrialStatus::kCompleted, -problem.loss(r.trial.hyper_parameters));
  }
  EXPECT_GT(*oracle->best_trials(1)[0].score, -1.5);  // optimum -0.397887
}

TEST(BayesianOracle, OptionsAreChecked) {
  const SearchSpace space = branin_problem().space;
  OracleOptions o = options(1);
  o.acquisition = "pi";
  testing::expect_error([&] { make_oracle("bayesian", space, o); }, ErrorKind::kInvalidArgument, {"acquisition", "ei", "ucb"});
  o = options(1);
  o.alpha = -1;
  testing::expect_error([&] { make_oracle("bayesian", space, o); }, ErrorKind::kInvalidArgument, {"alpha"});
  o = options(1);
  o.num_initial_points = -2;
  testing::expect_error([&] { make_oracle("bayesian", space, o); }, ErrorKind::kInvalidArgument, {"num_initial_points"});
}

}  // namespace
}  // namespace tensorhub
