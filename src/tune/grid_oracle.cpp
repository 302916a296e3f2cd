// Grid search (Keras Tuner's GridSearch, keras_tuner/tuners/gridsearch.py): every point of a
// finite space once, in SearchSpace::grid() order (the last parameter varies fastest). The
// grid is walked with a cursor, so a large space is never listed whole.
#include "oracles.h"
#include "tensorhub/core/error.h"

namespace tensorhub {
namespace {

class GridOracle : public Oracle {
 public:
  GridOracle(SearchSpace space, OracleOptions options) : Oracle(std::move(space), std::move(options)) {
    auto first = space_.first_grid_cursor();
    if (!first) {
      std::string continuous;
      for (const auto& p : space_.parameters()) {
        if (!p->count()) continuous += (continuous.empty() ? "" : ", ") + p->name;
      }
      throw InvalidArgument("oracle 'grid': the search space is continuous in " + continuous +
                            "; give each Float a step, or use random, hyperband, bayesian or asha");
    }
    cursor_ = std::move(*first);
  }

  TrialRequest create_trial() override {
    TrialRequest r;
    if (max_trials_reached()) {
      r.reason = "max_trials (" + std::to_string(options_.max_trials) + ") reached";
      return r;
    }
    if (used_up_) {
      r.reason = "the grid of " + std::to_string(next_id_) + " points is used up";
      return r;
    }
    Json point = space_.grid_point(cursor_);
    used_up_ = !space_.next_grid_cursor(cursor_);
    r.kind = TrialRequest::Kind::kRun;
    r.trial = new_trial(std::move(point));
    return r;
  }

  Json get_state() const override {
    Json state = Oracle::get_state();
    state["oracle"] = "grid";
    state["cursor"] = cursor_;
    state["used_up"] = used_up_;
    return state;
  }

  void set_state(const Json& state) override {
    Oracle::set_state(state);
    try {
      cursor_ = state.at("cursor").get<std::vector<std::uint64_t>>();
      used_up_ = state.at("used_up").get<bool>();
    } catch (const Json::exception&) {
      throw InvalidArgument("oracle state: fields 'cursor' (list of indices) and 'used_up' (boolean) are needed for grid");
    }
    if (cursor_.size() != space_.parameters().size()) {
      throw InvalidArgument("oracle state: field 'cursor' has " + std::to_string(cursor_.size()) + " entries, the space " +
                            std::to_string(space_.parameters().size()) + " parameters");
    }
  }

 private:
  std::vector<std::uint64_t> cursor_;  // the next point to give
  bool used_up_ = false;
};

}  // namespace

std::unique_ptr<Oracle> make_grid_oracle(SearchSpace space, OracleOptions options) {
  return std::make_unique<GridOracle>(std::move(space), std::move(options));
}

}  // namespace tensorhub
