// Small tensors and data sets shared by the train/ test binaries.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "tensorhub/core/named_tensors.h"
#include "tensorhub/train/model.h"

namespace tensorhub::testing {

inline Tensor f32(std::vector<std::int64_t> shape, const std::vector<float>& v) {
  return Tensor::from<float>(DType::kF32, std::move(shape), v);
}
inline Tensor i64(const std::vector<std::int64_t>& v) {
  return Tensor::from<std::int64_t>(DType::kI64, {static_cast<std::int64_t>(v.size())}, v);
}
/// The values of an F32 tensor, row-major.
inline std::vector<float> values(const Tensor& t) {
  return std::vector<float>(t.as<float>(), t.as<float>() + t.numel());
}

/// fit options for tests: no output, `epochs` of `batch_size` examples, shuffle and dropout
/// seeded with `seed`.
inline FitOptions quiet(int epochs, std::int64_t batch_size = 4, std::uint64_t seed = 7) {
  FitOptions o;
  o.epochs = epochs;
  o.batch_size = batch_size;
  o.verbose = 0;
  o.seed = seed;
  return o;
}

/// n points in [-1, 1]^4 labelled by the side of the plane w = (1, -2, 0.5, 1.5) they lie on,
/// with a margin of 0.2 so a linear model can reach 100%: x F32 [n, 4], y I64 [n].
inline void separable(std::int64_t n, std::uint32_t seed, Tensor& x, Tensor& y) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  const float w[4] = {1.0f, -2.0f, 0.5f, 1.5f};
  std::vector<float> xs;
  std::vector<std::int64_t> ys;
  while (static_cast<std::int64_t>(ys.size()) < n) {
    float row[4], dot = 0;
    for (int j = 0; j < 4; ++j) dot += w[j] * (row[j] = u(rng));
    if (std::abs(dot) < 0.2f) continue;
    xs.insert(xs.end(), row, row + 4);
    ys.push_back(dot > 0 ? 1 : 0);
  }
  x = f32({n, 4}, xs);
  y = i64(ys);
}

}  // namespace tensorhub::testing
