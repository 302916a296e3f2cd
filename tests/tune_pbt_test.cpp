// Population-based training (src/tune/pbt_oracle.cpp) on a problem whose optimum depends on
// the schedule: a model's quality q grows by h per epoch in epochs 0-7 and by 1 - h in epochs
// 8-15, for its hyperparameter h in [0, 1]. Any fixed h ends at 8h + 8(1 - h) = 8 exactly; a
// schedule with h high early and low late reaches up to 16. PBT can find such a schedule, by
// taking the weights (q) of better members and perturbing their h; a fixed schedule cannot.
#include <cmath>
#include <fstream>
#include <map>
#include <thread>

#include "backend_factory.h"
#include "tune_runner_fixture.h"
#include "tensorhub/core/error.h"
#include "tensorhub/queue/runner.h"
#include "tensorhub/tune/tuner.h"
#include "test_util.h"

namespace tensorhub {
namespace {

double gain(double h, int epoch) { return epoch < 8 ? h : 1 - h; }

OracleOptions pbt_options(std::uint64_t seed) {
  OracleOptions o;
  o.objective = Objective::parse("q:max");
  o.seed = seed;
  o.max_epochs = 16;
  o.population = 8;
  o.perturbation_interval = 1;
  return o;
}

// Runs PBT in process: each segment resumes its checkpoint's q ("tuner/trial_id") and trains
// its epochs with its own h. Returns the oracle.
std::unique_ptr<Oracle> run_pbt(std::uint64_t seed, std::map<std::string, double>& q) {
  auto oracle = make_oracle("pbt", SearchSpace().Float("h", 0, 1), pbt_options(seed));
  while (true) {
    const TrialRequest r = oracle->create_trial();
    if (r.kind != TrialRequest::Kind::kRun) {
      EXPECT_EQ(r.kind, TrialRequest::Kind::kDone) << r.reason;  // in process nothing runs while it asks
      break;
    }
    const Json& hp = r.trial.hyper_parameters;
    double value = hp.contains("tuner/trial_id") ? q.at(hp["tuner/trial_id"].get<std::string>()) : 0;
    for (int e = hp["tuner/initial_epoch"].get<int>(); e < hp["tuner/epochs"].get<int>(); ++e) value += gain(hp["h"].get<double>(), e);
    q[r.trial.trial_id] = value;
    oracle->end_trial(r.trial.trial_id, TrialStatus::kCompleted, value);
  }
  return oracle;
}

TEST(Pbt, FindsAScheduleThatBeatsEveryFixedOne) {
  double sum = 0;
  for (std::uint64_t seed : {1, 2, 3, 4, 5}) {
    std::map<std::string, double> q;
    const auto oracle = run_pbt(seed, q);
    // 8 members, each to epoch 16 in one-epoch segments: 128 segments, fewer where a member
    // jumped ahead by taking a checkpoint further on.
    EXPECT_LE(oracle->trials().size(), 128u);
    const Trial best = oracle->best_trials(1).at(0);
    EXPECT_EQ(best.hyper_parameters["tuner/epochs"], 16);
    std::cerr << "seed " << seed << ": PBT's best q " << *best.score << " (every fixed h: 8)\n";
    EXPECT_GT(*best.score, 8.0) << "seed " << seed << ": no better than a fixed h";
    EXPECT_LE(*best.score, 16.0);
    sum += *best.score;
  }
  EXPECT_GT(sum / 5, 9.0);
}

TEST(Pbt, ExploitsTakeATopMembersCheckpointAndPerturbItsHyperparameters) {
  std::map<std::string, double> q;
  const auto oracle = run_pbt(4, q);
  int exploits = 0;
  for (const auto& [id, t] : oracle->trials()) {
    const Json& hp = t.hyper_parameters;
    const int segment = hp["tuner/segment"];
    EXPECT_EQ(hp["tuner/epochs"].get<int>(), hp["tuner/initial_epoch"].get<int>() + 1) << id;
    if (segment == 0) {
      EXPECT_FALSE(hp.contains("tuner/trial_id"));
      EXPECT_EQ(hp["tuner/initial_epoch"], 0);
      continue;
    }
    // It goes on from its checkpoint's epoch, never behind its own member's last one.
    const Trial& from = oracle->trials().at(hp["tuner/trial_id"].get<std::string>());
    EXPECT_EQ(hp["tuner/initial_epoch"], from.hyper_parameters["tuner/epochs"]) << id;
    if (!hp.contains("tuner/exploited_trial")) {
      // Continued: its own member's checkpoint, its own h.
      EXPECT_EQ(from.hyper_parameters["tuner/member"], hp["tuner/member"]) << id;
      EXPECT_EQ(from.hyper_parameters["h"], hp["h"]) << id;
      continue;
    }
    ++exploits;
    EXPECT_EQ(hp["tuner/exploited_trial"], from.trial_id);
    EXPECT_EQ(hp["tuner/exploited_member"], from.hyper_parameters["tuner/member"]);
    EXPECT_NE(hp["tuner/exploited_member"], hp["tuner/member"]);
    // Explored: x0.8 or x1.2 of the donor's h (clamped to [0, 1]), or drawn anew.
    const double h = hp["h"].get<double>(), donor = from.hyper_parameters["h"].get<double>();
    const bool perturbed = std::abs(h - std::min(1.0, donor * 1.2)) < 1e-9 || std::abs(h - donor * 0.8) < 1e-9;
    if (!perturbed) EXPECT_TRUE(h >= 0 && h <= 1) << id;
  }
  EXPECT_GE(exploits, 15) << "a quarter of 8 members may exploit at each of 15 steps";
}

TEST(Pbt, OptionsAreChecked) {
  auto with = [](auto change) {
    OracleOptions o = pbt_options(1);
    change(o);
    return o;
  };
  const SearchSpace space = SearchSpace().Float("h", 0, 1);
  testing::expect_error([&] { make_oracle("pbt", space, with([](OracleOptions& o) { o.population = 1; })); },
                        ErrorKind::kInvalidArgument, {"population"});
  testing::expect_error([&] { make_oracle("pbt", space, with([](OracleOptions& o) { o.quantile = 0.6; })); },
                        ErrorKind::kInvalidArgument, {"quantile"});
  testing::expect_error([&] { make_oracle("pbt", space, with([](OracleOptions& o) { o.perturbation_interval = 0; })); },
                        ErrorKind::kInvalidArgument, {"perturbation_interval"});
}

// ---- PBT on the queue: segments resume their checkpoints through real runners --------------

class PbtSearchTest : public testing::TunerRunnerTest {};

// Each trial reads q from its checkpoint's file (the task of "tuner/trial_id",
// "tuner/parent_task_id"), adds its epochs' gains, writes its own file and result. Every
// trial's q must equal its lineage's sum, recomputed here from the stored hyperparameters.
TEST_P(PbtSearchTest, EverySegmentResumesItsCheckpointAndTheLineageIsStored) {
  start_runner(2);

  TunerOptions o = search_options("pbt", "pbt", SearchSpace().Float("h", 0, 1), "");  // its command below
  o.oracle_options = pbt_options(5);
  o.oracle_options.population = 4;
  o.oracle_options.max_epochs = 8;
  o.oracle_options.perturbation_interval = 2;
  o.max_parallel_trials = 4;
  const std::string states = dir_.path().string();
  o.command = "sh -c 'q=0; p=\"$TENSORHUB_HP_tuner_2Fparent_task_id\"; [ -n \"$p\" ] && q=$(cat " + states +
              "/$p); e=$TENSORHUB_HP_tuner_2Finitial_epoch; while [ $e -lt $TENSORHUB_HP_tuner_2Fepochs ]; do "
              "q=$(awk -v q=$q -v h=$TENSORHUB_HP_h -v e=$e \"BEGIN { print q + (e < 8 ? h : 1 - h) }\"); e=$((e + 1)); done; "
              "echo $q > " + states + "/$TENSORHUB_TASK_ID; echo \"{\\\"q\\\": $q}\" > \"$TENSORHUB_RESULT_FILE\"'";
  const auto s = Tuner(o).search();
  ASSERT_TRUE(s.done) << s.reason;
  ASSERT_LE(s.trials.size(), 16u);  // 4 members x 4 segments of 2 epochs, fewer where one jumped ahead
  ASSERT_GE(s.trials.size(), 13u);
  std::map<std::string, const TrialView*> by_id;
  for (const auto& v : s.trials) by_id[v.trial.trial_id] = &v;
  int exploits = 0;
  for (const auto& [id, v] : by_id) {
    ASSERT_EQ(v->task_status, "finished") << id << ": " << v->error;
    const Json& hp = v->trial.hyper_parameters;
    double expected = 0;
    if (hp.contains("tuner/trial_id")) {
      const TrialView& parent = *by_id.at(hp["tuner/trial_id"].get<std::string>());
      expected = *parent.trial.score;
    }
    for (int e = hp["tuner/initial_epoch"].get<int>(); e < hp["tuner/epochs"].get<int>(); ++e)
      expected += gain(hp["h"].get<double>(), e);
    EXPECT_NEAR(*v->trial.score, expected, 1e-4) << id;  // awk prints 6 significant digits
    exploits += hp.contains("tuner/exploited_trial");
  }
  // Which member is last at a perturbation point depends on the order the runner's two slots
  // finish in: two exploits were seen in most runs, one in some (a PostgreSQL run of CI).
  EXPECT_GE(exploits, 1) << "one of 4 members may exploit at each of 3 steps";
}

INSTANTIATE_TEST_SUITE_P(Backends, PbtSearchTest, ::testing::ValuesIn(testing::backend_params()),
                         testing::backend_param_name);

}  // namespace
}  // namespace tensorhub
