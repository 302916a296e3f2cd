// Random search (Keras Tuner's RandomSearch oracle, keras_tuner/tuners/randomsearch.py):
// independent draws from the search space, never the same point twice.
#include "oracles.h"
#include "tensorhub/core/error.h"

namespace tensorhub {
namespace {

class RandomOracle : public Oracle {
 public:
  RandomOracle(SearchSpace space, OracleOptions options) : Oracle(std::move(space), std::move(options)) {
    rng_.seed(options_.seed);
  }

  TrialRequest create_trial() override {
    TrialRequest r;
    if (max_trials_reached()) {
      r.reason = "max_trials (" + std::to_string(options_.max_trials) + ") reached";
      return r;
    }
    auto point = random_untried_point(space_, rng_, tried_, &r.reason);
    if (!point) return r;  // kDone with the reason
    tried_.insert(point->dump());
    r.kind = TrialRequest::Kind::kRun;
    r.trial = new_trial(std::move(*point));
    return r;
  }

  Json get_state() const override {
    Json state = Oracle::get_state();
    state["oracle"] = "random";
    state["rng"] = rng_state(rng_);
    return state;
  }

  void set_state(const Json& state) override {
    Oracle::set_state(state);
    restore_rng(state, rng_);
    tried_.clear();
    for (const auto& [id, t] : trials_) tried_.insert(point_key(t.hyper_parameters));
  }

 private:
  std::mt19937_64 rng_;
  std::set<std::string> tried_;  // point_key() of every trial's point
};

}  // namespace

std::unique_ptr<Oracle> make_random_oracle(SearchSpace space, OracleOptions options) {
  return std::make_unique<RandomOracle>(std::move(space), std::move(options));
}

}  // namespace tensorhub
