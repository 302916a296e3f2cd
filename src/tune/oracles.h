// Internal to tensorhub_tune: the oracles' factory functions (make_oracle dispatches to them)
// and helpers the oracles share (options and random-generator state as JSON, random points
// without repeats).
#pragma once

#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>

#include "tensorhub/tune/oracle.h"

namespace tensorhub {

/// Grid search: every point of a finite space once, in SearchSpace::grid() order; ends when
/// the grid is used up or max_trials is reached. InvalidArgument for a continuous space.
std::unique_ptr<Oracle> make_grid_oracle(SearchSpace space, OracleOptions options);
/// Random search without repeats (Keras Tuner's RandomSearch oracle).
std::unique_ptr<Oracle> make_random_oracle(SearchSpace space, OracleOptions options);
/// Hyperband with Keras Tuner's schedule (hyperband_schedule()).
std::unique_ptr<Oracle> make_hyperband_oracle(SearchSpace space, OracleOptions options);
/// ASHA (Li et al. 2020) with the median stopping rule (Golovin et al. 2017).
std::unique_ptr<Oracle> make_asha_oracle(SearchSpace space, OracleOptions options);
/// Bayesian optimisation with a Gaussian process (src/tune/bayesian_oracle.cpp).
std::unique_ptr<Oracle> make_bayesian_oracle(SearchSpace space, OracleOptions options);
/// NSGA-II as Optuna's NSGAIISampler (src/tune/nsga2_oracle.cpp); needs max_trials.
std::unique_ptr<Oracle> make_nsga2_oracle(SearchSpace space, OracleOptions options);
/// Population-based training as Ray Tune's scheduler (src/tune/pbt_oracle.cpp).
std::unique_ptr<Oracle> make_pbt_oracle(SearchSpace space, OracleOptions options);

/// Throws InvalidArgument "oracle <oracle>: <name> must be in [0, 1], got <p>" unless p is a
/// probability (NaN is not).
void check_probability(double p, const char* oracle, const char* name);

/// OracleOptions as JSON ({"objective": "val_loss:min", "max_trials": ..., ...}) and back;
/// from_json throws InvalidArgument naming a missing or mistyped field.
/// `oracle`: the options of NSGA-II (population_size, ...) are written for "nsga2", those of
/// PBT (population, ...) for "pbt", both for "*" (an oracle's state): a search of another
/// oracle leaves them out of its stored identity, so that searches stored before them resume.
Json options_to_json(const OracleOptions& options, const std::string& oracle);
OracleOptions options_from_json(const Json& json);

/// The generator's full state as text (the standard's operator<<) and back; set_rng_state
/// throws InvalidArgument for text that is not such a state.
std::string rng_state(const std::mt19937_64& rng);
void set_rng_state(std::mt19937_64& rng, const std::string& state);
/// set_rng_state from an oracle state's "rng" field; InvalidArgument if it is missing.
void restore_rng(const Json& oracle_state, std::mt19937_64& rng);

/// The oracles that draw random points (random, hyperband, asha, bayesian): a generator seeded
/// with OracleOptions::seed, kept in the oracle's state beside the oracle's name.
class SeededOracle : public Oracle {
 public:
  /// `name` is the state's "oracle" field ("random", ...).
  SeededOracle(std::string name, SearchSpace space, OracleOptions options);
  /// Oracle's state with "oracle": name and "rng": the generator's state.
  Json get_state() const override;
  /// Oracle's, then the generator (InvalidArgument if "rng" is missing or not a state).
  void set_state(const Json& state) override;

 protected:
  /// When max_trials trials exist: true, with r's reason saying so (r stays kDone).
  bool stop_at_max_trials(TrialRequest& r) const;

  std::mt19937_64 rng_;

 private:
  std::string name_;
};

/// A point's identity for "tried already" checks: its JSON without "tuner/..." keys, dumped
/// (nlohmann objects are sorted by key, so equal points give equal text).
std::string point_key(const Json& hyper_parameters);

/// Draws random points of `space` that are not in `tried` (point_key()s), as Keras Tuner's
/// Oracle._random_values: up to 20 draws (its _max_collisions) before giving up. Unlike Keras
/// Tuner, a finite space of at most 1,000,000 points is then enumerated and one of its untried
/// points drawn uniformly, so that such a space ends exactly when every point was tried.
/// Returns nothing when no untried point was found, with the reason in *reason.
std::optional<Json> random_untried_point(const SearchSpace& space, std::mt19937_64& rng,
                                         const std::set<std::string>& tried, std::string* reason);

}  // namespace tensorhub
