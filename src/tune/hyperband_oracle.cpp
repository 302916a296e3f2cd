// Hyperband (Li et al. 2018, "Hyperband: A Novel Bandit-Based Approach to Hyperparameter
// Optimization", JMLR 18) with Keras Tuner's schedule (keras_tuner/tuners/hyperband.py,
// HyperbandOracle._get_num_brackets, _get_size, _get_epochs), reproduced in floating point as
// Python computes it (math.log(x, base) is log(x) / log(base)).
//
// As Keras Tuner, a promoted trial is a new trial that resumes its parent's model
// ("tuner/trial_id", "tuner/initial_epoch"), and brackets overlap: when the open brackets have
// nothing to start, the next bracket of the schedule starts. Unlike Keras Tuner (which promotes
// as soon as enough of a round has ended), a round's promotions wait until every trial of the
// round ended, so the promoted trials are the round's best; failed trials are never promoted.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "oracles.h"
#include "tensorhub/core/error.h"

namespace tensorhub {
namespace {

// Oracle::new_trial's ids: "0000", "0001", ...
std::string format_id(std::uint64_t n) {
  char id[32];
  std::snprintf(id, sizeof id, "%04llu", static_cast<unsigned long long>(n));
  return id;
}

// _get_num_brackets: how many times max_epochs can be divided by factor while >= min_epochs (1).
int num_brackets(int max_epochs, int factor) {
  double epochs = max_epochs;
  int brackets = 0;
  while (epochs >= 1) {
    epochs /= factor;
    ++brackets;
  }
  return brackets;
}

// _get_size: ceil(ceil(1 + log_factor(max_epochs)) / (bracket + 1) * factor^(bracket - round)).
int round_size(int max_epochs, int factor, int bracket, int round) {
  const double end_size = std::ceil(1 + std::log(max_epochs) / std::log(factor));
  return static_cast<int>(std::ceil(end_size / (bracket + 1) * std::pow(factor, bracket - round)));
}

// _get_epochs: ceil(max_epochs / factor^(bracket - round)).
int round_epochs(int max_epochs, int factor, int bracket, int round) {
  return static_cast<int>(std::ceil(max_epochs / std::pow(factor, bracket - round)));
}

void check_schedule_args(int max_epochs, int factor) {
  if (max_epochs < 1) throw InvalidArgument("hyperband: max_epochs must be >= 1, got " + std::to_string(max_epochs));
  if (factor < 2) throw InvalidArgument("hyperband: factor must be >= 2, got " + std::to_string(factor));
}

// One bracket in progress: per round, the trial ids in creation order.
struct Bracket {
  int iteration = 0;
  int bracket = 0;
  std::vector<std::vector<std::string>> rounds;
  bool space_used_up = false;  // round 0 closed early: no untried point was left

  Json to_json() const {
    return Json{{"iteration", iteration}, {"bracket", bracket}, {"rounds", rounds}, {"space_used_up", space_used_up}};
  }
  static Bracket from_json(const Json& j) {
    Bracket b;
    try {
      b.iteration = j.at("iteration").get<int>();
      b.bracket = j.at("bracket").get<int>();
      b.rounds = j.at("rounds").get<std::vector<std::vector<std::string>>>();
      b.space_used_up = j.at("space_used_up").get<bool>();
    } catch (const Json::exception& e) {
      throw InvalidArgument(std::string("oracle state: field 'brackets': ") + e.what());
    }
    if (b.bracket < 0 || b.rounds.size() != static_cast<std::size_t>(b.bracket) + 1) {
      throw InvalidArgument("oracle state: field 'brackets': bracket " + std::to_string(b.bracket) + " needs " +
                            std::to_string(b.bracket + 1) + " rounds");
    }
    return b;
  }
};

class HyperbandOracle : public SeededOracle {
 public:
  HyperbandOracle(SearchSpace space, OracleOptions options)
      : SeededOracle("hyperband", std::move(space), std::move(options)) {
    check_schedule_args(options_.max_epochs, options_.factor);
  }

  TrialRequest create_trial() override {
    TrialRequest r;
    if (stop_at_max_trials(r)) return r;
    const int brackets_per_iteration = num_brackets(options_.max_epochs, options_.factor);
    const int scheduled = brackets_per_iteration * options_.hyperband_iterations;
    while (true) {
      for (auto& b : brackets_) {
        if (auto hp = next_in_bracket(b)) return run(std::move(*hp));
      }
      if (started_ >= scheduled) break;
      // Nothing to start in the open brackets: open the next one (most exploratory first).
      Bracket b;
      b.iteration = started_ / brackets_per_iteration;
      b.bracket = brackets_per_iteration - 1 - started_ % brackets_per_iteration;
      b.rounds.resize(static_cast<std::size_t>(b.bracket) + 1);
      brackets_.push_back(std::move(b));
      ++started_;
    }
    const bool running = std::any_of(trials_.begin(), trials_.end(),
                                     [](const auto& kv) { return kv.second.status == TrialStatus::kRunning; });
    if (running) {
      r.kind = TrialRequest::Kind::kWait;
      r.reason = "the next Hyperband round waits for the running trials of this round to end";
    } else {
      r.reason = "Hyperband finished: " + std::to_string(options_.hyperband_iterations) + " iteration(s) of " +
                 std::to_string(brackets_per_iteration) + " brackets";
    }
    return r;
  }

  Json get_state() const override {
    Json state = SeededOracle::get_state();
    state["brackets_started"] = started_;
    Json brackets = Json::array();
    for (const auto& b : brackets_) brackets.push_back(b.to_json());
    state["brackets"] = std::move(brackets);
    return state;
  }

  void set_state(const Json& state) override {
    SeededOracle::set_state(state);
    if (!state.contains("brackets_started") || !state["brackets_started"].is_number_integer()) {
      throw InvalidArgument("oracle state: field 'brackets_started' is missing");
    }
    started_ = state["brackets_started"].get<int>();
    if (!state.contains("brackets") || !state["brackets"].is_array()) throw InvalidArgument("oracle state: field 'brackets' is missing");
    brackets_.clear();
    for (const auto& j : state["brackets"]) brackets_.push_back(Bracket::from_json(j));
    tried_.clear();
    for (const auto& [id, t] : trials_) tried_.insert(point_key(t.hyper_parameters));
  }

 private:
  int size(int bracket, int round) const { return round_size(options_.max_epochs, options_.factor, bracket, round); }
  int epochs(int bracket, int round) const { return round_epochs(options_.max_epochs, options_.factor, bracket, round); }

  TrialRequest run(Json hp) {
    tried_.insert(point_key(hp));
    TrialRequest r;
    r.kind = TrialRequest::Kind::kRun;
    r.trial = new_trial(std::move(hp));
    return r;
  }

  bool all_ended(const std::vector<std::string>& ids) {
    return std::all_of(ids.begin(), ids.end(), [&](const std::string& id) { return trial(id).status != TrialStatus::kRunning; });
  }

  // How many trials round `r` of `b` gets: the schedule's size, fewer when round 0 ran out of
  // points or when fewer trials of the previous round succeeded.
  std::size_t target(const Bracket& b, int r) {
    const auto full = static_cast<std::size_t>(size(b.bracket, r));
    if (r == 0) return b.space_used_up ? b.rounds[0].size() : full;
    return std::min(full, ranked(b.rounds[static_cast<std::size_t>(r) - 1]).size());
  }

  // The round's successful trials, best first (ties: creation order).
  std::vector<std::string> ranked(const std::vector<std::string>& ids) {
    std::vector<std::string> ok;
    for (const auto& id : ids) {
      const Trial& t = trial(id);
      if (t.status != TrialStatus::kFailed && t.status != TrialStatus::kRunning && t.score && std::isfinite(*t.score)) ok.push_back(id);
    }
    std::stable_sort(ok.begin(), ok.end(), [&](const std::string& a, const std::string& c) {
      return options_.objective.better(*trial(a).score, *trial(c).score);
    });
    return ok;
  }

  // The next trial of bracket b, or nothing if it has none to start now.
  std::optional<Json> next_in_bracket(Bracket& b) {
    auto& round0 = b.rounds[0];
    if (!b.space_used_up && round0.size() < static_cast<std::size_t>(size(b.bracket, 0))) {
      std::string reason;
      if (auto point = random_untried_point(space_, rng_, tried_, &reason)) {
        Json hp = std::move(*point);
        hp["tuner/epochs"] = epochs(b.bracket, 0);
        hp["tuner/initial_epoch"] = 0;
        hp["tuner/bracket"] = b.bracket;
        hp["tuner/round"] = 0;
        round0.push_back(format_id(next_id_));  // the id new_trial() will give
        return hp;
      }
      b.space_used_up = true;  // round 0 ends with the trials it has
    }
    for (int r = 1; r <= b.bracket; ++r) {
      const auto& previous = b.rounds[static_cast<std::size_t>(r) - 1];
      auto& current = b.rounds[static_cast<std::size_t>(r)];
      // A round is promoted from only once it is complete and all its trials ended.
      if (previous.size() < target(b, r - 1) || !all_ended(previous)) return std::nullopt;
      if (current.size() >= target(b, r)) continue;
      const std::string parent = ranked(previous)[current.size()];
      Json hp = trial(parent).hyper_parameters;
      hp["tuner/trial_id"] = parent;
      hp["tuner/epochs"] = epochs(b.bracket, r);
      hp["tuner/initial_epoch"] = epochs(b.bracket, r - 1);
      hp["tuner/bracket"] = b.bracket;
      hp["tuner/round"] = r;
      current.push_back(format_id(next_id_));
      return hp;
    }
    return std::nullopt;
  }

  std::set<std::string> tried_;
  std::vector<Bracket> brackets_;  // every bracket started, in order
  int started_ = 0;                // brackets started over all iterations
};

}  // namespace

std::vector<HyperbandRound> hyperband_schedule(int max_epochs, int factor) {
  check_schedule_args(max_epochs, factor);
  std::vector<HyperbandRound> out;
  for (int b = num_brackets(max_epochs, factor) - 1; b >= 0; --b) {
    for (int r = 0; r <= b; ++r) {
      HyperbandRound round;
      round.bracket = b;
      round.round = r;
      round.trials = round_size(max_epochs, factor, b, r);
      round.epochs = round_epochs(max_epochs, factor, b, r);
      round.initial_epoch = r == 0 ? 0 : round_epochs(max_epochs, factor, b, r - 1);
      out.push_back(round);
    }
  }
  return out;
}

std::unique_ptr<Oracle> make_hyperband_oracle(SearchSpace space, OracleOptions options) {
  return std::make_unique<HyperbandOracle>(std::move(space), std::move(options));
}

}  // namespace tensorhub
