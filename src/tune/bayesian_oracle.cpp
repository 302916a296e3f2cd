// Bayesian optimisation with a Gaussian process, following Keras Tuner's
// BayesianOptimizationOracle (keras_tuner/src/tuners/bayesian.py, v1.4):
//  - the first num_initial_points trials are random; by default max(3 x number of
//    parameters, 3), as Keras Tuner's `self.num_initial_points or max(3 * dimensions, 3)`
//    (dimensions = len(hyperparameters.space), Fixed parameters included);
//  - then a GP (gaussian_process.h: Matern 5/2, here with ARD length scales fitted by maximum
//    marginal likelihood, as scikit-learn's GaussianProcessRegressor does for Keras Tuner)
//    models the objective over the unit cube (SearchSpace::to_unit), and the next point
//    maximises the acquisition: expected improvement (Jones et al. 1998, our default) or
//    Keras Tuner's upper confidence bound mean + beta * std (beta 2.6);
//  - running trials are "hallucinated" as Keras Tuner does, with a pessimistic value
//    (GP mean minus one std, in the direction of improvement), so parallel runners asking in
//    turn do not all get the same point;
//  - failed trials and NaN scores are left out of the GP; points already tried (running or
//    ended) are never proposed again;
//  - a trial pruned by the tuner (pruner.h) enters the GP with its last reported value, but
//    never better than the worst finished trial: Optuna's TPE likewise learns from a pruned
//    trial's last intermediate value and ranks every pruned trial below every complete one
//    (optuna/samplers/_tpe/sampler.py, _get_observation_pairs). An unfinished curve's value
//    flatters its point (more epochs would have improved it) when compared with another
//    unfinished one, but taken as a final score it would make a pruned point look better
//    than a finished one it lost to at the same epoch; the cap keeps the GP's incumbent
//    among the finished trials.
// The acquisition is maximised over [0, 1]^d by scoring many random points (uniform, and
// Gaussian perturbations of the best observed points), then refining the best few by a
// shrinking-radius random local search (Keras Tuner uses 50 L-BFGS-B restarts; a derivative-
// free search handles the rounding of discrete parameters the same way as continuous ones).
// Discrete and conditional parameters: candidates are mapped to a point and back
// (from_unit, to_unit) before the final ranking, so the acquisition is judged where the trial
// will really be run.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>

#include "gaussian_process.h"
#include "oracles.h"
#include "tensorhub/core/error.h"

namespace tensorhub {
namespace {

using detail::GaussianProcess;

constexpr int kRandomCandidates = 2000;  // uniform draws scored per trial
constexpr int kPerturbationsPerPoint = 40;  // around each of the best observed points
constexpr int kBestObserved = 5;
constexpr int kLocalStarts = 5;          // best candidates refined by local search
constexpr int kLocalSteps = 30;
constexpr int kLocalBatch = 12;
constexpr int kFinalCandidates = 64;     // snapped and ranked at the end
constexpr int kLikelihoodRestarts = 4;   // random starts of the hyperparameter fit

bool finite_score(const Trial& t) {
  return (t.status == TrialStatus::kCompleted || t.status == TrialStatus::kStopped) && t.score &&
         std::isfinite(*t.score);
}

bool pruned_with_value(const Trial& t) {
  return t.status == TrialStatus::kPruned && t.score && std::isfinite(*t.score);
}

class BayesianOracle : public SeededOracle {
 public:
  BayesianOracle(SearchSpace space, OracleOptions options)
      : SeededOracle("bayesian", std::move(space), std::move(options)) {
    snap_ = needs_snapping(space_);
  }

  TrialRequest create_trial() override {
    TrialRequest r;
    if (stop_at_max_trials(r)) return r;
    std::set<std::string> tried;
    for (const auto& [id, t] : trials_) tried.insert(point_key(t.hyper_parameters));
    const auto size = space_.size();
    if (size && tried.size() >= *size) {
      r.reason = "all " + std::to_string(*size) + " points of the search space have been tried";
      return r;
    }
    std::optional<Json> point;
    if (completed_count() >= num_initial_points()) point = gp_point(tried);
    if (!point) point = random_untried_point(space_, rng_, tried, &r.reason);
    if (!point) return r;  // kDone with the reason
    r.kind = TrialRequest::Kind::kRun;
    r.trial = new_trial(std::move(*point));
    return r;
  }

  void set_state(const Json& state) override {
    if (state.is_object() && state.contains("oracle") && state["oracle"] != "bayesian")
      throw InvalidArgument("oracle state: field 'oracle' is " + state["oracle"].dump() + ", expected \"bayesian\"");
    SeededOracle::set_state(state);
    snap_ = needs_snapping(space_);
  }

 private:
  // Spaces whose unit cube maps 1:1 onto points (continuous Floats, unconditional) need no
  // round trip through from_unit / to_unit; all others do.
  static bool needs_snapping(const SearchSpace& space) {
    for (const auto& p : space.parameters()) {
      if (!p->parent_name.empty()) return true;
      if (p->type_name() == "Fixed") continue;
      if (p->count()) return true;
    }
    return false;
  }

  std::size_t num_initial_points() const {
    if (options_.num_initial_points > 0) return static_cast<std::size_t>(options_.num_initial_points);
    return std::max<std::size_t>(3 * space_.parameters().size(), 3);
  }

  std::size_t completed_count() const {
    return static_cast<std::size_t>(
        std::count_if(trials_.begin(), trials_.end(),
                      [](const auto& kv) { return finite_score(kv.second) || pruned_with_value(kv.second); }));
  }

  Eigen::VectorXd unit_of(const Json& hyper_parameters) const {
    const auto u = space_.to_unit(hyper_parameters);
    return Eigen::Map<const Eigen::VectorXd>(u.data(), static_cast<Eigen::Index>(u.size()));
  }

  // The acquisition at each row of x (higher is better).
  Eigen::VectorXd acquisition(const GaussianProcess& gp, const Eigen::MatrixXd& x, double best) const {
    Eigen::VectorXd mean, sd, a(x.rows());
    gp.predict(x, mean, sd);
    for (Eigen::Index i = 0; i < x.rows(); ++i) {
      a[i] = options_.acquisition == "ucb" ? detail::upper_confidence_bound(mean[i], sd[i], options_.beta)
                                           : detail::expected_improvement(mean[i], sd[i], best);
    }
    return a;
  }

  // Fits the GP to the ended trials (plus hallucinated running ones) and returns the untried
  // point of highest acquisition, or nothing (then a random point is drawn).
  std::optional<Json> gp_point(const std::set<std::string>& tried) {
    const Eigen::Index d = static_cast<Eigen::Index>(space_.parameters().size());
    std::vector<Eigen::VectorXd> xs, running;
    std::vector<double> ys;
    // The GP always maximises: a minimised objective is negated.
    const auto gp_value = [&](double score) { return options_.objective.maximize ? score : -score; };
    std::optional<double> worst_finished;
    for (const auto& [id, t] : trials_) {
      if (finite_score(t)) {
        xs.push_back(unit_of(t.hyper_parameters));
        ys.push_back(gp_value(*t.score));
        worst_finished = std::min(worst_finished.value_or(ys.back()), ys.back());
      } else if (t.status == TrialStatus::kRunning) {
        running.push_back(unit_of(t.hyper_parameters));
      }
    }
    for (const auto& [id, t] : trials_) {  // pruned trials: see the header comment
      if (!pruned_with_value(t)) continue;
      xs.push_back(unit_of(t.hyper_parameters));
      ys.push_back(worst_finished ? std::min(gp_value(*t.score), *worst_finished) : gp_value(*t.score));
    }
    if (xs.empty()) return std::nullopt;
    Eigen::MatrixXd x(static_cast<Eigen::Index>(xs.size()), d);
    for (std::size_t i = 0; i < xs.size(); ++i) x.row(static_cast<Eigen::Index>(i)) = xs[i];
    Eigen::VectorXd y = Eigen::Map<Eigen::VectorXd>(ys.data(), static_cast<Eigen::Index>(ys.size()));
    const double best = y.maxCoeff();

    GaussianProcess gp(options_.alpha);
    try {
      gp.fit_optimized(x, y, rng_, kLikelihoodRestarts);
      if (!running.empty()) hallucinate(gp, x, y, running);
    } catch (const Error&) {
      return std::nullopt;  // a numerically singular fit (alpha ~ 0): fall back to a random point
    }
    return maximize_acquisition(gp, x, y, best, tried);
  }

  // Keras Tuner's _vectorize_trials: running trials enter the GP with a pessimistic value
  // (mean - std here, as we maximise), and the GP is refitted with the same kernel.
  static void hallucinate(GaussianProcess& gp, Eigen::MatrixXd& x, Eigen::VectorXd& y,
                          const std::vector<Eigen::VectorXd>& running) {
    Eigen::MatrixXd xr(static_cast<Eigen::Index>(running.size()), x.cols());
    for (std::size_t i = 0; i < running.size(); ++i) xr.row(static_cast<Eigen::Index>(i)) = running[i];
    Eigen::VectorXd mean, sd;
    gp.predict(xr, mean, sd);
    Eigen::MatrixXd xa(x.rows() + xr.rows(), x.cols());
    xa << x, xr;
    Eigen::VectorXd ya(y.size() + mean.size());
    ya << y, mean - sd;
    x = std::move(xa);
    y = std::move(ya);
    gp.fit(x, y, gp.params());
  }

  Eigen::VectorXd snapped(const Eigen::VectorXd& u) const {
    if (!snap_) return u;
    const std::vector<double> v(u.data(), u.data() + u.size());
    return unit_of(space_.from_unit(v));
  }

  std::optional<Json> maximize_acquisition(const GaussianProcess& gp, const Eigen::MatrixXd& x, const Eigen::VectorXd& y,
                                           double best, const std::set<std::string>& tried) {
    const Eigen::Index d = x.cols();
    std::uniform_real_distribution<double> uniform(0, 1);
    std::normal_distribution<double> normal(0, 1);
    // 1. Uniform candidates and perturbations of the best observed points.
    const int n_best = std::min<int>(kBestObserved, static_cast<int>(y.size()));
    std::vector<Eigen::Index> order(static_cast<std::size_t>(y.size()));
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + n_best, order.end(), [&](auto a, auto b) { return y[a] > y[b]; });
    Eigen::MatrixXd cand(kRandomCandidates + n_best * kPerturbationsPerPoint, d);
    for (Eigen::Index i = 0; i < kRandomCandidates; ++i)
      for (Eigen::Index j = 0; j < d; ++j) cand(i, j) = uniform(rng_);
    for (int b = 0; b < n_best; ++b) {
      for (int k = 0; k < kPerturbationsPerPoint; ++k) {
        const double radius = k % 2 ? 0.02 : 0.1;
        const Eigen::Index row = kRandomCandidates + b * kPerturbationsPerPoint + k;
        for (Eigen::Index j = 0; j < d; ++j) cand(row, j) = std::clamp(x(order[b], j) + radius * normal(rng_), 0.0, 1.0);
      }
    }
    Eigen::VectorXd score = acquisition(gp, cand, best);
    std::vector<Eigen::Index> rank(static_cast<std::size_t>(cand.rows()));
    std::iota(rank.begin(), rank.end(), 0);
    const int keep = std::min<int>(kFinalCandidates, static_cast<int>(rank.size()));
    std::partial_sort(rank.begin(), rank.begin() + keep, rank.end(), [&](auto a, auto b) { return score[a] > score[b]; });

    // 2. Local refinement of the best few.
    std::vector<Eigen::VectorXd> finalists;
    for (int s = 0; s < keep; ++s) finalists.push_back(cand.row(rank[static_cast<std::size_t>(s)]).transpose());
    for (int s = 0; s < std::min(kLocalStarts, keep); ++s) finalists.push_back(local_search(gp, finalists[s], score[rank[s]], best));

    // 3. Snap to real points, rank by their acquisition, take the best untried one.
    Eigen::MatrixXd fx(static_cast<Eigen::Index>(finalists.size()), d);
    for (std::size_t i = 0; i < finalists.size(); ++i) fx.row(static_cast<Eigen::Index>(i)) = snapped(finalists[i]);
    const Eigen::VectorXd fscore = acquisition(gp, fx, best);
    std::vector<Eigen::Index> frank(static_cast<std::size_t>(fx.rows()));
    std::iota(frank.begin(), frank.end(), 0);
    std::stable_sort(frank.begin(), frank.end(), [&](auto a, auto b) { return fscore[a] > fscore[b]; });
    for (const auto i : frank) {
      const Eigen::VectorXd u = fx.row(i).transpose();
      Json point = space_.from_unit(std::vector<double>(u.data(), u.data() + u.size()));
      if (!tried.count(point_key(point))) return point;
    }
    return std::nullopt;
  }

  // Random local search with a shrinking radius: batches of Gaussian steps around the
  // incumbent; the radius halves after a batch without improvement.
  Eigen::VectorXd local_search(const GaussianProcess& gp, Eigen::VectorXd at, double value, double best) {
    std::normal_distribution<double> normal(0, 1);
    double radius = 0.05;
    Eigen::MatrixXd batch(kLocalBatch, at.size());
    for (int step = 0; step < kLocalSteps && radius > 1e-4; ++step) {
      for (int k = 0; k < kLocalBatch; ++k)
        for (Eigen::Index j = 0; j < at.size(); ++j) batch(k, j) = std::clamp(at[j] + radius * normal(rng_), 0.0, 1.0);
      const Eigen::VectorXd s = acquisition(gp, batch, best);
      Eigen::Index arg = 0;
      if (s.maxCoeff(&arg) > value) {
        value = s[arg];
        at = batch.row(arg).transpose();
      } else {
        radius *= 0.5;
      }
    }
    return at;
  }

  bool snap_ = false;
};

}  // namespace

std::unique_ptr<Oracle> make_bayesian_oracle(SearchSpace space, OracleOptions options) {
  if (options.acquisition != "ei" && options.acquisition != "ucb")
    throw InvalidArgument("oracle 'bayesian': acquisition must be one of ei, ucb, not '" + options.acquisition + "'");
  if (!(options.alpha > 0) || !std::isfinite(options.alpha))
    throw InvalidArgument("oracle 'bayesian': alpha must be a finite number > 0 (default 1e-4), got " +
                          std::to_string(options.alpha));
  if (!(options.beta >= 0) || !std::isfinite(options.beta))
    throw InvalidArgument("oracle 'bayesian': beta must be a finite number >= 0 (default 2.6), got " +
                          std::to_string(options.beta));
  if (options.num_initial_points < 0)
    throw InvalidArgument("oracle 'bayesian': num_initial_points must be >= 0 (0 = max(3 x parameters, 3)), got " +
                          std::to_string(options.num_initial_points));
  return std::make_unique<BayesianOracle>(std::move(space), std::move(options));
}

}  // namespace tensorhub
