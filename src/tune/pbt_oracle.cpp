// Population-based training (Jaderberg et al. 2017, "Population Based Training of Neural
// Networks", arXiv:1711.09846), run as Ray Tune's PopulationBasedTraining scheduler runs it
// (ray/tune/schedulers/pbt.py: asynchronous, truncation selection by quantile, perturbation by
// x0.8 / x1.2 or resampling), on the trials of a search:
//  - `population` members train side by side; a member's training is cut into segments of
//    perturbation_interval epochs, each segment a trial that resumes the checkpoint of the
//    trial before it ("tuner/trial_id", "tuner/initial_epoch", "tuner/epochs", as Hyperband's
//    promotions: the hub's saved model with its optimizer state), up to max_epochs; of the
//    members ready for a segment the one furthest behind starts first;
//  - when a member's segment completes, the members are ranked by the score of their latest
//    completed segment: a member in the bottom `quantile` (Ray's quantile_fraction) exploits
//    one drawn from the top quantile (of those trained at least as far, and not yet to
//    max_epochs): its next segment
//    resumes that member's latest checkpoint from that checkpoint's epoch
//    with that member's hyperparameters explored: with resample_probability each parameter is
//    drawn anew, else a number is multiplied by 0.8 or 1.2 (clamped to its range and snapped to
//    its step) and a Choice moves to a neighbouring value (Ray's perturbation of a list);
//    Booleans and Fixed values are kept unless resampled. Any other member continues its own
//    checkpoint with its own hyperparameters. Ranking needs at least 2 members with a score;
//  - the lineage is in each trial: "tuner/member", "tuner/segment", and for an exploit
//    "tuner/exploited_member" and "tuner/exploited_trial" (whose checkpoint it took when);
//  - a member whose segment fails or is stopped ends there. The search is done when every
//    member reached max_epochs or ended.
#include <algorithm>
#include <cmath>
#include <map>

#include "oracles.h"
#include "tensorhub/core/error.h"

namespace tensorhub {
namespace {

class PbtOracle : public SeededOracle {
 public:
  PbtOracle(SearchSpace space, OracleOptions options) : SeededOracle("pbt", std::move(space), std::move(options)) {
    const OracleOptions& o = options_;
    if (o.population < 2) throw InvalidArgument("oracle pbt: population must be >= 2, got " + std::to_string(o.population));
    if (o.perturbation_interval < 1)
      throw InvalidArgument("oracle pbt: perturbation_interval must be >= 1 epoch, got " + std::to_string(o.perturbation_interval));
    if (!(o.quantile > 0 && o.quantile <= 0.5))
      throw InvalidArgument("oracle pbt: quantile must be in (0, 0.5], got " + std::to_string(o.quantile));
    check_probability(o.resample_probability, "pbt", "resample_probability");
  }

  TrialRequest create_trial() override {
    TrialRequest r;
    const auto latest = latest_segments();
    if (static_cast<int>(latest.size()) < options_.population) return start_member(static_cast<int>(latest.size()));
    // Of the members ready for their next segment, the one furthest behind goes first, so
    // that members that run one after another (one runner) still advance side by side.
    bool running = false;
    const Trial* ready = nullptr;
    int ready_member = 0;
    for (const auto& [member, t] : latest) {
      if (t->status == TrialStatus::kRunning) {
        running = true;
        continue;
      }
      if (t->status != TrialStatus::kCompleted || epochs_of(*t) >= options_.max_epochs) continue;
      if (!ready || epochs_of(*t) < epochs_of(*ready)) {
        ready = t;
        ready_member = member;
      }
    }
    if (ready) return next_segment(ready_member, *ready, latest);
    r.kind = running ? TrialRequest::Kind::kWait : TrialRequest::Kind::kDone;
    r.reason = running ? "waiting for running segments" : "every member of the population trained " +
                                                              std::to_string(options_.max_epochs) + " epochs or ended";
    return r;
  }

 private:
  static int int_of(const Trial& t, const char* key) { return t.hyper_parameters.value(key, 0); }
  static int epochs_of(const Trial& t) { return int_of(t, "tuner/epochs"); }

  // member -> its latest segment (the one with the highest segment number).
  std::map<int, const Trial*> latest_segments() const {
    std::map<int, const Trial*> latest;
    for (const auto& [id, t] : trials_) {
      const int m = int_of(t, "tuner/member");
      auto& slot = latest[m];
      if (!slot || int_of(t, "tuner/segment") > int_of(*slot, "tuner/segment")) slot = &t;
    }
    return latest;
  }

  TrialRequest run(Json hp) {
    TrialRequest r;
    r.kind = TrialRequest::Kind::kRun;
    r.trial = new_trial(std::move(hp));
    return r;
  }

  // The next segment trains from epoch `from` (its checkpoint's) for perturbation_interval
  // epochs, at most up to max_epochs.
  Json with_schedule(Json hp, int member, int segment, int from) const {
    hp["tuner/member"] = member;
    hp["tuner/segment"] = segment;
    hp["tuner/initial_epoch"] = from;
    hp["tuner/epochs"] = std::min(options_.max_epochs, from + options_.perturbation_interval);
    return hp;
  }

  TrialRequest start_member(int member) { return run(with_schedule(space_.sample(rng_), member, 0, 0)); }

  static Json own_values(const Json& hp) {
    Json out = Json::object();
    for (const auto& [k, v] : hp.items())
      if (k.rfind("tuner/", 0) != 0) out[k] = v;
    return out;
  }

  TrialRequest next_segment(int member, const Trial& last, const std::map<int, const Trial*>& latest) {
    const int segment = int_of(last, "tuner/segment") + 1;
    // Ranked by their latest completed segment's score, best first.
    std::vector<const Trial*> scored;
    for (const auto& [m, t] : latest) {
      const Trial* s = t->status == TrialStatus::kCompleted ? t : latest_completed(m);
      if (s && s->score) scored.push_back(s);
    }
    std::stable_sort(scored.begin(), scored.end(),
                     [&](const Trial* a, const Trial* b) { return options_.objective.better(*a->score, *b->score); });
    const auto cut = static_cast<std::size_t>(std::ceil(options_.quantile * static_cast<double>(scored.size())));
    const auto rank = std::find(scored.begin(), scored.end(), &last) - scored.begin();
    const bool bottom = scored.size() >= 2 && cut > 0 && static_cast<std::size_t>(rank) >= scored.size() - cut;
    // Donors: the top quantile, of those trained at least as far as this member (a member
    // never goes back in epochs, so every member ends); the checkpoint's epoch is where the
    // member goes on from, as Ray's clone carries its training iteration.
    std::vector<const Trial*> donors;
    if (bottom)
      for (std::size_t k = 0; k < cut; ++k)
        if (scored[k] != &last && epochs_of(*scored[k]) >= epochs_of(last) && epochs_of(*scored[k]) < options_.max_epochs)
          donors.push_back(scored[k]);
    if (donors.empty()) {
      Json hp = with_schedule(own_values(last.hyper_parameters), member, segment, epochs_of(last));
      hp["tuner/trial_id"] = last.trial_id;
      return run(std::move(hp));
    }
    std::uniform_int_distribution<std::size_t> pick(0, donors.size() - 1);
    const Trial* donor = donors[pick(rng_)];
    Json hp = with_schedule(explore(own_values(donor->hyper_parameters)), member, segment, epochs_of(*donor));
    hp["tuner/trial_id"] = donor->trial_id;
    hp["tuner/exploited_member"] = int_of(*donor, "tuner/member");
    hp["tuner/exploited_trial"] = donor->trial_id;
    return run(std::move(hp));
  }

  const Trial* latest_completed(int member) const {
    const Trial* best = nullptr;
    for (const auto& [id, t] : trials_)
      if (int_of(t, "tuner/member") == member && t.status == TrialStatus::kCompleted &&
          (!best || int_of(t, "tuner/segment") > int_of(*best, "tuner/segment")))
        best = &t;
    return best;
  }

  // Ray Tune's explore(): resample with resample_probability, else perturb.
  Json explore(Json values) {
    std::uniform_real_distribution<double> u(0.0, 1.0);
    const Json fresh = space_.sample(rng_);
    for (const auto& p : space_.parameters()) {
      if (!values.contains(p->name)) continue;
      const Json entry = p->to_json();
      const std::string type = entry.at("type");
      if (u(rng_) < options_.resample_probability) {
        if (fresh.contains(p->name)) values[p->name] = fresh[p->name];
        continue;
      }
      const bool up = u(rng_) < 0.5;
      if (type == "Choice") {
        const auto& list = entry.at("values");
        const auto at = std::find(list.begin(), list.end(), values[p->name]) - list.begin();
        const auto next = std::clamp<std::ptrdiff_t>(at + (up ? 1 : -1), 0, static_cast<std::ptrdiff_t>(list.size()) - 1);
        values[p->name] = list[static_cast<std::size_t>(next)];
      } else if (type == "Int" || type == "Float") {
        values[p->name] = snapped(values, *p, values[p->name].get<double>() * (up ? 1.2 : 0.8));
      }
    }
    return space_.from_unit(space_.to_unit(values));  // drops what became inactive, fills what became active
  }

  // The point of the parameter's range nearest `target` (clamped, on its step): found by
  // bisection on its unit coordinate, so that every sampling (linear, log, reverse_log) and
  // step is handled by the space's own mapping.
  Json snapped(const Json& values, const Parameter& p, double target) const {
    std::vector<double> unit = space_.to_unit(values);
    const auto& params = space_.parameters();
    const auto i = static_cast<std::size_t>(
        std::find_if(params.begin(), params.end(), [&](const auto& q) { return q->name == p.name; }) - params.begin());
    auto value_at = [&](double x) {
      unit[i] = x;
      return space_.from_unit(unit).at(p.name).get<double>();
    };
    double lo = 0, hi = 1;
    for (int k = 0; k < 60; ++k) {
      const double mid = (lo + hi) / 2;
      (value_at(mid) < target ? lo : hi) = mid;
    }
    const double a = value_at(lo), b = value_at(hi);
    unit[i] = std::abs(a - target) <= std::abs(b - target) ? lo : hi;
    return space_.from_unit(unit).at(p.name);
  }
};

}  // namespace

std::unique_ptr<Oracle> make_pbt_oracle(SearchSpace space, OracleOptions options) {
  return std::make_unique<PbtOracle>(std::move(space), std::move(options));
}

}  // namespace tensorhub
