// Hand-written CPU kernels of the training loop where libtorch's generic ones cost a lot on
// few cores (measured with torch.autograd.profiler on the original MLP, 2 threads: the
// serial Bernoulli sampling of dropout took ~16% of a step, Adam's nine tensor passes ~9%).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <string>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include "model_impl.h"
#include "tensorhub/core/error.h"

namespace tensorhub::detail {
namespace {

// Chris Wellons's "lowbias32" integer hash (hash-prospector, 2020), used as a counter-based
// generator: element i of a mask draws lowbias32(lowbias32(i ^ k0) ^ k1) for a 64-bit key
// (k0, k1) taken from the network's generator, so masks are reproducible for a seed whatever
// the thread count, threads share no state, and the loop vectorises (32-bit lanes).
inline std::uint32_t lowbias32(std::uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

// out[i] = scale if the draw of element i is <= keep_max, else 0, for i in [begin, end).
inline void fill_mask(float* out, std::uint32_t begin, std::uint32_t end, std::uint32_t k0,
                      std::uint32_t k1, std::uint32_t keep_max, float scale) {
  for (std::uint32_t i = begin; i < end; ++i)
    out[i] = lowbias32(lowbias32(i ^ k0) ^ k1) <= keep_max ? scale : 0.0f;
}
__attribute__((target("avx2"))) void fill_mask_avx2(float* out, std::uint32_t begin,
                                                    std::uint32_t end, std::uint32_t k0,
                                                    std::uint32_t k1, std::uint32_t keep_max,
                                                    float scale) {
  fill_mask(out, begin, end, k0, k1, keep_max, scale);
}

bool has_avx2_fma() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}

// One Adam update of n elements, Keras's formulation (Kingma & Ba 2015, Algorithm 1 with the
// bias corrections folded into alpha, epsilon added to sqrt(v)):
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;  p -= alpha m / (sqrt(v) + eps)
void adam_scalar(float* p, const float* g, float* m, float* v, std::int64_t n, float b1,
                 float b2, float alpha, float eps) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float gi = g[i];
    const float mi = b1 * m[i] + (1 - b1) * gi;
    const float vi = b2 * v[i] + (1 - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] -= alpha * mi / (std::sqrt(vi) + eps);
  }
}

__attribute__((target("avx2,fma"))) void adam_avx2(float* p, const float* g, float* m, float* v,
                                                   std::int64_t n, float b1, float b2,
                                                   float alpha, float eps) {
  const __m256 vb1 = _mm256_set1_ps(b1), vc1 = _mm256_set1_ps(1 - b1);
  const __m256 vb2 = _mm256_set1_ps(b2), vc2 = _mm256_set1_ps(1 - b2);
  const __m256 va = _mm256_set1_ps(alpha), ve = _mm256_set1_ps(eps);
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 gi = _mm256_loadu_ps(g + i);
    const __m256 mi = _mm256_fmadd_ps(vb1, _mm256_loadu_ps(m + i), _mm256_mul_ps(vc1, gi));
    const __m256 vi =
        _mm256_fmadd_ps(vb2, _mm256_loadu_ps(v + i), _mm256_mul_ps(vc2, _mm256_mul_ps(gi, gi)));
    _mm256_storeu_ps(m + i, mi);
    _mm256_storeu_ps(v + i, vi);
    const __m256 step =
        _mm256_div_ps(_mm256_mul_ps(va, mi), _mm256_add_ps(_mm256_sqrt_ps(vi), ve));
    _mm256_storeu_ps(p + i, _mm256_sub_ps(_mm256_loadu_ps(p + i), step));
  }
  adam_scalar(p + i, g + i, m + i, v + i, n - i, b1, b2, alpha, eps);
}

}  // namespace

torch::Tensor dropout_mask(const torch::Tensor& like, double rate, torch::Generator& generator) {
  std::uint64_t key;
  {
    std::lock_guard<std::mutex> lock(generator.mutex());
    key = at::check_generator<at::CPUGeneratorImpl>(generator)->random64();
  }
  torch::Tensor mask = torch::empty(like.sizes(), like.options().dtype(torch::kFloat));
  float* out = mask.data_ptr<float>();
  const std::int64_t n = mask.numel();
  if (n > std::int64_t{0xffffffff})
    throw InvalidArgument("Dropout on " + std::to_string(n) +
                          " values in one batch; at most 2^32 - 1 are supported");
  // Keep an element when its 32-bit draw is below (1 - rate) * 2^32, i.e. <= keep_max.
  const double keep = std::llround((1.0 - rate) * 4294967296.0);
  if (keep <= 0) {
    mask.zero_();
    return mask;
  }
  const auto keep_max = static_cast<std::uint32_t>(std::min(keep, 4294967296.0) - 1);
  const float scale = static_cast<float>(1.0 / (1.0 - rate));
  const auto k0 = static_cast<std::uint32_t>(key), k1 = static_cast<std::uint32_t>(key >> 32);
  const bool avx2 = has_avx2_fma();
  at::parallel_for(0, n, 32768, [&](std::int64_t begin, std::int64_t end) {
    const auto b = static_cast<std::uint32_t>(begin), e = static_cast<std::uint32_t>(end);
    if (avx2)
      fill_mask_avx2(out, b, e, k0, k1, keep_max, scale);
    else
      fill_mask(out, b, e, k0, k1, keep_max, scale);
  });
  return mask;
}

void throw_unknown_slot(const std::string& optimizer, const std::string& slot,
                        const std::string& allowed) {
  throw DataLoss("optimizer state: " + optimizer + " keeps no slot \"" + slot + "\"; its slots: " +
                 allowed);
}

Adam::Adam(std::vector<torch::Tensor> params, double learning_rate, double beta_1, double beta_2,
           double epsilon, double weight_decay)
    : params_(std::move(params)),
      lr_(learning_rate),
      b1_(beta_1),
      b2_(beta_2),
      eps_(epsilon),
      weight_decay_(weight_decay) {
  for (const auto& p : params_) {
    m_.push_back(torch::zeros_like(p, torch::MemoryFormat::Contiguous));
    v_.push_back(torch::zeros_like(p, torch::MemoryFormat::Contiguous));
  }
}

void Adam::set_slot(std::size_t i, const std::string& slot, const torch::Tensor& t) {
  if (slot != "m" && slot != "v") throw_unknown_slot(weight_decay_ > 0 ? "AdamW" : "Adam", slot, "m, v");
  torch::NoGradGuard no_grad;
  (slot == "m" ? m_ : v_).at(i).copy_(t);
}

void Adam::step() {
  ++iterations_;
  if (weight_decay_ > 0) {
    // AdamW: decoupled weight decay, applied before the update as Keras does (p -= p lr wd).
    torch::NoGradGuard no_grad;
    const double keep = 1 - lr_ * weight_decay_;
    for (auto& p : params_)
      if (p.grad().defined()) p.mul_(keep);
  }
  const double t = static_cast<double>(iterations_);
  const double alpha = lr_ * std::sqrt(1 - std::pow(b2_, t)) / (1 - std::pow(b1_, t));
  const float b1 = static_cast<float>(b1_), b2 = static_cast<float>(b2_);
  const float a = static_cast<float>(alpha), eps = static_cast<float>(eps_);
  const bool avx2 = has_avx2_fma();
  for (std::size_t k = 0; k < params_.size(); ++k) {
    torch::Tensor& p = params_[k];
    const torch::Tensor& grad = p.grad();
    if (!grad.defined()) continue;
    if (!p.is_contiguous() || p.scalar_type() != torch::kFloat)
      throw Internal("Adam: parameter " + std::to_string(k) + " is not a contiguous F32 tensor");
    const torch::Tensor g = grad.contiguous();
    float* pp = p.data_ptr<float>();
    const float* gp = g.data_ptr<float>();
    float* mp = m_[k].data_ptr<float>();
    float* vp = v_[k].data_ptr<float>();
    at::parallel_for(0, p.numel(), 32768, [&](std::int64_t begin, std::int64_t end) {
      if (avx2)
        adam_avx2(pp + begin, gp + begin, mp + begin, vp + begin, end - begin, b1, b2, a, eps);
      else
        adam_scalar(pp + begin, gp + begin, mp + begin, vp + begin, end - begin, b1, b2, a, eps);
    });
    // The parameter changed in place behind autograd's back: bump its version like an
    // in-place torch op would, so a graph that saved the old value refuses to use it.
    p.unsafeGetTensorImpl()->bump_version();
  }
}

RMSprop::RMSprop(std::vector<torch::Tensor> params, double learning_rate, double rho,
                 double momentum, double epsilon, bool centered)
    : params_(std::move(params)),
      lr_(learning_rate),
      rho_(rho),
      momentum_coef_(momentum),
      eps_(epsilon),
      centered_(centered) {
  for (const auto& p : params_) {
    velocity_.push_back(torch::zeros_like(p, torch::MemoryFormat::Contiguous));
    if (momentum_coef_ > 0) momentum_.push_back(torch::zeros_like(p, torch::MemoryFormat::Contiguous));
    if (centered_) average_gradient_.push_back(torch::zeros_like(p, torch::MemoryFormat::Contiguous));
  }
}

void RMSprop::step() {
  torch::NoGradGuard no_grad;
  for (std::size_t k = 0; k < params_.size(); ++k) {
    torch::Tensor& p = params_[k];
    const torch::Tensor& g = p.grad();
    if (!g.defined()) continue;
    torch::Tensor& v = velocity_[k];
    v.mul_(rho_).addcmul_(g, g, 1 - rho_);
    torch::Tensor denominator;
    if (centered_) {
      torch::Tensor& a = average_gradient_[k];
      a.mul_(rho_).add_(g, 1 - rho_);
      denominator = v - a * a + eps_;
    } else {
      denominator = v + eps_;
    }
    const torch::Tensor increment = g * lr_ / denominator.sqrt();
    if (momentum_coef_ > 0) {
      torch::Tensor& mom = momentum_[k];
      mom.mul_(momentum_coef_).add_(increment);
      p.sub_(mom);
    } else {
      p.sub_(increment);
    }
  }
}

std::map<std::string, torch::Tensor> RMSprop::slots(std::size_t i) {
  std::map<std::string, torch::Tensor> out = {{"velocity", velocity_.at(i)}};
  if (momentum_coef_ > 0) out.emplace("momentum", momentum_.at(i));
  if (centered_) out.emplace("average_gradient", average_gradient_.at(i));
  return out;
}

void RMSprop::set_slot(std::size_t i, const std::string& slot, const torch::Tensor& t) {
  torch::Tensor* dst = nullptr;
  if (slot == "velocity") dst = &velocity_.at(i);
  if (slot == "momentum" && momentum_coef_ > 0) dst = &momentum_.at(i);
  if (slot == "average_gradient" && centered_) dst = &average_gradient_.at(i);
  if (!dst)
    throw_unknown_slot("RMSprop", slot,
                       std::string("velocity") + (momentum_coef_ > 0 ? ", momentum" : "") +
                           (centered_ ? ", average_gradient" : ""));
  torch::NoGradGuard no_grad;
  dst->copy_(t);
}

TorchOptimizer::TorchOptimizer(std::unique_ptr<torch::optim::Optimizer> optimizer)
    : optimizer_(std::move(optimizer)) {}

void TorchOptimizer::step() { optimizer_->step(); }

}  // namespace tensorhub::detail
