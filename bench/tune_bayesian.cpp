// Search quality of the Bayesian optimisation oracle on Hartmann-6, against Optuna's
// TPESampler, measured in the same run.
//
// Hartmann-6 on [0, 1]^6 (Surjanovic & Bingham, Virtual Library of Simulation Experiments;
// global minimum -3.32237). Each side gets the same budget: `--trials` sequential trials
// (default 50) for each of `--seeds` seeds (default 10), and reports the best value per seed.
//  - ours: make_oracle("bayesian") with its defaults (Keras Tuner's: 18 random trials for 6
//    parameters, then GP + expected improvement), seeds 1..N (our seed 0 means "random");
//    also random search (make_oracle("random")) for reference;
//  - peer: bench/peers/optuna_hartmann.py, optuna.samplers.TPESampler(seed=s) with its
//    defaults (10 random startup trials), seeds 0..N-1 (Debian python3-optuna).
// Lower is better. Prints each side's per-seed bests and median, the difference ours - peer
// of the medians (negative: ours better) and the ratio ours / peer (> 1: ours better, both
// being negative), the time each side took, and a JSON summary as the last line.
//
// Usage: bench_tune_bayesian [--trials N] [--seeds S] [--acquisition ei|ucb] [--peer SCRIPT]
//                            [--python PATH] [--no-peer]
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench_util.h"
#include "tensorhub/tune/oracle.h"
#include "../tests/tune_test_functions.h"  // test functions shared with tests/

namespace {

using Clock = std::chrono::steady_clock;
using namespace tensorhub;
using tensorhub::bench::median;

// Best Hartmann-6 value after `trials` sequential trials of the oracle `name`.
double best_of(const std::string& name, int trials, std::uint64_t seed, const std::string& acquisition) {
  SearchSpace space;
  for (int j = 0; j < 6; ++j) space.Float("x" + std::to_string(j), 0, 1);
  OracleOptions o;
  o.objective = Objective::parse("loss");
  o.seed = seed;
  o.max_trials = trials;
  o.acquisition = acquisition;
  auto oracle = make_oracle(name, space, o);
  for (int i = 0; i < trials; ++i) {
    auto r = oracle->create_trial();
    if (r.kind != TrialRequest::Kind::kRun) throw std::runtime_error(name + " stopped early: " + r.reason);
    std::array<double, 6> x{};
    for (int j = 0; j < 6; ++j) x[j] = r.trial.hyper_parameters["x" + std::to_string(j)].get<double>();
    oracle->end_trial(r.trial.trial_id, TrialStatus::kCompleted, hartmann6(x));
  }
  return *oracle->best_trials(1).at(0).score;
}

void print_side(const char* label, const std::vector<double>& best, double seconds) {
  std::printf("%-16s median %.5f  (seconds %.2f)  best per seed:", label, median(best), seconds);
  for (double b : best) std::printf(" %.4f", b);
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  int trials = 50, seeds = 10;
  std::string acquisition = "ei";
  tensorhub::bench::PeerOptions peer{std::string(TENSORHUB_SOURCE_DIR) + "/bench/peers/optuna_hartmann.py"};
  CLI::App app{"Bayesian optimisation on Hartmann-6 against Optuna's TPE", "bench_tune_bayesian"};
  app.add_option("--trials", trials, "sequential trials per seed")->capture_default_str()->check(tensorhub::bench::at_least_one());
  app.add_option("--seeds", seeds, "seeds per side")->capture_default_str()->check(tensorhub::bench::at_least_one());
  app.add_option("--acquisition", acquisition, "ei or ucb")->capture_default_str();
  tensorhub::bench::add_peer_options(app, peer);
  tensorhub::bench::parse_or_exit(app, argc, argv);
  const bool with_peer = peer.run;
  try {
    std::printf("Hartmann-6 (minimum -3.32237), %d trials, %d seeds, acquisition %s; lower is better\n", trials, seeds,
                acquisition.c_str());
    std::vector<double> bayes, random;
    auto t0 = Clock::now();
    for (int s = 0; s < seeds; ++s) bayes.push_back(best_of("bayesian", trials, static_cast<std::uint64_t>(s) + 1, acquisition));
    const double bayes_s = std::chrono::duration<double>(Clock::now() - t0).count();
    t0 = Clock::now();
    for (int s = 0; s < seeds; ++s) random.push_back(best_of("random", trials, static_cast<std::uint64_t>(s) + 1, acquisition));
    const double random_s = std::chrono::duration<double>(Clock::now() - t0).count();
    print_side("ours bayesian:", bayes, bayes_s);
    print_side("ours random:", random, random_s);
    nlohmann::json summary = {{"bench", "tune_bayesian"}, {"function", "hartmann6"}, {"trials", trials},
                              {"seeds", seeds}, {"acquisition", acquisition}, {"ours_bayesian", bayes}, {"ours_median", median(bayes)},
                              {"ours_seconds", bayes_s}, {"random_median", median(random)}};
    if (with_peer) {
      const nlohmann::json p =
          tensorhub::bench::run_peer(peer, {"--trials", std::to_string(trials), "--seeds", std::to_string(seeds)});
      const auto tpe = p.at("best").get<std::vector<double>>();
      print_side("optuna tpe:", tpe, p.at("seconds").get<double>());
      const double mo = median(bayes), mp = median(tpe);
      std::printf("median difference ours - optuna: %+.5f (negative: ours better)\n", mo - mp);
      std::printf("median ratio ours / optuna: %.4f (> 1: ours better)\n", mo / mp);
      summary["optuna_version"] = p.value("optuna", "");
      summary["optuna_tpe"] = tpe;
      summary["optuna_median"] = mp;
      summary["optuna_seconds"] = p.at("seconds");
      summary["difference"] = mo - mp;
      summary["ratio"] = mo / mp;
    }
    std::cout << summary.dump() << std::endl;
  } catch (const std::exception& e) {
    std::cerr << "bench_tune_bayesian: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
