// Gaussian process regression: Matern 5/2 ARD kernel, Cholesky fit (R&W Algorithm 2.1),
// hyperparameters by maximum marginal likelihood with a small L-BFGS. See gaussian_process.h.
#include "gaussian_process.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <string>

#include "tensorhub/core/error.h"

namespace tensorhub::detail {
namespace {

constexpr double kSqrt5 = 2.23606797749978969640;
constexpr double kLog2Pi = 1.83787706640934548356;

// Bounds of the hyperparameters in log space (see the header): inputs lie in the unit cube,
// so a length scale below 0.01 only fits noise and one above 20 makes a dimension irrelevant;
// targets are standardised, so the signal variance stays near 1.
constexpr double kLogLengthMin = -4.605170185988091;  // log 0.01
constexpr double kLogLengthMax = 2.995732273553991;   // log 20
constexpr double kLogVarMin = -2.995732273553991;     // log 0.05
constexpr double kLogVarMax = 2.995732273553991;      // log 20

double lower_bound(Eigen::Index i, Eigen::Index d) { return i < d ? kLogLengthMin : kLogVarMin; }
double upper_bound(Eigen::Index i, Eigen::Index d) { return i < d ? kLogLengthMax : kLogVarMax; }

double sigmoid(double u) { return 1.0 / (1.0 + std::exp(-u)); }

// theta = lo + (hi - lo) * sigmoid(u): keeps theta inside its bounds for any u.
Eigen::VectorXd theta_of(const Eigen::VectorXd& u, Eigen::Index d) {
  Eigen::VectorXd t(u.size());
  for (Eigen::Index i = 0; i < u.size(); ++i)
    t[i] = lower_bound(i, d) + (upper_bound(i, d) - lower_bound(i, d)) * sigmoid(u[i]);
  return t;
}

Eigen::VectorXd u_of(const Eigen::VectorXd& theta, Eigen::Index d) {
  Eigen::VectorXd u(theta.size());
  for (Eigen::Index i = 0; i < theta.size(); ++i) {
    double p = (theta[i] - lower_bound(i, d)) / (upper_bound(i, d) - lower_bound(i, d));
    p = std::clamp(p, 1e-6, 1 - 1e-6);
    u[i] = std::log(p / (1 - p));
  }
  return u;
}

MaternParams params_of(const Eigen::VectorXd& theta, Eigen::Index d) {
  MaternParams p;
  p.length_scales = theta.head(d).array().exp();
  p.signal_variance = std::exp(theta[d]);
  return p;
}

// The function L-BFGS minimises: minus the log marginal likelihood in the unconstrained
// variable u, with its gradient by the chain rule through theta(u).
struct NegativeLml {
  const Eigen::MatrixXd& x;
  const Eigen::VectorXd& ys;
  double alpha;
  double operator()(const Eigen::VectorXd& u, Eigen::VectorXd& grad) const {
    const Eigen::Index d = x.cols();
    const Eigen::VectorXd theta = theta_of(u, d);
    Eigen::VectorXd g;
    const double lml = GaussianProcess::log_marginal_likelihood(x, ys, alpha, theta, &g);
    grad.resize(u.size());
    if (!std::isfinite(lml)) {
      grad.setZero();
      return std::numeric_limits<double>::infinity();
    }
    for (Eigen::Index i = 0; i < u.size(); ++i) {
      const double s = sigmoid(u[i]);
      grad[i] = -g[i] * (upper_bound(i, d) - lower_bound(i, d)) * s * (1 - s);
    }
    return -lml;
  }
};

// L-BFGS (Nocedal & Wright 2006, Algorithm 7.4 two-loop recursion, Algorithm 7.5 outer loop)
// with a backtracking Armijo line search; pairs with too little curvature are skipped.
// Returns the best point found (minimisation); f_out its value.
Eigen::VectorXd lbfgs_minimize(const NegativeLml& f, Eigen::VectorXd x, double& f_out, int max_iterations = 80) {
  constexpr int kHistory = 8;
  std::deque<Eigen::VectorXd> s_hist, y_hist;
  Eigen::VectorXd g;
  double fx = f(x, g);
  if (!std::isfinite(fx)) {
    f_out = fx;
    return x;
  }
  for (int iter = 0; iter < max_iterations; ++iter) {
    if (g.lpNorm<Eigen::Infinity>() < 1e-6) break;
    // Two-loop recursion: direction = -H g.
    Eigen::VectorXd q = g;
    std::vector<double> a(s_hist.size());
    for (int i = static_cast<int>(s_hist.size()) - 1; i >= 0; --i) {
      a[i] = s_hist[i].dot(q) / y_hist[i].dot(s_hist[i]);
      q -= a[i] * y_hist[i];
    }
    if (!s_hist.empty()) q *= s_hist.back().dot(y_hist.back()) / y_hist.back().squaredNorm();
    for (std::size_t i = 0; i < s_hist.size(); ++i) {
      const double b = y_hist[i].dot(q) / y_hist[i].dot(s_hist[i]);
      q += (a[i] - b) * s_hist[i];
    }
    Eigen::VectorXd dir = -q;
    double slope = g.dot(dir);
    if (slope >= 0) {  // not a descent direction: restart from steepest descent
      s_hist.clear();
      y_hist.clear();
      dir = -g;
      slope = g.dot(dir);
    }
    double step = s_hist.empty() ? std::min(1.0, 1.0 / g.norm()) : 1.0;
    Eigen::VectorXd x_new, g_new;
    double f_new = fx;
    bool moved = false;
    for (int k = 0; k < 30; ++k) {
      x_new = x + step * dir;
      f_new = f(x_new, g_new);
      if (std::isfinite(f_new) && f_new <= fx + 1e-4 * step * slope) {
        moved = true;
        break;
      }
      step *= 0.5;
    }
    if (!moved) break;
    const Eigen::VectorXd s = x_new - x, y = g_new - g;
    if (s.dot(y) > 1e-10 * s.norm() * y.norm()) {
      s_hist.push_back(s);
      y_hist.push_back(y);
      if (static_cast<int>(s_hist.size()) > kHistory) {
        s_hist.pop_front();
        y_hist.pop_front();
      }
    }
    const double change = fx - f_new;
    x = x_new;
    g = g_new;
    fx = f_new;
    if (change < 1e-10 * std::max(1.0, std::abs(fx))) break;
  }
  f_out = fx;
  return x;
}

void check_inputs(const Eigen::MatrixXd& x, const Eigen::VectorXd& y) {
  if (x.rows() < 1) throw InvalidArgument("GaussianProcess::fit: x has no rows; at least one observation is needed");
  if (x.rows() != y.size())
    throw InvalidArgument("GaussianProcess::fit: x has " + std::to_string(x.rows()) + " rows but y has " +
                          std::to_string(y.size()) + " values");
  for (Eigen::Index i = 0; i < x.rows(); ++i) {
    if (!x.row(i).allFinite() || !std::isfinite(y[i]))
      throw InvalidArgument("GaussianProcess::fit: observation " + std::to_string(i) +
                            " is not finite; leave failed or NaN trials out");
  }
}

}  // namespace

double matern52(double r) {
  const double s = kSqrt5 * r;
  return (1.0 + s + s * s / 3.0) * std::exp(-s);
}

Eigen::MatrixXd matern52_kernel(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b, const MaternParams& p) {
  const Eigen::RowVectorXd inv = p.length_scales.cwiseInverse().transpose();
  const Eigen::MatrixXd as = a.array().rowwise() * inv.array();
  const Eigen::MatrixXd bs = b.array().rowwise() * inv.array();
  // Squared distances by |a|^2 + |b|^2 - 2 a.b, clamped at 0 against rounding.
  Eigen::MatrixXd d2 = (-2.0 * as * bs.transpose()).colwise() + as.rowwise().squaredNorm();
  d2.rowwise() += bs.rowwise().squaredNorm().transpose();
  return d2.unaryExpr([&](double v) { return p.signal_variance * matern52(std::sqrt(std::max(v, 0.0))); });
}

GaussianProcess::GaussianProcess(double alpha) : alpha_(alpha) {
  if (!(alpha >= 0) || !std::isfinite(alpha))
    throw InvalidArgument("GaussianProcess: alpha must be a finite number >= 0, got " + std::to_string(alpha));
}

void GaussianProcess::standardize(const Eigen::VectorXd& y) {
  y_mean_ = y.mean();
  const double var = (y.array() - y_mean_).square().mean();  // population std, as numpy's np.std
  y_scale_ = var > 0 ? std::sqrt(var) : 1.0;
  ys_ = (y.array() - y_mean_) / y_scale_;
}

void GaussianProcess::factorize() {
  Eigen::MatrixXd k = matern52_kernel(x_, x_, params_);
  k.diagonal().array() += alpha_;
  llt_.compute(k);
  if (llt_.info() != Eigen::Success)
    throw Internal("GaussianProcess: the kernel matrix is not positive definite; use alpha > 0 or distinct inputs");
  alpha_vec_ = llt_.solve(ys_);
  const Eigen::MatrixXd& l = llt_.matrixLLT();
  lml_ = -0.5 * ys_.dot(alpha_vec_) - l.diagonal().array().log().sum() - 0.5 * ys_.size() * kLog2Pi;
  fitted_ = true;
}

void GaussianProcess::fit(const Eigen::MatrixXd& x, const Eigen::VectorXd& y, const MaternParams& params) {
  check_inputs(x, y);
  if (params.length_scales.size() != x.cols())
    throw InvalidArgument("GaussianProcess::fit: " + std::to_string(params.length_scales.size()) +
                          " length scales for " + std::to_string(x.cols()) + " input dimensions");
  if (!(params.length_scales.array() > 0).all() || !(params.signal_variance > 0))
    throw InvalidArgument("GaussianProcess::fit: length scales and signal variance must be > 0");
  x_ = x;
  standardize(y);
  params_ = params;
  factorize();
}

double GaussianProcess::log_marginal_likelihood(const Eigen::MatrixXd& x, const Eigen::VectorXd& ys, double alpha,
                                                const Eigen::VectorXd& theta, Eigen::VectorXd* gradient) {
  const Eigen::Index n = x.rows(), d = x.cols();
  const MaternParams p = params_of(theta, d);
  const double s2 = p.signal_variance;
  // Correlations and the common factor of the length-scale derivatives per pair:
  // dk/dlog l_j = s2 * 5/3 (1 + sqrt5 r) exp(-sqrt5 r) * (dx_j / l_j)^2.
  Eigen::MatrixXd k(n, n), dfac(n, n);
  for (Eigen::Index i = 0; i < n; ++i) {
    k(i, i) = s2 + alpha;
    dfac(i, i) = 0;
    for (Eigen::Index j = 0; j < i; ++j) {
      const double r = ((x.row(i) - x.row(j)).array() / p.length_scales.transpose().array()).matrix().norm();
      const double e = std::exp(-kSqrt5 * r);
      k(i, j) = k(j, i) = s2 * (1.0 + kSqrt5 * r + 5.0 * r * r / 3.0) * e;
      dfac(i, j) = dfac(j, i) = s2 * 5.0 / 3.0 * (1.0 + kSqrt5 * r) * e;
    }
  }
  Eigen::LLT<Eigen::MatrixXd> llt(k);
  if (llt.info() != Eigen::Success) return -std::numeric_limits<double>::infinity();
  const Eigen::VectorXd a = llt.solve(ys);
  const double lml = -0.5 * ys.dot(a) - Eigen::MatrixXd(llt.matrixLLT()).diagonal().array().log().sum() -
                     0.5 * static_cast<double>(n) * kLog2Pi;
  if (gradient) {
    // R&W eq. 5.9: dL/dtheta = 1/2 tr((a a^T - K^-1) dK/dtheta).
    const Eigen::MatrixXd w = a * a.transpose() - llt.solve(Eigen::MatrixXd::Identity(n, n));
    gradient->setZero(d + 1);
    for (Eigen::Index i = 0; i < n; ++i) {
      for (Eigen::Index j = 0; j < i; ++j) {
        const double c = w(i, j) * dfac(i, j);  // off-diagonal pairs count twice, times 1/2
        for (Eigen::Index m = 0; m < d; ++m) {
          const double z = (x(i, m) - x(j, m)) / p.length_scales[m];
          (*gradient)[m] += c * z * z;
        }
        (*gradient)[d] += w(i, j) * k(i, j);
      }
      (*gradient)[d] += 0.5 * w(i, i) * s2;  // dK_ii/dlog s2 = s2 (alpha is fixed)
    }
  }
  return lml;
}

void GaussianProcess::fit_optimized(const Eigen::MatrixXd& x, const Eigen::VectorXd& y, std::mt19937_64& rng,
                                    int restarts) {
  check_inputs(x, y);
  x_ = x;
  standardize(y);
  const Eigen::Index d = x.cols();
  const NegativeLml f{x_, ys_, alpha_};
  // Start 0: length scales 0.5 (half the unit cube), signal variance 1 (standardised targets).
  Eigen::VectorXd start(d + 1);
  start.head(d).setConstant(std::log(0.5));
  start[d] = 0;
  std::uniform_real_distribution<double> log_length(std::log(0.05), std::log(2.0)), log_var(std::log(0.3), std::log(3.0));
  double best_f = std::numeric_limits<double>::infinity();
  Eigen::VectorXd best_theta = start;
  for (int attempt = 0; attempt <= restarts; ++attempt) {
    if (attempt > 0) {
      for (Eigen::Index i = 0; i < d; ++i) start[i] = log_length(rng);
      start[d] = log_var(rng);
    }
    double fu = 0;
    const Eigen::VectorXd u = lbfgs_minimize(f, u_of(start, d), fu);
    if (fu < best_f) {
      best_f = fu;
      best_theta = theta_of(u, d);
    }
  }
  params_ = params_of(best_theta, d);
  factorize();
}

void GaussianProcess::predict(const Eigen::MatrixXd& x, Eigen::VectorXd& mean, Eigen::VectorXd& std) const {
  if (!fitted_) throw FailedPrecondition("GaussianProcess::predict: call fit() first");
  if (x.cols() != x_.cols())
    throw InvalidArgument("GaussianProcess::predict: x has " + std::to_string(x.cols()) + " columns, the fit had " +
                          std::to_string(x_.cols()));
  const Eigen::MatrixXd ks = matern52_kernel(x, x_, params_);  // (m, n)
  mean = (ks * alpha_vec_).array() * y_scale_ + y_mean_;
  const Eigen::MatrixXd v = llt_.matrixL().solve(ks.transpose());  // (n, m)
  const Eigen::ArrayXd var = (params_.signal_variance - v.colwise().squaredNorm().array()).max(0.0);
  std = var.sqrt() * y_scale_;
}

double expected_improvement(double mean, double std, double best) {
  const double diff = mean - best;
  if (!(std > 0)) return std::max(diff, 0.0);
  const double z = diff / std;
  const double pdf = std::exp(-0.5 * z * z) / std::sqrt(2.0 * M_PI);
  const double cdf = 0.5 * std::erfc(-z / std::sqrt(2.0));
  return diff * cdf + std * pdf;
}

}  // namespace tensorhub::detail
