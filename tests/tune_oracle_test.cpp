// Oracles: grid and random search end when the space is used up, trial bookkeeping and
// ranking, ASHA's promotions and median stopping, and get_state/set_state continuing
// identically for every oracle.
#include <cmath>
#include <set>

#include "tensorhub/tune/oracle.h"
#include "test_util.h"

namespace tensorhub {
namespace {

SearchSpace two_by_three() {
  SearchSpace s;
  s.Choice("act", {"relu", "tanh"}).Choice("units", {16, 32, 64});
  return s;
}

OracleOptions options(int max_trials = 0, std::uint64_t seed = 5) {
  OracleOptions o;
  o.objective = Objective::parse("val_loss");
  o.max_trials = max_trials;
  o.seed = seed;
  return o;
}

// A made-up loss for a point: smaller for more units and for tanh.
double loss_of(const Json& hp) {
  double loss = 1.0;
  if (hp.contains("units")) loss -= hp["units"].get<double>() / 1000;
  if (hp.contains("act") && hp["act"] == "tanh") loss -= 0.05;
  if (hp.contains("x")) loss += std::pow(hp["x"].get<double>() - 0.3, 2);
  return loss;
}

TEST(GridOracle, TwoByThreeGivesSixTrialsThenDone) {
  auto oracle = make_oracle("grid", two_by_three(), options());
  std::vector<Json> points;
  for (int i = 0; i < 6; ++i) {
    auto r = oracle->create_trial();
    ASSERT_EQ(r.kind, TrialRequest::Kind::kRun) << i;
    points.push_back(r.trial.hyper_parameters);
    oracle->end_trial(r.trial.trial_id, TrialStatus::kCompleted, loss_of(r.trial.hyper_parameters));
  }
  EXPECT_EQ(oracle->create_trial().kind, TrialRequest::Kind::kDone);
  EXPECT_EQ(points.front(), (Json{{"act", "relu"}, {"units", 16}}));
  EXPECT_EQ(points[1], (Json{{"act", "relu"}, {"units", 32}}));  // the last parameter varies fastest
  EXPECT_EQ(points.back(), (Json{{"act", "tanh"}, {"units", 64}}));
  EXPECT_EQ(std::set<Json>(points.begin(), points.end()).size(), 6u);
  EXPECT_EQ(oracle->trials().begin()->first, "0000");
  EXPECT_EQ(oracle->trials().rbegin()->first, "0005");
  // Best: tanh with 64 units, loss 1 - 0.064 - 0.05.
  const auto best = oracle->best_trials(2);
  ASSERT_EQ(best.size(), 2u);
  EXPECT_EQ(best[0].trial_id, "0005");
  EXPECT_DOUBLE_EQ(*best[0].score, 0.886);
  EXPECT_EQ(best[1].trial_id, "0004");  // tanh with 32 units: 1 - 0.032 - 0.05 = 0.918
}

TEST(GridOracle, MaxTrialsCapsAndContinuousSpaceIsRefused) {
  auto oracle = make_oracle("grid", two_by_three(), options(4));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(oracle->create_trial().kind, TrialRequest::Kind::kRun);
  const auto r = oracle->create_trial();
  EXPECT_EQ(r.kind, TrialRequest::Kind::kDone);
  EXPECT_NE(r.reason.find("max_trials"), std::string::npos) << r.reason;
  SearchSpace continuous;
  continuous.Float("dropout", 0, 0.5);
  testing::expect_error([&] { make_oracle("grid", continuous, options()); }, ErrorKind::kInvalidArgument,
                        {"dropout", "continuous"});
}

TEST(GridOracle, HugeGridIsWalkedWithoutListingIt) {
  SearchSpace s;
  s.Int("a", 1, 1000).Int("b", 1, 1000).Int("c", 1, 1000);
  EXPECT_EQ(*s.size(), 1'000'000'000u);
  testing::expect_error([&] { s.grid(); }, ErrorKind::kInvalidArgument, {"1000000000", "grid cursor"});
  auto oracle = make_oracle("grid", s, options());
  EXPECT_EQ(oracle->create_trial().trial.hyper_parameters, (Json{{"a", 1}, {"b", 1}, {"c", 1}}));
  EXPECT_EQ(oracle->create_trial().trial.hyper_parameters, (Json{{"a", 1}, {"b", 1}, {"c", 2}}));
}

TEST(RandomOracle, SixPointSpaceGivesSixDistinctThenDone) {
  auto oracle = make_oracle("random", two_by_three(), options(10));
  std::set<Json> points;
  for (int i = 0; i < 6; ++i) {
    auto r = oracle->create_trial();
    ASSERT_EQ(r.kind, TrialRequest::Kind::kRun) << i;
    points.insert(r.trial.hyper_parameters);
    oracle->end_trial(r.trial.trial_id, TrialStatus::kCompleted, 0.5);
  }
  EXPECT_EQ(points.size(), 6u);
  const auto r = oracle->create_trial();
  EXPECT_EQ(r.kind, TrialRequest::Kind::kDone);
  EXPECT_NE(r.reason.find("all 6 points"), std::string::npos) << r.reason;
  EXPECT_EQ(oracle->trials().size(), 6u);
}

// optimizer in {adam, sgd}, momentum in {0, 0.9} only for sgd, lr in {0.1, 0.01}: 6 points.
SearchSpace conditional_space() {
  SearchSpace s;
  s.Choice("optimizer", {"adam", "sgd"}).Choice("momentum", {0.0, 0.9}).conditional_on("optimizer", {"sgd"});
  s.Choice("lr", {0.1, 0.01});
  return s;
}

TEST(RandomOracle, ConditionalSpaceEndsExactlyWhenEveryPointWasTried) {
  // Half the draws are adam, which has only 2 of the 6 points: collisions are frequent, and
  // the last points come from the enumeration of what is left.
  for (std::uint64_t seed : {1, 2, 3}) {
    auto oracle = make_oracle("random", conditional_space(), options(0, seed));
    std::set<Json> points;
    for (int i = 0; i < 6; ++i) {
      auto r = oracle->create_trial();
      ASSERT_EQ(r.kind, TrialRequest::Kind::kRun) << i;
      points.insert(r.trial.hyper_parameters);
      EXPECT_EQ(r.trial.hyper_parameters.contains("momentum"), r.trial.hyper_parameters["optimizer"] == "sgd");
    }
    EXPECT_EQ(points.size(), 6u);
    EXPECT_EQ(oracle->create_trial().kind, TrialRequest::Kind::kDone);
  }
}

TEST(GridOracle, ConditionalSpaceLeavesInactiveParametersOut) {
  auto oracle = make_oracle("grid", conditional_space(), options());
  std::vector<Json> points;
  for (auto r = oracle->create_trial(); r.kind == TrialRequest::Kind::kRun; r = oracle->create_trial()) {
    points.push_back(r.trial.hyper_parameters);
  }
  ASSERT_EQ(points.size(), 6u);
  EXPECT_EQ(points[0], (Json{{"optimizer", "adam"}, {"lr", 0.1}}));
  EXPECT_EQ(points[2], (Json{{"optimizer", "sgd"}, {"momentum", 0.0}, {"lr", 0.1}}));
  EXPECT_EQ(points[5], (Json{{"optimizer", "sgd"}, {"momentum", 0.9}, {"lr", 0.01}}));
}

TEST(RandomOracle, MaxTrialsOnALargeSpace) {
  SearchSpace s;
  s.Float("x", 0, 1).Int("units", 1, 1000);
  auto oracle = make_oracle("random", s, options(3));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(oracle->create_trial().kind, TrialRequest::Kind::kRun);
  EXPECT_EQ(oracle->create_trial().kind, TrialRequest::Kind::kDone);
}

TEST(Oracle, EndTrialRulesAndTrialJson) {
  auto oracle = make_oracle("random", two_by_three(), options());
  const auto a = oracle->create_trial().trial.trial_id;
  const auto b = oracle->create_trial().trial.trial_id;
  const auto c = oracle->create_trial().trial.trial_id;
  EXPECT_TRUE(oracle->report(a, 0, 0.7));
  oracle->end_trial(a, TrialStatus::kCompleted, std::nan(""));  // NaN counts as failed
  EXPECT_EQ(oracle->trials().at(a).status, TrialStatus::kFailed);
  oracle->end_trial(b, TrialStatus::kStopped, 0.3);
  oracle->end_trial(b, TrialStatus::kCompleted, 0.1);  // replay: no-op
  EXPECT_EQ(oracle->trials().at(b).status, TrialStatus::kStopped);
  EXPECT_DOUBLE_EQ(*oracle->trials().at(b).score, 0.3);
  EXPECT_TRUE(oracle->report(b, 5, 0.0));  // an ended trial's report is ignored
  EXPECT_EQ(oracle->trials().at(b).epoch_values.count(5), 0u);
  testing::expect_error([&] { oracle->end_trial("9999", TrialStatus::kCompleted, 1.0); }, ErrorKind::kNotFound, {"9999"});
  testing::expect_error([&] { oracle->report("9999", 0, 1.0); }, ErrorKind::kNotFound, {"9999"});
  testing::expect_error([&] { oracle->end_trial(c, TrialStatus::kRunning, 1.0); }, ErrorKind::kInvalidArgument, {"running"});
  const auto best = oracle->best_trials(0);
  ASSERT_EQ(best.size(), 1u);  // failed and running trials do not rank
  EXPECT_EQ(best[0].trial_id, b);

  Trial t = oracle->trials().at(a);
  t.epoch_values[1] = std::nan("");
  const Trial back = Trial::from_json(Json::parse(t.to_json().dump()));
  EXPECT_EQ(back.to_json(), t.to_json());
  EXPECT_TRUE(std::isnan(back.epoch_values.at(1)));
  EXPECT_DOUBLE_EQ(back.epoch_values.at(0), 0.7);
  for (auto s : {TrialStatus::kRunning, TrialStatus::kCompleted, TrialStatus::kStopped, TrialStatus::kFailed}) {
    EXPECT_EQ(trial_status_from_string(to_string(s)), s);
  }
  testing::expect_error([] { trial_status_from_string("done"); }, ErrorKind::kInvalidArgument, {"done", "completed"});
  Json bad = t.to_json();
  bad["status"] = 3;
  testing::expect_error([&] { Trial::from_json(bad); }, ErrorKind::kInvalidArgument, {"status"});
  bad = t.to_json();
  bad.erase("hyper_parameters");
  testing::expect_error([&] { Trial::from_json(bad); }, ErrorKind::kInvalidArgument, {"hyper_parameters", "missing"});
}

TEST(Oracle, MakeOracleChecksNameAndOptions) {
  testing::expect_error([] { make_oracle("tpe", two_by_three(), options()); }, ErrorKind::kInvalidArgument,
                        {"tpe", "grid, random, hyperband, bayesian, asha"});
  auto o = options();
  o.factor = 1;
  testing::expect_error([&] { make_oracle("hyperband", two_by_three(), o); }, ErrorKind::kInvalidArgument, {"factor", ">= 2"});
  o = options();
  o.max_epochs = 0;
  testing::expect_error([&] { make_oracle("asha", two_by_three(), o); }, ErrorKind::kInvalidArgument, {"max_epochs"});
}

// Runs `steps` create/end rounds on `oracle`, ending each trial with loss_of(point) (every
// third one failed), and returns the created trials as JSON.
std::vector<Json> drive(Oracle& oracle, int steps) {
  std::vector<Json> out;
  for (int i = 0; i < steps; ++i) {
    auto r = oracle.create_trial();
    if (r.kind != TrialRequest::Kind::kRun) {
      out.push_back(Json{{"kind", static_cast<int>(r.kind)}, {"reason", r.reason}});
      continue;
    }
    out.push_back(r.trial.to_json());
    const auto id = r.trial.trial_id;
    if (std::stoi(id) % 3 == 2) oracle.end_trial(id, TrialStatus::kFailed, std::nullopt);
    else oracle.end_trial(id, TrialStatus::kCompleted, loss_of(r.trial.hyper_parameters));
  }
  return out;
}

TEST(Oracle, StateRestoredIntoAFreshOracleContinuesIdentically) {
  SearchSpace s;
  s.Float("x", 0, 1).Choice("units", {16, 32, 64, 128}).Choice("act", {"relu", "tanh"});
  SearchSpace finite = two_by_three();
  finite.Int("depth", 1, 4);
  for (const std::string name : {"grid", "random", "hyperband", "asha"}) {
    SCOPED_TRACE(name);
    const SearchSpace& space = name == "grid" ? finite : s;
    auto o = options(0, 1234);
    o.max_epochs = 9;
    auto first = make_oracle(name, space, o);
    drive(*first, 11);
    // Leave one trial running across the save, as a killed tuner would.
    auto running = first->create_trial();
    ASSERT_EQ(running.kind, TrialRequest::Kind::kRun);
    const std::string saved = first->get_state().dump();
    auto second = make_oracle(name, SearchSpace(), options(0, 99));
    second->set_state(Json::parse(saved));
    EXPECT_EQ(second->get_state(), first->get_state());
    for (auto* oracle : {first.get(), second.get()}) {
      oracle->end_trial(running.trial.trial_id, TrialStatus::kCompleted, 0.5);
    }
    const auto a = drive(*first, 12);
    const auto b = drive(*second, 12);
    EXPECT_EQ(a, b);
    EXPECT_EQ(a.front().value("kind", -1), -1) << a.front();  // a real trial, not kDone
  }
}

TEST(Oracle, SetStateNamesBadFields) {
  auto oracle = make_oracle("random", two_by_three(), options());
  Json state = oracle->get_state();
  state.erase("rng");
  testing::expect_error([&] { oracle->set_state(state); }, ErrorKind::kInvalidArgument, {"rng"});
  state = oracle->get_state();
  state["options"].erase("factor");
  testing::expect_error([&] { oracle->set_state(state); }, ErrorKind::kInvalidArgument, {"factor", "missing"});
}

// ASHA by hand: factor 3, rungs at 1, 3, 9 epochs.
OracleOptions asha_options(int max_trials) {
  auto o = options(max_trials);
  o.min_epochs = 1;
  o.max_epochs = 9;
  o.factor = 3;
  return o;
}

TEST(AshaOracle, PromotesTheTopThirdOfARung) {
  SearchSpace s;
  s.Float("x", 0, 1);
  auto oracle = make_oracle("asha", s, asha_options(4));
  std::vector<std::string> ids;
  for (double loss : {0.5, 0.2, 0.9}) {
    auto r = oracle->create_trial();
    ASSERT_EQ(r.kind, TrialRequest::Kind::kRun);
    EXPECT_EQ(r.trial.hyper_parameters["tuner/epochs"], 1);
    EXPECT_EQ(r.trial.hyper_parameters["tuner/initial_epoch"], 0);
    EXPECT_FALSE(r.trial.hyper_parameters.contains("tuner/trial_id"));
    oracle->end_trial(r.trial.trial_id, TrialStatus::kCompleted, loss);
    ids.push_back(r.trial.trial_id);
  }
  // 3 completed in rung 0: the top floor(3 / 3) = 1, trial 0001 (0.2), goes to rung 1.
  auto p = oracle->create_trial();
  ASSERT_EQ(p.kind, TrialRequest::Kind::kRun);
  EXPECT_EQ(p.trial.hyper_parameters["tuner/trial_id"], "0001");
  EXPECT_EQ(p.trial.hyper_parameters["tuner/initial_epoch"], 1);
  EXPECT_EQ(p.trial.hyper_parameters["tuner/epochs"], 3);
  EXPECT_EQ(p.trial.hyper_parameters["tuner/round"], 1);
  EXPECT_EQ(p.trial.hyper_parameters["x"], oracle->trials().at("0001").hyper_parameters["x"]);
  // Nothing else is promotable: a new configuration (the 4th of max_trials 4) at rung 0.
  auto n = oracle->create_trial();
  ASSERT_EQ(n.kind, TrialRequest::Kind::kRun);
  EXPECT_EQ(n.trial.hyper_parameters["tuner/round"], 0);
  // Max configurations started, two running: wait; once they end with nothing to promote, done.
  EXPECT_EQ(oracle->create_trial().kind, TrialRequest::Kind::kWait);
  oracle->end_trial(p.trial.trial_id, TrialStatus::kCompleted, 0.15);
  oracle->end_trial(n.trial.trial_id, TrialStatus::kStopped, 0.01);  // stopped: never promoted
  const auto done = oracle->create_trial();
  EXPECT_EQ(done.kind, TrialRequest::Kind::kDone) << done.trial.to_json();
  EXPECT_EQ(oracle->trials().size(), 5u);
}

TEST(AshaOracle, MedianStoppingRule) {
  SearchSpace s;
  s.Float("x", 0, 1);
  auto oracle = make_oracle("asha", s, asha_options(0));
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(oracle->create_trial().trial.trial_id);
  // Epoch 2 (past the grace of min_epochs = 1): fewer than 3 others never stop.
  EXPECT_TRUE(oracle->report(ids[0], 2, 0.3));
  EXPECT_TRUE(oracle->report(ids[1], 2, 0.5));
  EXPECT_TRUE(oracle->report(ids[2], 2, 0.9));  // the worst, but only 2 others reached epoch 2
  // Others 0.3, 0.5, 0.9: median 0.5; a loss of 0.6 is worse -> stop.
  EXPECT_FALSE(oracle->report(ids[3], 2, 0.6));
  // Others 0.3, 0.5, 0.9, 0.6: median 0.55; 0.4 is better -> go on.
  EXPECT_TRUE(oracle->report(ids[4], 2, 0.4));
  // The grace: epoch 0 is never stopped, epoch 1 is.
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(oracle->report(ids[i], 0, 0.1));
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(oracle->report(ids[i], 1, 0.1));
  EXPECT_TRUE(oracle->report(ids[4], 0, 5.0));
  EXPECT_FALSE(oracle->report(ids[4], 1, 5.0));
  EXPECT_FALSE(oracle->report(ids[4], 1, std::nan("")));  // NaN is worse than anything
  // Maximised objectives: worse means smaller.
  auto o = asha_options(0);
  o.objective = Objective::parse("val_accuracy");
  auto acc = make_oracle("asha", s, o);
  std::vector<std::string> a;
  for (int i = 0; i < 4; ++i) a.push_back(acc->create_trial().trial.trial_id);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(acc->report(a[i], 3, 0.8 + 0.05 * i));
  EXPECT_FALSE(acc->report(a[3], 3, 0.84));  // median 0.85
  EXPECT_TRUE(acc->report(a[3], 3, 0.86));   // the same epoch reported again: replaces the value
}

}  // namespace
}  // namespace tensorhub
