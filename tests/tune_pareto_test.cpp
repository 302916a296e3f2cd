// Several objectives (tune/pareto.h): dominance, NSGA-II's sorting and crowding on hand-checked
// points, exact hypervolumes, the NSGA-II oracle on ZDT1 (Zitzler, Deb & Thiele 2000, whose
// front f2 = 1 - sqrt(f1) is known), and a search of two objectives with real runners.
#include <cmath>
#include <random>
#include <set>
#include <thread>

#include "backend_factory.h"
#include "tune_runner_fixture.h"
#include "tensorhub/core/error.h"
#include "tensorhub/queue/runner.h"
#include "tensorhub/tune/pareto.h"
#include "tensorhub/tune/tuner.h"
#include "test_util.h"
#include "tune_test_functions.h"

namespace tensorhub {
namespace {

const std::vector<Objective> kMinMin = {{"a", false}, {"b", false}};

TEST(Pareto, ObjectivesParseAsAListOfNameAndDirection) {
  const auto o = parse_objectives("val_accuracy,predict_ms:min");
  ASSERT_EQ(o.size(), 2u);
  EXPECT_EQ(o[0].to_string(), "val_accuracy:max");  // inferred, as for one objective
  EXPECT_EQ(o[1].to_string(), "predict_ms:min");
  EXPECT_EQ(objectives_to_string(o), "val_accuracy:max,predict_ms:min");
  testing::expect_error([] { parse_objectives("loss,,acc"); }, ErrorKind::kInvalidArgument, {"empty item"});
  testing::expect_error([] { parse_objectives("loss,loss:min"); }, ErrorKind::kInvalidArgument, {"loss is given twice"});
  testing::expect_error([] { parse_objectives("loss,predict_ms"); }, ErrorKind::kInvalidArgument, {"predict_ms:min"});
}

// Minimising both: A(1,5) B(2,3) C(4,1) F(2,3) are non-dominated (B and F tie), D(3,4) is
// dominated by B only, E(5,5) by everything else.
TEST(Pareto, FastNonDominatedSortGivesTheFrontsInOrder) {
  const std::vector<std::vector<double>> p = {{1, 5}, {2, 3}, {4, 1}, {3, 4}, {5, 5}, {2, 3}};
  EXPECT_TRUE(dominates(p[1], p[3], kMinMin));
  EXPECT_FALSE(dominates(p[1], p[5], kMinMin));  // equal: neither dominates
  EXPECT_FALSE(dominates(p[0], p[2], kMinMin));
  EXPECT_TRUE(dominates({1, 1}, {1, std::nan("")}, kMinMin));
  EXPECT_FALSE(dominates({std::nan(""), 0}, {1, 1}, kMinMin));
  const auto fronts = non_dominated_fronts(p, kMinMin);
  ASSERT_EQ(fronts.size(), 3u);
  EXPECT_EQ(fronts[0], (std::vector<std::size_t>{0, 1, 2, 5}));
  EXPECT_EQ(fronts[1], (std::vector<std::size_t>{3}));
  EXPECT_EQ(fronts[2], (std::vector<std::size_t>{4}));
  // Maximising both turns the order round: E is the one front-0 point.
  EXPECT_EQ(non_dominated_fronts(p, {{"a", true}, {"b", true}})[0], (std::vector<std::size_t>{4}));
}

// Front A(1,5) B(2,3) C(4,1): A and C are the extremes (infinite); B's distance is
// (4 - 1) / 3 in the first objective plus (5 - 1) / 4 in the second = 2.
TEST(Pareto, CrowdingDistanceIsDebsNormalisedGapSum) {
  const std::vector<std::vector<double>> p = {{1, 5}, {2, 3}, {4, 1}};
  const auto d = crowding_distances(p, {0, 1, 2}, kMinMin);
  EXPECT_TRUE(std::isinf(d[0]));
  EXPECT_DOUBLE_EQ(d[1], 2.0);
  EXPECT_TRUE(std::isinf(d[2]));
}

TEST(Pareto, HypervolumeIsTheUnionOfTheBoxesToTheReference) {
  // Three steps below (4, 4): 1 x 1 + 1 x 2 + 1 x 3.
  EXPECT_DOUBLE_EQ(hypervolume({{1, 3}, {2, 2}, {3, 1}}, {4, 4}, kMinMin), 6.0);
  // The same front maximised (negated) against the negated reference.
  EXPECT_DOUBLE_EQ(hypervolume({{-1, -3}, {-2, -2}, {-3, -1}}, {-4, -4}, {{"a", true}, {"b", true}}), 6.0);
  // A dominated point and one beyond the reference add nothing.
  EXPECT_DOUBLE_EQ(hypervolume({{1, 3}, {2, 2}, {3, 1}, {3, 3}, {5, 0}}, {4, 4}, kMinMin), 6.0);
  // Three objectives: [1,3]^3 (8) and [0,3]x[2,3]x[2,3] (3) overlap in [1,3]x[2,3]x[2,3] (2).
  const std::vector<Objective> three = {{"a", false}, {"b", false}, {"c", false}};
  EXPECT_DOUBLE_EQ(hypervolume({{1, 1, 1}}, {2, 3, 4}, three), 6.0);
  EXPECT_DOUBLE_EQ(hypervolume({{1, 1, 1}, {0, 2, 2}}, {3, 3, 3}, three), 9.0);
  // ZDT1's true front f2 = 1 - sqrt(f1), sampled at 2,001 points: the area up to (1, 1) is
  // the integral of sqrt(f1) over [0, 1], 2/3 (the staircase below the curve a little less).
  std::vector<std::vector<double>> front;
  for (int i = 0; i <= 2000; ++i) front.push_back({i / 2000.0, 1 - std::sqrt(i / 2000.0)});
  const double hv = hypervolume(front, {1, 1}, kMinMin);
  EXPECT_NEAR(hv, 2.0 / 3.0, 1e-3);
  EXPECT_LT(hv, 2.0 / 3.0);
  testing::expect_error([] { hypervolume({{1, 1}}, {1}, kMinMin); }, ErrorKind::kInvalidArgument, {"reference"});
}

// ZDT1 (tune_test_functions.h) at a trial's point x0 .. x(n-1).
std::vector<double> zdt1_at(const Json& hp, int n) {
  std::vector<double> x;
  for (int i = 0; i < n; ++i) x.push_back(hp.at("x" + std::to_string(i)).get<double>());
  return zdt1(x);
}

// Runs `oracle` on ZDT1 for `trials` trials, each ended at once; returns the oracle.
std::unique_ptr<Oracle> run_zdt1(const std::string& name, int n, int trials, std::uint64_t seed) {
  SearchSpace space;
  for (int i = 0; i < n; ++i) space.Float("x" + std::to_string(i), 0, 1);
  OracleOptions o;
  o.objective = {"f1", false};
  o.objectives = {{"f1", false}, {"f2", false}};
  o.max_trials = trials;
  o.seed = seed;
  o.population_size = 20;
  auto oracle = make_oracle(name, space, o);
  while (true) {
    const TrialRequest r = oracle->create_trial();
    if (r.kind != TrialRequest::Kind::kRun) break;
    oracle->end_trial(r.trial.trial_id, TrialStatus::kCompleted, zdt1_at(r.trial.hyper_parameters, n));
  }
  return oracle;
}

double front_hypervolume(const Oracle& oracle) {
  std::vector<std::vector<double>> points;
  for (const auto& t : oracle.pareto_front()) points.push_back(t.values);
  return hypervolume(points, {1.1, 1.1}, kMinMin);
}

TEST(Nsga2, OnZdt1ItsFrontIsNonDominatedAndBeatsRandomSearchsHypervolume) {
  // The most a front can dominate below (1.1, 1.1): 2/3 + 0.1 (f1 in [0, 1], above the
  // front) + 0.11 (f1 in [1, 1.1]).
  const double best_possible = 2.0 / 3.0 + 0.1 + 0.11;
  double nsga2_sum = 0, random_sum = 0;
  for (std::uint64_t seed : {1, 2, 3}) {
    const auto nsga2 = run_zdt1("nsga2", 5, 400, seed);
    const auto random = run_zdt1("random", 5, 400, seed);
    EXPECT_EQ(nsga2->trials().size(), 400u);
    // Every point of the front is dominated by no trial at all (checked here by brute force).
    const auto front = nsga2->pareto_front();
    ASSERT_FALSE(front.empty());
    for (const auto& f : front)
      for (const auto& [id, t] : nsga2->trials()) EXPECT_FALSE(dominates(t.values, f.values, kMinMin)) << id << " over " << f.trial_id;
    // And every completed trial off the front is dominated by one on it.
    std::set<std::string> on_front;
    for (const auto& f : front) on_front.insert(f.trial_id);
    for (const auto& [id, t] : nsga2->trials()) {
      if (on_front.count(id)) continue;
      bool dominated = false;
      for (const auto& f : front) dominated |= dominates(f.values, t.values, kMinMin);
      EXPECT_TRUE(dominated) << id;
    }
    const double hv = front_hypervolume(*nsga2), hv_random = front_hypervolume(*random);
    std::cerr << "ZDT1 (5 variables, 400 trials), seed " << seed << ": hypervolume NSGA-II " << hv << ", random "
              << hv_random << " (at most " << best_possible << ")\n";
    EXPECT_LE(hv, best_possible);
    nsga2_sum += hv;
    random_sum += hv_random;
  }
  EXPECT_GT(nsga2_sum, random_sum);
}

TEST(Nsga2, AResumedOracleContinuesIdentically) {
  // 50 of 60 trials: two generations of 20 counted, the third begun.
  OracleOptions o;
  o.objective = {"f1", false};
  o.objectives = {{"f1", false}, {"f2", false}};
  o.max_trials = 60;
  o.seed = 9;
  o.population_size = 20;
  SearchSpace space = SearchSpace().Float("x0", 0, 1).Float("x1", 0, 1).Float("x2", 0, 1);
  auto a = make_oracle("nsga2", space, o);
  for (int i = 0; i < 50; ++i) {
    const TrialRequest r = a->create_trial();
    ASSERT_EQ(r.kind, TrialRequest::Kind::kRun);
    a->end_trial(r.trial.trial_id, TrialStatus::kCompleted, zdt1_at(r.trial.hyper_parameters, 3));
  }
  auto b = make_oracle("nsga2", space, o);
  b->set_state(a->get_state());
  EXPECT_EQ(b->get_state(), a->get_state());
  for (int i = 0; i < 10; ++i) EXPECT_EQ(b->create_trial().trial.to_json(), a->create_trial().trial.to_json());
  EXPECT_EQ(a->create_trial().kind, TrialRequest::Kind::kDone);  // max_trials
  testing::expect_error([] {
    OracleOptions o;
    o.objectives = {{"val_loss", false}, {"ms", false}};
    make_oracle("nsga2", SearchSpace().Float("x", 0, 1), o);
  }, ErrorKind::kInvalidArgument, {"max_trials"});
  testing::expect_error([] {
    OracleOptions o;
    o.objectives = {{"val_loss", false}, {"ms", false}};
    make_oracle("bayesian", SearchSpace().Float("x", 0, 1), o);
  }, ErrorKind::kInvalidArgument, {"nsga2, random or grid"});
}

TEST(Pareto, ValuesOfAResultComeFromOnePlace) {
  const std::vector<Objective> o = {{"val_accuracy", true}, {"ms", false}};
  EXPECT_EQ(values_of_result({{"val_accuracy", 0.8}, {"ms", 3}}, o), (std::vector<double>{0.8, 3}));
  // Without both at the top: the epoch whose first objective is best, not each one's best.
  const Json history = {{"history", {{{"val_accuracy", 0.7}, {"ms", 1}}, {{"val_accuracy", 0.9}, {"ms", 5}},
                                     {{"val_accuracy", 0.8}, {"ms", 2}}}}};
  EXPECT_EQ(values_of_result(history, o), (std::vector<double>{0.9, 5}));
  EXPECT_EQ(values_of_result({{"val_accuracy", 0.8}}, o), std::nullopt);
}

// ---- a search of two objectives with real runners ------------------------------------------

class ParetoSearchTest : public testing::TunerRunnerTest {};

// x in 0..4 gives (a, b) = (x, (x - 3)^2): (0, 9), (1, 4), (2, 1), (3, 0), (4, 1). Minimising
// both, x = 4 is dominated by x = 2 (a 2 < 4, b equal); the others form the front.
TEST_P(ParetoSearchTest, TheSummaryHoldsTheFrontOfTwoObjectives) {
  start_runner(2);

  TunerOptions o = search_options(
      "two", "grid", SearchSpace().Int("x", 0, 4),
      "awk -v x={x} 'BEGIN { printf \"{\\\"a\\\": %g, \\\"b\\\": %g}\", x, (x - 3) ^ 2 }' > \"$TENSORHUB_RESULT_FILE\"");
  o.oracle_options.objectives = parse_objectives("a:min,b:min");
  o.oracle_options.objective = o.oracle_options.objectives.front();
  const auto s = Tuner(o).search();
  ASSERT_TRUE(s.done) << s.reason;
  std::vector<int> front_x;
  for (const auto& v : s.pareto_front) front_x.push_back(v.trial.hyper_parameters.at("x").get<int>());
  EXPECT_EQ(front_x, (std::vector<int>{0, 1, 2, 3}));  // by the first objective, best first
  ASSERT_EQ(s.pareto_front.size(), 4u);
  EXPECT_EQ(s.pareto_front[1].trial.values, (std::vector<double>{1, 4}));
  ASSERT_TRUE(s.best);
  EXPECT_EQ(s.best->trial.hyper_parameters.at("x"), 0);
  const Json j = s.to_json();
  EXPECT_EQ(j["objectives"], "a:min,b:min");
  EXPECT_EQ(j["pareto_front"].size(), 4u);
  // Resumed (read back from the hub), the front is the same.
  const auto stored = load_search_summary(db_->uri(), "tune", "two");
  EXPECT_EQ(stored.pareto_front.size(), 4u);
}

INSTANTIATE_TEST_SUITE_P(Backends, ParetoSearchTest, ::testing::ValuesIn(testing::backend_params()),
                         testing::backend_param_name);

}  // namespace
}  // namespace tensorhub
