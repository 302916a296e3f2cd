// LiteNetwork (lite/network.h): model.json layers computed with Eigen.
#include "tensorhub/lite/network.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include <Eigen/Core>

#include "tensorhub/core/error.h"

namespace tensorhub {
namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const RowMatrix>;
using Map = Eigen::Map<RowMatrix>;

std::int64_t product(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::string quoted(const std::string& s) { return "\"" + s + "\""; }

// The weights a layer has, by name, with their shapes (as Model registers them).
std::map<std::string, std::vector<std::int64_t>> expected_weights(const LayerSpec& l) {
  std::map<std::string, std::vector<std::int64_t>> w;
  if (l.kind == LayerKind::kDense) {
    w[l.name + ".weight"] = {l.units, l.input_shape.back()};
    if (l.use_bias) w[l.name + ".bias"] = {l.units};
  } else if (l.kind == LayerKind::kConv2D) {
    w[l.name + ".weight"] = {l.units, l.input_shape[2], l.window[0], l.window[1]};
    if (l.use_bias) w[l.name + ".bias"] = {l.units};
  } else if (l.kind == LayerKind::kConv1D) {
    w[l.name + ".weight"] = {l.units, l.input_shape[1], l.window[0]};
    if (l.use_bias) w[l.name + ".bias"] = {l.units};
  } else if (l.kind == LayerKind::kEmbedding) {
    w[l.name + ".weight"] = {l.input_dim, l.units};
  } else if (l.kind == LayerKind::kBatchNormalization) {
    const std::int64_t c = l.input_shape.back();
    if (l.scale_gamma) w[l.name + ".gamma"] = {c};
    if (l.center) w[l.name + ".beta"] = {c};
    w[l.name + ".moving_mean"] = {c};
    w[l.name + ".moving_variance"] = {c};
  }
  return w;
}

// Model::from_parts's checks, with its messages: no tensor of another architecture, none
// missing, each F32 of its shape.
void check_weights(const NetworkSpec& spec, const NamedTensors& weights) {
  std::map<std::string, std::vector<std::int64_t>> expected;
  for (const auto& l : spec.layers) expected.merge(expected_weights(l));
  for (const auto& [name, w] : weights) {
    if (expected.count(name)) continue;
    std::string names;
    for (const auto& [n, s] : expected) names += (names.empty() ? "" : ", ") + n;
    throw InvalidArgument("weights: unexpected tensor " + quoted(name) +
                          " (a checkpoint of another architecture?); this model has: " + names);
  }
  for (const auto& [name, want] : expected) {
    const auto it = weights.find(name);
    if (it == weights.end())
      throw InvalidArgument("weights: missing tensor " + quoted(name) + " of shape " + shape_to_string(want));
    const Tensor& w = it->second;
    if (w.dtype != DType::kF32)
      throw InvalidArgument("weights[" + quoted(name) + "] has dtype " + dtype_name(w.dtype) + "; expected F32");
    if (w.shape != want)
      throw InvalidArgument("weights[" + quoted(name) + "] has shape " + shape_to_string(w.shape) +
                            "; the config needs " + shape_to_string(want));
  }
}

std::vector<float> floats_of(const Tensor& t) {
  return std::vector<float>(t.as<float>(), t.as<float>() + t.numel());
}

// The activation, in place, on rows of `last` values (softmax normalises each row, as
// torch::softmax(x, -1) does).
void activate(Activation a, std::vector<float>& x, std::int64_t last) {
  switch (a) {
    case Activation::kLinear: return;
    case Activation::kRelu:
      for (float& v : x) v = std::max(v, 0.0f);
      return;
    case Activation::kSigmoid:
      for (float& v : x) v = 1.0f / (1.0f + std::exp(-v));
      return;
    case Activation::kTanh:
      for (float& v : x) v = std::tanh(v);
      return;
    case Activation::kSoftmax:
      for (std::size_t r = 0; r + static_cast<std::size_t>(last) <= x.size(); r += static_cast<std::size_t>(last)) {
        float* row = x.data() + r;
        const float top = *std::max_element(row, row + last);
        float sum = 0;
        for (std::int64_t i = 0; i < last; ++i) sum += (row[i] = std::exp(row[i] - top));
        for (std::int64_t i = 0; i < last; ++i) row[i] /= sum;
      }
      return;
  }
}

// Dense on the last axis: [rows, in] x [in, units] + bias.
std::vector<float> dense(const std::vector<float>& x, const LayerSpec& l, const std::vector<float>& kernel,
                         const std::vector<float>& bias) {
  const std::int64_t in = l.input_shape.back(), rows = static_cast<std::int64_t>(x.size()) / in;
  std::vector<float> y(static_cast<std::size_t>(rows * l.units));
  Map out(y.data(), rows, l.units);
  out.noalias() = ConstMap(x.data(), rows, in) * ConstMap(kernel.data(), in, l.units);
  if (!bias.empty()) out.rowwise() += Eigen::Map<const Eigen::RowVectorXf>(bias.data(), l.units);
  return y;
}

// Conv2D on channels_last examples: each output pixel's window (zero-padded as the layer's
// pad_* say) becomes a row of patches [out_h * out_w, kh * kw * c], times the kernel.
std::vector<float> conv2d(const std::vector<float>& x, std::int64_t n, const LayerSpec& l,
                          const std::vector<float>& kernel, const std::vector<float>& bias) {
  const std::int64_t h = l.input_shape[0], w = l.input_shape[1], c = l.input_shape[2];
  const std::int64_t oh = l.output_shape[0], ow = l.output_shape[1], f = l.units;
  const std::int64_t kh = l.window[0], kw = l.window[1], patch = kh * kw * c;
  std::vector<float> y(static_cast<std::size_t>(n * oh * ow * f));
  RowMatrix patches(oh * ow, patch);
  for (std::int64_t e = 0; e < n; ++e) {
    const float* image = x.data() + e * h * w * c;
    patches.setZero();
    for (std::int64_t oy = 0; oy < oh; ++oy)
      for (std::int64_t ox = 0; ox < ow; ++ox) {
        float* row = patches.data() + (oy * ow + ox) * patch;
        for (std::int64_t ky = 0; ky < kh; ++ky) {
          const std::int64_t iy = oy * l.strides[0] + ky - l.pad_top;
          if (iy < 0 || iy >= h) continue;
          for (std::int64_t kx = 0; kx < kw; ++kx) {
            const std::int64_t ix = ox * l.strides[1] + kx - l.pad_left;
            if (ix < 0 || ix >= w) continue;
            std::copy_n(image + (iy * w + ix) * c, c, row + (ky * kw + kx) * c);
          }
        }
      }
    Map out(y.data() + e * oh * ow * f, oh * ow, f);
    out.noalias() = patches * ConstMap(kernel.data(), patch, f);
    if (!bias.empty()) out.rowwise() += Eigen::Map<const Eigen::RowVectorXf>(bias.data(), f);
  }
  return y;
}

// MaxPooling2D on channels_last examples; padded positions never win (TensorFlow's "same").
std::vector<float> max_pooling2d(const std::vector<float>& x, std::int64_t n, const LayerSpec& l) {
  const std::int64_t h = l.input_shape[0], w = l.input_shape[1], c = l.input_shape[2];
  const std::int64_t oh = l.output_shape[0], ow = l.output_shape[1];
  std::vector<float> y(static_cast<std::size_t>(n * oh * ow * c), -std::numeric_limits<float>::infinity());
  for (std::int64_t e = 0; e < n; ++e) {
    const float* image = x.data() + e * h * w * c;
    float* out = y.data() + e * oh * ow * c;
    for (std::int64_t oy = 0; oy < oh; ++oy)
      for (std::int64_t ox = 0; ox < ow; ++ox) {
        float* pixel = out + (oy * ow + ox) * c;
        for (std::int64_t ky = 0; ky < l.window[0]; ++ky) {
          const std::int64_t iy = oy * l.strides[0] + ky - l.pad_top;
          if (iy < 0 || iy >= h) continue;
          for (std::int64_t kx = 0; kx < l.window[1]; ++kx) {
            const std::int64_t ix = ox * l.strides[1] + kx - l.pad_left;
            if (ix < 0 || ix >= w) continue;
            const float* in = image + (iy * w + ix) * c;
            for (std::int64_t ch = 0; ch < c; ++ch) pixel[ch] = std::max(pixel[ch], in[ch]);
          }
        }
      }
  }
  return y;
}

// Conv1D on channels_last sequences [steps, c]: each output step's window (zero-padded as
// pad_top / pad_bottom say) becomes a row of patches [out_steps, k * c], times the kernel.
std::vector<float> conv1d(const std::vector<float>& x, std::int64_t n, const LayerSpec& l,
                          const std::vector<float>& kernel, const std::vector<float>& bias) {
  const std::int64_t steps = l.input_shape[0], c = l.input_shape[1];
  const std::int64_t os = l.output_shape[0], f = l.units, k = l.window[0], patch = k * c;
  std::vector<float> y(static_cast<std::size_t>(n * os * f));
  RowMatrix patches(os, patch);
  for (std::int64_t e = 0; e < n; ++e) {
    const float* seq = x.data() + e * steps * c;
    patches.setZero();
    for (std::int64_t o = 0; o < os; ++o)
      for (std::int64_t j = 0; j < k; ++j) {
        const std::int64_t t = o * l.strides[0] + j - l.pad_top;
        if (t >= 0 && t < steps) std::copy_n(seq + t * c, c, patches.data() + o * patch + j * c);
      }
    Map out(y.data() + e * os * f, os, f);
    out.noalias() = patches * ConstMap(kernel.data(), patch, f);
    if (!bias.empty()) out.rowwise() += Eigen::Map<const Eigen::RowVectorXf>(bias.data(), f);
  }
  return y;
}

// MaxPooling1D on channels_last sequences; padded steps never win (TensorFlow's "same").
std::vector<float> max_pooling1d(const std::vector<float>& x, std::int64_t n, const LayerSpec& l) {
  const std::int64_t steps = l.input_shape[0], c = l.input_shape[1], os = l.output_shape[0];
  std::vector<float> y(static_cast<std::size_t>(n * os * c), -std::numeric_limits<float>::infinity());
  for (std::int64_t e = 0; e < n; ++e)
    for (std::int64_t o = 0; o < os; ++o) {
      float* out = y.data() + (e * os + o) * c;
      for (std::int64_t j = 0; j < l.window[0]; ++j) {
        const std::int64_t t = o * l.strides[0] + j - l.pad_top;
        if (t < 0 || t >= steps) continue;
        const float* in = x.data() + (e * steps + t) * c;
        for (std::int64_t ch = 0; ch < c; ++ch) out[ch] = std::max(out[ch], in[ch]);
      }
    }
  return y;
}

// Embedding: checks the ids (check_embedding_ids) and copies row id of the table [input_dim,
// output_dim] for each; with mask_zero, `mask` gets 1 per id that is not 0, else 0.
std::vector<float> embedding(const std::vector<float>& ids, const LayerSpec& l, const std::vector<float>& table,
                             std::vector<float>& mask) {
  check_embedding_ids(ids.data(), static_cast<std::int64_t>(ids.size()), l);
  const std::int64_t d = l.units;
  std::vector<float> y(ids.size() * static_cast<std::size_t>(d));
  for (std::size_t i = 0; i < ids.size(); ++i)
    std::copy_n(table.data() + static_cast<std::int64_t>(ids[i]) * d, d, y.data() + static_cast<std::int64_t>(i) * d);
  if (l.mask_zero) {
    mask.resize(ids.size());
    for (std::size_t i = 0; i < ids.size(); ++i) mask[i] = ids[i] != 0 ? 1.0f : 0.0f;
  }
  return y;
}

// GlobalAveragePooling1D on [steps, features] examples: the mean over the steps, or with a
// mask (use_mask) the mean over the unmasked steps (zeros when all are masked), as model.cpp.
std::vector<float> global_average_pooling1d(const std::vector<float>& x, std::int64_t n, const LayerSpec& l,
                                            const std::vector<float>& mask) {
  const std::int64_t steps = l.input_shape[0], c = l.input_shape[1];
  const bool masked = l.use_mask && !mask.empty();
  std::vector<float> y(static_cast<std::size_t>(n * c), 0.0f);
  for (std::int64_t e = 0; e < n; ++e) {
    float* out = y.data() + e * c;
    double count = 0;
    for (std::int64_t t = 0; t < steps; ++t) {
      const float m = masked ? mask[static_cast<std::size_t>(e * steps + t)] : 1.0f;
      if (m == 0) continue;
      count += m;
      const float* in = x.data() + (e * steps + t) * c;
      for (std::int64_t ch = 0; ch < c; ++ch) out[ch] += in[ch] * m;
    }
    const float scale = static_cast<float>(1.0 / std::max(count, 1.0));
    for (std::int64_t ch = 0; ch < c; ++ch) out[ch] *= scale;
  }
  return y;
}

}  // namespace

LiteNetwork::LiteNetwork(const Json& config, const NamedTensors& weights)
    : config_(config), spec_(parse_network(config)) {
  check_weights(spec_, weights);
  for (const auto& layer : spec_.layers) load_params(layer, weights);
}

void LiteNetwork::load_params(const LayerSpec& l, const NamedTensors& weights) {
  Params p;
  if (l.kind == LayerKind::kDense) {
    // torch's [units, in] becomes [in, units], so that rows of x multiply it directly.
    const Tensor& w = weights.at(l.name + ".weight");
    const std::int64_t in = l.input_shape.back();
    p.kernel.resize(static_cast<std::size_t>(in * l.units));
    Map(p.kernel.data(), in, l.units) = ConstMap(w.as<float>(), l.units, in).transpose();
  } else if (l.kind == LayerKind::kConv2D) {
    // torch's [filters, c, kh, kw] becomes [(ky * kw + kx) * c + ch, filter], the patch order.
    const Tensor& w = weights.at(l.name + ".weight");
    const std::int64_t f = l.units, c = l.input_shape[2], kh = l.window[0], kw = l.window[1];
    p.kernel.resize(static_cast<std::size_t>(kh * kw * c * f));
    const float* src = w.as<float>();
    for (std::int64_t o = 0; o < f; ++o)
      for (std::int64_t ch = 0; ch < c; ++ch)
        for (std::int64_t ky = 0; ky < kh; ++ky)
          for (std::int64_t kx = 0; kx < kw; ++kx)
            p.kernel[static_cast<std::size_t>(((ky * kw + kx) * c + ch) * f + o)] = src[((o * c + ch) * kh + ky) * kw + kx];
  } else if (l.kind == LayerKind::kConv1D) {
    // torch's [filters, c, k] becomes [j * c + ch, filter], the patch order.
    const float* src = weights.at(l.name + ".weight").as<float>();
    const std::int64_t f = l.units, c = l.input_shape[1], k = l.window[0];
    p.kernel.resize(static_cast<std::size_t>(k * c * f));
    for (std::int64_t o = 0; o < f; ++o)
      for (std::int64_t ch = 0; ch < c; ++ch)
        for (std::int64_t j = 0; j < k; ++j)
          p.kernel[static_cast<std::size_t>((j * c + ch) * f + o)] = src[(o * c + ch) * k + j];
  } else if (l.kind == LayerKind::kEmbedding) {
    p.kernel = floats_of(weights.at(l.name + ".weight"));  // [input_dim, output_dim], row per id
  } else if (l.kind == LayerKind::kBatchNormalization) {
    // (x - mean) / sqrt(var + eps) * gamma + beta as one multiply-add per value.
    const std::int64_t c = l.input_shape.back();
    const std::vector<float> mean = floats_of(weights.at(l.name + ".moving_mean"));
    const std::vector<float> var = floats_of(weights.at(l.name + ".moving_variance"));
    const std::vector<float> gamma = l.scale_gamma ? floats_of(weights.at(l.name + ".gamma")) : std::vector<float>(c, 1);
    const std::vector<float> beta = l.center ? floats_of(weights.at(l.name + ".beta")) : std::vector<float>(c, 0);
    for (std::int64_t i = 0; i < c; ++i) {
      const double s = gamma[i] / std::sqrt(static_cast<double>(var[i]) + l.epsilon);
      p.scale.push_back(static_cast<float>(s));
      p.shift.push_back(static_cast<float>(beta[i] - mean[i] * s));
    }
  }
  if ((l.kind == LayerKind::kDense || l.kind == LayerKind::kConv2D || l.kind == LayerKind::kConv1D) &&
      l.use_bias)
    p.bias = floats_of(weights.at(l.name + ".bias"));
  params_.push_back(std::move(p));
}

std::vector<float> LiteNetwork::predict(const float* x, std::int64_t n) const {
  std::vector<float> v(x, x + n * product(spec_.input_shape));
  std::vector<float> mask;  // a mask_zero Embedding's, one value per id
  for (std::size_t i = 0; i < spec_.layers.size(); ++i) {
    const LayerSpec& l = spec_.layers[i];
    const Params& p = params_[i];
    switch (l.kind) {
      case LayerKind::kInput:
      case LayerKind::kDropout:  // identity outside training
      case LayerKind::kFlatten:  // row-major per example: the same values in the same order
      case LayerKind::kReshape:
      case LayerKind::kActivation:
        break;
      case LayerKind::kRescaling:
        for (float& e : v) e = static_cast<float>(e * l.scale + l.offset);
        break;
      case LayerKind::kDense:
        v = dense(v, l, p.kernel, p.bias);
        break;
      case LayerKind::kConv2D:
        v = conv2d(v, n, l, p.kernel, p.bias);
        break;
      case LayerKind::kMaxPooling2D:
        v = max_pooling2d(v, n, l);
        break;
      case LayerKind::kBatchNormalization: {
        const std::size_t c = p.scale.size();
        for (std::size_t j = 0; j < v.size(); ++j) v[j] = v[j] * p.scale[j % c] + p.shift[j % c];
        break;
      }
      case LayerKind::kEmbedding:
        v = embedding(v, l, p.kernel, mask);
        break;
      case LayerKind::kGlobalAveragePooling1D:
        v = global_average_pooling1d(v, n, l, mask);
        break;
      case LayerKind::kConv1D:
        v = conv1d(v, n, l, p.kernel, p.bias);
        break;
      case LayerKind::kMaxPooling1D:
        v = max_pooling1d(v, n, l);
        break;
    }
    if (l.kind == LayerKind::kDense || l.kind == LayerKind::kConv2D || l.kind == LayerKind::kConv1D ||
        l.kind == LayerKind::kActivation)
      activate(l.activation, v, l.output_shape.empty() ? 1 : l.output_shape.back());
  }
  return v;
}

LiteNetwork LiteNetwork::load(const std::filesystem::path& dir) {
  const auto json_file = dir / "model.json";
  if (!std::filesystem::exists(json_file)) {
    if (std::filesystem::exists(dir / "model.pt"))
      throw NotFound((dir / "model.pt").string() + " is a TorchScript model: tensorhub-serve-lite runs model.json "
                     "networks only (tensorhub serve, with libtorch, runs TorchScript)");
    throw NotFound("no model in " + dir.string() + ": expected model.json (+ weights.safetensors)");
  }
  const auto bytes = read_file_bytes(json_file);
  const Json config = Json::parse(reinterpret_cast<const char*>(bytes.data()),
                                  reinterpret_cast<const char*>(bytes.data()) + bytes.size(), nullptr, false);
  if (config.is_discarded() || !config.is_object()) throw DataLoss(json_file.string() + " is not a JSON object");
  const auto weights_file = dir / "weights.safetensors";
  if (std::filesystem::exists(weights_file)) return LiteNetwork(config, read_safetensors(weights_file));
  try {
    return LiteNetwork(config, {});  // a model without weights (half_plus_two) needs no file
  } catch (const Error& e) {
    if (e.message().find("missing tensor") == std::string::npos) throw;
    throw NotFound(weights_file.string() + " is missing: model.json's layers need their weights next to it");
  }
}

}  // namespace tensorhub
