// Standard test functions for global optimisation, used to check and benchmark the oracles
// (tests/tune_bayesian_test.cpp, bench/tune_bayesian.cpp; ZDT1: tests/tune_pareto_test.cpp,
// bench/tune_zdt1.cpp). Definitions and constants from
// Dixon & Szego (1978), "The global optimization problem: an introduction", as listed in
// Surjanovic & Bingham's Virtual Library of Simulation Experiments.
#pragma once

#include <array>
#include <cmath>
#include <vector>

namespace tensorhub {

/// Branin-Hoo on x1 in [-5, 10], x2 in [0, 15]; global minimum 0.397887 at (-pi, 12.275),
/// (pi, 2.275) and (9.42478, 2.475).
inline double branin(double x1, double x2) {
  const double pi = M_PI;
  const double b = 5.1 / (4 * pi * pi), c = 5 / pi, t = 1 / (8 * pi);
  return std::pow(x2 - b * x1 * x1 + c * x1 - 6, 2) + 10 * (1 - t) * std::cos(x1) + 10;
}

/// Hartmann-6 on [0, 1]^6; global minimum -3.32237 at
/// (0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573).
inline double hartmann6(const std::array<double, 6>& x) {
  static const double alpha[4] = {1.0, 1.2, 3.0, 3.2};
  static const double a[4][6] = {{10, 3, 17, 3.5, 1.7, 8},
                                 {0.05, 10, 17, 0.1, 8, 14},
                                 {3, 3.5, 1.7, 10, 17, 8},
                                 {17, 8, 0.05, 10, 0.1, 14}};
  static const double p[4][6] = {{0.1312, 0.1696, 0.5569, 0.0124, 0.8283, 0.5886},
                                 {0.2329, 0.4135, 0.8307, 0.3736, 0.1004, 0.9991},
                                 {0.2348, 0.1451, 0.3522, 0.2883, 0.3047, 0.6650},
                                 {0.4047, 0.8828, 0.8732, 0.5743, 0.1091, 0.0381}};
  double f = 0;
  for (int i = 0; i < 4; ++i) {
    double s = 0;
    for (int j = 0; j < 6; ++j) s += a[i][j] * (x[j] - p[i][j]) * (x[j] - p[i][j]);
    f -= alpha[i] * std::exp(-s);
  }
  return f;
}

/// ZDT1 (Zitzler, Deb & Thiele 2000, "Comparison of Multiobjective Evolutionary Algorithms:
/// Empirical Results", Evol. Comput. 8(2)) on x in [0, 1]^n, n >= 2, both minimised:
/// f1 = x0, g = 1 + 9 mean(x1 .. x(n-1)), f2 = g (1 - sqrt(f1 / g)). Its Pareto front is
/// f2 = 1 - sqrt(f1), where g = 1 (x1 .. = 0).
inline std::vector<double> zdt1(const std::vector<double>& x) {
  double sum = 0;
  for (std::size_t i = 1; i < x.size(); ++i) sum += x[i];
  const double g = 1 + 9 * sum / static_cast<double>(x.size() - 1);
  return {x[0], g * (1 - std::sqrt(x[0] / g))};
}

}  // namespace tensorhub
