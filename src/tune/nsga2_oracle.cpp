// NSGA-II (Deb et al. 2002, "A Fast and Elitist Multiobjective Genetic Algorithm: NSGA-II",
// IEEE Trans. Evol. Comput. 6(2)), run as Optuna 3.1's NSGAIISampler runs it
// (optuna/samplers/nsga2/_sampler.py), on the trials of a search:
//  - every trial belongs to a generation; generation 0 is random points;
//  - the parents of generation g + 1 are the elite of generation g's completed trials together
//    with g's own parents: the first fronts of the non-dominated sort that fit population_size,
//    the last one cut by crowding distance (largest first). A generation counts once
//    population_size of its trials completed; trials keep being created meanwhile (in the
//    generation after the last counted one), so parallel runners never wait;
//  - a child: a parent by binary tournament (of two random parents, one that dominates the
//    other wins, else the first); with crossover_prob, uniform crossover with a second parent
//    so chosen (each parameter from the second with swapping_prob); then each parameter is
//    mutated, drawn anew at random, with mutation_prob (default 1 / number of parameters).
// Points are crossed in the unit cube (SearchSpace::to_unit / from_unit): a Choice keeps a
// parent's value, a log-scaled Float is drawn log-uniformly when mutated, and a conditional
// parameter that the child's parents do not set is drawn anew. Failed and pruned trials never
// enter a population. Needs max_trials (the search's budget), as Optuna's n_trials.
#include <algorithm>
#include <cmath>
#include <map>

#include "oracles.h"
#include "tensorhub/core/error.h"
#include "tensorhub/tune/pareto.h"

namespace tensorhub {
namespace {

class Nsga2Oracle : public SeededOracle {
 public:
  Nsga2Oracle(SearchSpace space, OracleOptions options) : SeededOracle("nsga2", std::move(space), std::move(options)) {
    const OracleOptions& o = options_;
    if (o.max_trials < 1) throw InvalidArgument("oracle nsga2: needs max_trials (--max-trials), its budget of trials");
    if (o.population_size < 2)
      throw InvalidArgument("oracle nsga2: population_size must be >= 2, got " + std::to_string(o.population_size));
    check_probability(o.mutation_prob, "nsga2", "mutation_prob");
    check_probability(o.crossover_prob, "nsga2", "crossover_prob");
    check_probability(o.swapping_prob, "nsga2", "swapping_prob");
  }

  TrialRequest create_trial() override {
    TrialRequest r;
    if (stop_at_max_trials(r)) return r;
    const auto [parent_generation, parents] = parent_population();
    Json point = parents.empty() ? space_.sample(rng_) : child_of(parents);
    r.kind = TrialRequest::Kind::kRun;
    r.trial = new_trial(std::move(point));
    generation_[r.trial.trial_id] = parent_generation + 1;
    return r;
  }

  Json get_state() const override {
    Json state = SeededOracle::get_state();
    state["generations"] = generation_;
    return state;
  }

  void set_state(const Json& state) override {
    SeededOracle::set_state(state);
    elite_cache_.clear();  // its pointers were into the trials just replaced
    if (!state.contains("generations") || !state["generations"].is_object())
      throw InvalidArgument("oracle state: field 'generations' is missing");
    generation_ = state["generations"].get<std::map<std::string, int>>();
  }

 private:
  std::vector<double> values_of(const Trial& t) const { return t.values.empty() ? std::vector<double>{*t.score} : t.values; }

  // Optuna's _collect_parent_population: walks the generations while each has population_size
  // completed trials, each time keeping the elite of its trials and the previous parents.
  std::pair<int, std::vector<const Trial*>> parent_population() const {
    std::map<int, std::vector<const Trial*>> completed;
    for (const auto& [id, t] : trials_) {
      const auto g = generation_.find(id);
      if (g != generation_.end() && t.status == TrialStatus::kCompleted && t.score) completed[g->second].push_back(&t);
    }
    std::vector<const Trial*> parents;
    int parent_generation = -1;
    while (true) {
      const auto it = completed.find(parent_generation + 1);
      if (it == completed.end() || static_cast<int>(it->second.size()) < options_.population_size) break;
      std::vector<const Trial*> pool = it->second;
      pool.insert(pool.end(), parents.begin(), parents.end());
      parents = cached_elite(parent_generation + 1, pool);
      ++parent_generation;
    }
    return {parent_generation, parents};
  }

  // elite(pool), remembered per generation with the pool's trial ids, as Optuna caches it: a
  // generation's elite changes only when a trial of it completes (parallel runners) or its
  // parents changed, so a long search does not sort every generation again for each trial.
  std::vector<const Trial*> cached_elite(int generation, const std::vector<const Trial*>& pool) const {
    std::vector<std::string> ids;
    for (const Trial* t : pool) ids.push_back(t->trial_id);
    auto& [cached_ids, cached] = elite_cache_[generation];
    if (cached_ids != ids) {
      cached = elite(pool);
      cached_ids = std::move(ids);
    }
    return cached;
  }

  // The first fronts that fit population_size; the last cut by crowding distance.
  std::vector<const Trial*> elite(const std::vector<const Trial*>& pool) const {
    std::vector<std::vector<double>> points;
    for (const Trial* t : pool) points.push_back(values_of(*t));
    const auto objectives = options_.all_objectives();
    std::vector<const Trial*> out;
    const auto size = static_cast<std::size_t>(options_.population_size);
    for (const auto& front : non_dominated_fronts(points, objectives)) {
      if (out.size() + front.size() <= size) {
        for (std::size_t i : front) out.push_back(pool[i]);
        continue;
      }
      const auto distance = crowding_distances(points, front, objectives);
      std::vector<std::size_t> order(front.size());
      for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
      std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return distance[a] > distance[b]; });
      for (std::size_t k = 0; out.size() < size; ++k) out.push_back(pool[front[order[k]]]);
      break;
    }
    return out;
  }

  const Trial* tournament(const std::vector<const Trial*>& parents) {
    std::uniform_int_distribution<std::size_t> pick(0, parents.size() - 1);
    const Trial* a = parents[pick(rng_)];
    const Trial* b = parents[pick(rng_)];
    const auto objectives = options_.all_objectives();
    return dominates(values_of(*b), values_of(*a), objectives) ? b : a;
  }

  Json child_of(const std::vector<const Trial*>& parents) {
    std::uniform_real_distribution<double> u(0.0, 1.0);
    const auto& params = space_.parameters();
    const Trial* first = tournament(parents);
    std::vector<double> child = space_.to_unit(first->hyper_parameters);
    std::vector<const Trial*> source(child.size(), first);
    if (u(rng_) < options_.crossover_prob) {
      const Trial* second_parent = tournament(parents);
      const std::vector<double> second = space_.to_unit(second_parent->hyper_parameters);
      for (std::size_t i = 0; i < child.size(); ++i)
        if (u(rng_) < options_.swapping_prob) {
          child[i] = second[i];
          source[i] = second_parent;
        }
    }
    // A parameter its parent did not have (inactive there) has no value to inherit.
    for (std::size_t i = 0; i < child.size(); ++i)
      if (!source[i]->hyper_parameters.contains(params[i]->name)) child[i] = u(rng_);
    const double mutation = options_.mutation_prob > 0 ? options_.mutation_prob
                                                       : 1.0 / std::max<std::size_t>(1, space_.parameters().size());
    for (double& x : child)
      if (u(rng_) < mutation) x = u(rng_);
    return space_.from_unit(child);
  }

  std::map<std::string, int> generation_;  // trial id -> its generation
  // generation -> (the ids of the pool its elite was chosen from, that elite); pointers into
  // trials_, a std::map whose elements stay put. Derived, so not in the state.
  mutable std::map<int, std::pair<std::vector<std::string>, std::vector<const Trial*>>> elite_cache_;
};

}  // namespace

std::unique_ptr<Oracle> make_nsga2_oracle(SearchSpace space, OracleOptions options) {
  return std::make_unique<Nsga2Oracle>(std::move(space), std::move(options));
}

}  // namespace tensorhub
