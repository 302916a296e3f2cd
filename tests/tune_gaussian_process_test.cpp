// The Bayesian oracle's Gaussian process: Matern 5/2 values, Cholesky predictions and the log
// marginal likelihood against numpy (Debian's python3-numpy, R&W Algorithm 2.1 written out
// independently in the test), the analytic gradient against finite differences, the fitted
// hyperparameters, and expected improvement against its closed form.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "../src/tune/gaussian_process.h"
#include "test_util.h"

namespace tensorhub::detail {
namespace {

Eigen::MatrixXd random_matrix(Eigen::Index rows, Eigen::Index cols, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0, 1);
  Eigen::MatrixXd m(rows, cols);
  for (Eigen::Index i = 0; i < rows; ++i)
    for (Eigen::Index j = 0; j < cols; ++j) m(i, j) = u(rng);
  return m;
}

nlohmann::json to_json(const Eigen::MatrixXd& m) {
  nlohmann::json j = nlohmann::json::array();
  for (Eigen::Index i = 0; i < m.rows(); ++i) {
    nlohmann::json row = nlohmann::json::array();
    for (Eigen::Index k = 0; k < m.cols(); ++k) row.push_back(m(i, k));
    j.push_back(row);
  }
  return j;
}

TEST(Matern52, ValuesByHand) {
  // (1 + sqrt5 r + 5 r^2 / 3) exp(-sqrt5 r): r = 0 -> 1; r = 1 -> (1 + 2.2360680 + 1.6666667)
  // x exp(-2.2360680) = 4.9027346 x 0.10688150 = 0.52399... (python3: math.exp etc.)
  EXPECT_DOUBLE_EQ(matern52(0), 1.0);
  EXPECT_NEAR(matern52(1), 0.5239941088318203, 1e-14);
  EXPECT_NEAR(matern52(0.5), 0.8286491424181253, 1e-14);
  // The kernel matrix scales distances per dimension and multiplies by the signal variance.
  MaternParams p{Eigen::Vector2d(0.5, 2.0), 3.0};
  Eigen::MatrixXd a(1, 2), b(1, 2);
  a << 0.0, 0.0;
  b << 0.25, 1.0;  // scaled: (0.5, 0.5), r = sqrt(0.5)
  EXPECT_NEAR(matern52_kernel(a, b, p)(0, 0), 3.0 * matern52(std::sqrt(0.5)), 1e-14);
}

TEST(GaussianProcess, InterpolatesNoiseFreeData) {
  std::mt19937_64 rng(7);
  const Eigen::MatrixXd x = random_matrix(12, 2, rng);
  Eigen::VectorXd y(12);
  for (int i = 0; i < 12; ++i) y[i] = std::sin(6 * x(i, 0)) + x(i, 1) * x(i, 1);
  GaussianProcess gp(1e-10);
  gp.fit(x, y, MaternParams{Eigen::Vector2d(0.4, 0.6), 1.0});
  Eigen::VectorXd mean, sd;
  gp.predict(x, mean, sd);
  for (int i = 0; i < 12; ++i) {
    EXPECT_NEAR(mean[i], y[i], 1e-6) << i;
    EXPECT_LT(sd[i], 1e-3) << i;
  }
  // Away from the data the uncertainty grows.
  Eigen::MatrixXd far(1, 2);
  far << 30.0, 30.0;
  gp.predict(far, mean, sd);
  EXPECT_NEAR(mean[0], y.mean(), 1e-6);  // reverts to the prior mean (the targets' mean)
  EXPECT_GT(sd[0], 0.9 * std::sqrt((y.array() - y.mean()).square().mean()));
}

// R&W Algorithm 2.1 in numpy, with the standardisation and alpha of our GP, at fixed kernel
// hyperparameters: predictive mean, standard deviation and log marginal likelihood.
TEST(GaussianProcess, MatchesNumpyAtFixedHyperparameters) {
  std::mt19937_64 rng(3);
  const Eigen::MatrixXd x = random_matrix(9, 3, rng), xq = random_matrix(5, 3, rng);
  Eigen::VectorXd y(9);
  for (int i = 0; i < 9; ++i) y[i] = 10 * x(i, 0) - 3 * x(i, 1) * x(i, 2) + std::cos(4 * x(i, 2));
  const MaternParams params{Eigen::Vector3d(0.3, 0.5, 0.8), 1.7};
  const double alpha = 1e-4;
  GaussianProcess gp(alpha);
  gp.fit(x, y, params);
  Eigen::VectorXd mean, sd;
  gp.predict(xq, mean, sd);

  testing::TempDir dir;
  nlohmann::json in = {{"x", to_json(x)}, {"xq", to_json(xq)}, {"y", std::vector<double>(y.data(), y.data() + 9)},
                       {"l", {0.3, 0.5, 0.8}}, {"s2", 1.7}, {"alpha", alpha}};
  std::ofstream(dir / "in.json") << in.dump();
  std::ofstream(dir / "gp.py") <<
      "import json, sys, numpy as np\n"
      "d = json.load(open(sys.argv[1]))\n"
      "x, xq, y = np.array(d['x']), np.array(d['xq']), np.array(d['y'])\n"
      "l, s2, alpha = np.array(d['l']), d['s2'], d['alpha']\n"
      "def k(a, b):\n"
      "    r = np.sqrt((((a[:, None, :] - b[None, :, :]) / l) ** 2).sum(-1))\n"
      "    return s2 * (1 + np.sqrt(5) * r + 5 * r ** 2 / 3) * np.exp(-np.sqrt(5) * r)\n"
      "mu, sd = y.mean(), y.std()\n"
      "ys = (y - mu) / sd\n"
      "L = np.linalg.cholesky(k(x, x) + alpha * np.eye(len(x)))\n"
      "a = np.linalg.solve(L.T, np.linalg.solve(L, ys))\n"
      "ks = k(xq, x)\n"
      "v = np.linalg.solve(L, ks.T)\n"
      "mean = ks @ a * sd + mu\n"
      "std = np.sqrt(np.maximum(s2 - (v ** 2).sum(0), 0)) * sd\n"
      "lml = -0.5 * ys @ a - np.log(np.diag(L)).sum() - len(x) / 2 * np.log(2 * np.pi)\n"
      "print(json.dumps({'mean': mean.tolist(), 'std': std.tolist(), 'lml': float(lml)}))\n";
  nlohmann::json out;
  try {
    out = nlohmann::json::parse(testing::run_command("/usr/bin/python3 " + (dir / "gp.py").string() + " " +
                                                     (dir / "in.json").string()));
  } catch (const std::exception& e) {
    FAIL() << "python3-numpy is needed for this test (scripts/setup installs it): " << e.what();
  }
  for (int i = 0; i < 5; ++i) {
    EXPECT_NEAR(mean[i], out["mean"][i].get<double>(), 1e-9) << i;
    EXPECT_NEAR(sd[i], out["std"][i].get<double>(), 1e-9) << i;
  }
  EXPECT_NEAR(gp.log_marginal_likelihood(), out["lml"].get<double>(), 1e-9);
}

TEST(GaussianProcess, LogMarginalLikelihoodGradientMatchesFiniteDifferences) {
  std::mt19937_64 rng(11);
  const Eigen::MatrixXd x = random_matrix(10, 3, rng);
  Eigen::VectorXd ys = random_matrix(10, 1, rng).col(0);
  ys = (ys.array() - ys.mean()) / 0.3;
  Eigen::VectorXd theta(4);
  theta << std::log(0.2), std::log(0.7), std::log(1.5), std::log(0.8);
  Eigen::VectorXd grad;
  const double f0 = GaussianProcess::log_marginal_likelihood(x, ys, 1e-4, theta, &grad);
  ASSERT_TRUE(std::isfinite(f0));
  ASSERT_EQ(grad.size(), 4);
  for (int i = 0; i < 4; ++i) {
    const double h = 1e-5;
    Eigen::VectorXd tp = theta, tm = theta;
    tp[i] += h;
    tm[i] -= h;
    const double fd = (GaussianProcess::log_marginal_likelihood(x, ys, 1e-4, tp, nullptr) -
                       GaussianProcess::log_marginal_likelihood(x, ys, 1e-4, tm, nullptr)) / (2 * h);
    EXPECT_NEAR(grad[i], fd, 1e-5 * std::max(1.0, std::abs(fd))) << "theta " << i;
  }
}

TEST(GaussianProcess, FittedHyperparametersMaximiseLikelihoodAndFindIrrelevantInputs) {
  // y depends on x0 only: the fitted length scale of x1 must be much longer than that of x0,
  // and no other hyperparameter setting tried here may have a higher marginal likelihood.
  std::mt19937_64 rng(5);
  const Eigen::MatrixXd x = random_matrix(25, 2, rng);
  Eigen::VectorXd y(25);
  for (int i = 0; i < 25; ++i) y[i] = std::sin(5 * x(i, 0));
  GaussianProcess gp(1e-4);
  std::mt19937_64 fit_rng(1);
  gp.fit_optimized(x, y, fit_rng);
  const auto& p = gp.params();
  EXPECT_GT(p.length_scales[1], 5 * p.length_scales[0]) << p.length_scales.transpose();
  const double best = gp.log_marginal_likelihood();
  const Eigen::VectorXd ys = (y.array() - y.mean()) / std::sqrt((y.array() - y.mean()).square().mean());
  std::uniform_real_distribution<double> u(std::log(0.02), std::log(10.0));
  for (int k = 0; k < 200; ++k) {
    Eigen::VectorXd theta(3);
    theta << u(rng), u(rng), u(rng) * 0.5;
    EXPECT_LE(GaussianProcess::log_marginal_likelihood(x, ys, 1e-4, theta, nullptr), best + 1e-6) << theta.transpose();
  }
  // Predictions between the data are close to the function.
  Eigen::MatrixXd xq(3, 2);
  xq << 0.2, 0.5, 0.5, 0.1, 0.8, 0.9;
  Eigen::VectorXd mean, sd;
  gp.predict(xq, mean, sd);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(mean[i], std::sin(5 * xq(i, 0)), 0.05) << i;
}

TEST(GaussianProcess, BadInputsAreRejected) {
  testing::expect_error([] { GaussianProcess(-1.0); }, ErrorKind::kInvalidArgument, {"alpha", ">= 0"});
  GaussianProcess gp;
  Eigen::MatrixXd x(2, 1);
  x << 0.1, 0.2;
  Eigen::VectorXd y(2);
  y << 1.0, std::nan("");
  testing::expect_error([&] { gp.fit(x, y, MaternParams{Eigen::VectorXd::Ones(1), 1.0}); },
                        ErrorKind::kInvalidArgument, {"observation 1", "not finite"});
  Eigen::VectorXd mean, sd;
  testing::expect_error([&] { gp.predict(x, mean, sd); }, ErrorKind::kFailedPrecondition, {"fit"});
}

TEST(Acquisition, ExpectedImprovementClosedForm) {
  // mean 1, std 2, best 0.5: z = 0.25, Phi(0.25) = 0.5987063256829237,
  // phi(0.25) = 0.3866681168028493 (python3: statistics.NormalDist), EI = 0.5 Phi + 2 phi.
  EXPECT_NEAR(expected_improvement(1.0, 2.0, 0.5), 0.5 * 0.5987063256829237 + 2 * 0.3866681168028493, 1e-14);
  // Below the best: EI = (mean - best) Phi(z) + std phi(z) with z = -1.5.
  EXPECT_NEAR(expected_improvement(0.0, 1.0, 1.5), -1.5 * 0.06680720126885809 + 0.12951759566589174, 1e-14);
  EXPECT_DOUBLE_EQ(expected_improvement(2.0, 0.0, 0.5), 1.5);
  EXPECT_DOUBLE_EQ(expected_improvement(0.0, 0.0, 0.5), 0.0);
  EXPECT_DOUBLE_EQ(upper_confidence_bound(1.0, 2.0, 2.6), 6.2);
}

}  // namespace
}  // namespace tensorhub::detail
