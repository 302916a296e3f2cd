// Random search (Keras Tuner's RandomSearch oracle, keras_tuner/tuners/randomsearch.py):
// independent draws from the search space, never the same point twice.
#include "oracles.h"
#include "tensorhub/core/error.h"

namespace tensorhub {
namespace {

class RandomOracle : public SeededOracle {
 public:
  RandomOracle(SearchSpace space, OracleOptions options)
      : SeededOracle("random", std::move(space), std::move(options)) {}

  TrialRequest create_trial() override {
    TrialRequest r;
    if (stop_at_max_trials(r)) return r;
    auto point = random_untried_point(space_, rng_, tried_, &r.reason);
    if (!point) return r;  // kDone with the reason
    tried_.insert(point->dump());
    r.kind = TrialRequest::Kind::kRun;
    r.trial = new_trial(std::move(*point));
    return r;
  }

  void set_state(const Json& state) override {
    SeededOracle::set_state(state);
    tried_.clear();
    for (const auto& [id, t] : trials_) tried_.insert(point_key(t.hyper_parameters));
  }

 private:
  std::set<std::string> tried_;  // point_key() of every trial's point
};

}  // namespace

std::unique_ptr<Oracle> make_random_oracle(SearchSpace space, OracleOptions options) {
  return std::make_unique<RandomOracle>(std::move(space), std::move(options));
}

}  // namespace tensorhub
