// Gaussian process regression for the Bayesian optimisation oracle (internal to tune/).
//
// Model: Rasmussen & Williams, "Gaussian Processes for Machine Learning" (2006), with
//  - a Matern 5/2 kernel with one length scale per input dimension (ARD) and a signal variance:
//      k(x, x') = s2 * (1 + sqrt(5) r + 5 r^2 / 3) * exp(-sqrt(5) r),
//      r = sqrt(sum_i (x_i - x'_i)^2 / l_i^2)                               (R&W eq. 4.17)
//  - targets standardised to mean 0, standard deviation 1 before fitting (as scikit-learn's
//    normalize_y=True, which Keras Tuner uses), predictions mapped back;
//  - `alpha` added to the kernel matrix's diagonal (observation noise / jitter, Keras Tuner's
//    `alpha`, default 1e-4);
//  - fitting and prediction by R&W Algorithm 2.1 (Cholesky factor L of K + alpha I,
//    alpha_vec = L^T \ (L \ y), mean = k*^T alpha_vec, var = k(x*, x*) - |L \ k*|^2).
// Kernel hyperparameters are chosen by maximising the log marginal likelihood (R&W eq. 5.8)
// with its analytic gradient (eq. 5.9), by L-BFGS (Nocedal & Wright 2006, Algorithm 7.4/7.5)
// from several starts (the defaults first, then random ones), on log length scales in
// [log 0.01, log 20] and log signal variance in [log 0.05, log 20] (inputs live in the unit
// cube, targets are standardised). The bounds are enforced by a smooth map from an
// unconstrained variable (a logistic squashing), so the optimiser itself is unconstrained.
#pragma once

#include <Eigen/Dense>
#include <cstdint>
#include <random>

namespace tensorhub::detail {

/// Kernel hyperparameters of the Matern 5/2 ARD kernel.
struct MaternParams {
  Eigen::VectorXd length_scales;  ///< one per input dimension, > 0 (input units)
  double signal_variance = 1.0;   ///< s2 > 0 (in standardised target units)
};

/// The Matern 5/2 correlation of a scaled distance r >= 0: (1 + sqrt5 r + 5r^2/3) exp(-sqrt5 r).
double matern52(double r);

/// k(a, b) for every row pair: a is (n, d), b is (m, d); returns (n, m). No noise term.
Eigen::MatrixXd matern52_kernel(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b, const MaternParams& p);

/// A Gaussian process regressor (see the file comment). Not thread-safe; copyable.
class GaussianProcess {
 public:
  /// alpha: the value added to the kernel matrix's diagonal, >= 0 (InvalidArgument otherwise).
  explicit GaussianProcess(double alpha = 1e-4);

  /// Fits with fixed kernel hyperparameters. x: (n, d) inputs, y: (n) targets, n >= 1, all
  /// finite (InvalidArgument naming the first bad row otherwise). When every y is equal the
  /// standardisation uses a scale of 1. Throws Internal when K + alpha I is not positive
  /// definite (alpha = 0 with repeated inputs).
  void fit(const Eigen::MatrixXd& x, const Eigen::VectorXd& y, const MaternParams& params);

  /// Fits and chooses the kernel hyperparameters by maximising the log marginal likelihood:
  /// L-BFGS from the defaults (length scales 0.5, signal variance 1) and `restarts`
  /// random starts drawn from `rng`. Same input rules as fit().
  void fit_optimized(const Eigen::MatrixXd& x, const Eigen::VectorXd& y, std::mt19937_64& rng, int restarts = 4);

  /// Posterior mean and standard deviation (target units) at each row of x (m, d).
  /// Requires a fit; throws FailedPrecondition otherwise.
  void predict(const Eigen::MatrixXd& x, Eigen::VectorXd& mean, Eigen::VectorXd& std) const;

  /// The log marginal likelihood of the standardised targets under the fitted hyperparameters
  /// (R&W eq. 2.30): -y^T alpha_vec / 2 - sum log L_ii - n/2 log(2 pi).
  double log_marginal_likelihood() const { return lml_; }
  const MaternParams& params() const { return params_; }
  bool fitted() const { return fitted_; }
  double alpha() const { return alpha_; }

  /// The log marginal likelihood of standardised targets ys at inputs x for hyperparameters
  /// theta = (log l_1..log l_d, log s2), and its gradient with respect to theta (R&W eq. 5.9).
  /// Returns -inf when the kernel matrix is not positive definite.
  static double log_marginal_likelihood(const Eigen::MatrixXd& x, const Eigen::VectorXd& ys, double alpha,
                                        const Eigen::VectorXd& theta, Eigen::VectorXd* gradient);

 private:
  void standardize(const Eigen::VectorXd& y);
  void factorize();

  double alpha_;
  bool fitted_ = false;
  MaternParams params_;
  Eigen::MatrixXd x_;
  Eigen::VectorXd ys_;  // standardised targets
  double y_mean_ = 0, y_scale_ = 1;
  Eigen::LLT<Eigen::MatrixXd> llt_;
  Eigen::VectorXd alpha_vec_;
  double lml_ = 0;
};

/// Expected improvement over `best` for maximisation (Jones, Schonlau & Welch 1998, eq. 15):
/// (mean - best) Phi(z) + std phi(z), z = (mean - best) / std; max(mean - best, 0) when std = 0.
double expected_improvement(double mean, double std, double best);

/// Upper confidence bound for maximisation: mean + beta * std (Srinivas et al. 2010; Keras
/// Tuner's BayesianOptimizationOracle uses beta = 2.6).
inline double upper_confidence_bound(double mean, double std, double beta) { return mean + beta * std; }

}  // namespace tensorhub::detail
