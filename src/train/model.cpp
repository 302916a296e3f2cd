// Model construction from a Keras-style config, weights in and out, optimizers, threads.
#include <ATen/CPUGeneratorImpl.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <thread>

#include "model_json_fields.h"
#include "model_impl.h"
#include "tensorhub/core/error.h"
#include "tensorhub/core/named_tensors.h"

namespace tensorhub {
namespace {

using nlohmann::json;
using detail::Activation;
using detail::check_keys;
using detail::get_bool;
using detail::get_number;
using detail::in_quotes;
using detail::number_string;
using detail::Layer;
using detail::LayerKind;
using detail::LossKind;

const char* const kLosses =
    "sparse_categorical_crossentropy, categorical_crossentropy, binary_crossentropy, mse, null";
const char* const kOptimizers = "Adam, SGD, AdamW, RMSprop";

torch::Generator make_generator(std::uint64_t seed) {
  if (seed == 0) seed = (std::uint64_t{std::random_device{}()} << 32) | std::random_device{}();
  return at::make_generator<at::CPUGeneratorImpl>(seed);
}

// Keras's defaults: glorot_uniform kernel (Glorot & Bengio 2010, limit sqrt(6 / (in + out))),
// zero bias. w is [out, in, receptive field...] (torch's layout); as in Keras, both fans are
// multiplied by the receptive field's size (kernel_h * kernel_w for Conv2D).
void glorot_uniform_(torch::Tensor& w, const c10::optional<torch::Generator>& gen) {
  torch::NoGradGuard no_grad;
  double receptive = 1;
  for (std::int64_t d = 2; d < w.dim(); ++d) receptive *= static_cast<double>(w.size(d));
  const double fan_out = static_cast<double>(w.size(0)) * receptive;
  const double fan_in = static_cast<double>(w.size(1)) * receptive;
  const double limit = std::sqrt(6.0 / (fan_in + fan_out));
  w.uniform_(-limit, limit, gen);
}

std::unique_ptr<detail::Optimizer> make_optimizer(const json& config,
                                                        std::vector<torch::Tensor> params) {
  json spec = config.contains("optimizer") ? config.at("optimizer") : json{{"type", "Adam"}};
  if (spec.is_string()) spec = json{{"type", spec}};
  if (!spec.is_object())
    throw InvalidArgument("optimizer must be an object such as {\"type\": \"Adam\", "
                          "\"learning_rate\": 0.001} or a name; allowed names: " +
                          std::string(kOptimizers));
  if (!spec.contains("type") || !spec.at("type").is_string())
    throw InvalidArgument("optimizer.type is missing or not a string; allowed: " +
                          std::string(kOptimizers));
  const std::string type = spec.at("type").get<std::string>();
  if (type == "Adam" || type == "adam") {
    check_keys(spec, "optimizer", {"type", "learning_rate", "beta_1", "beta_2", "epsilon"});
    // Keras defaults; epsilon is Keras's 1e-7, not torch's 1e-8.
    const double lr = get_number(spec, "learning_rate", "optimizer", 1e-3, 0, 1e6, true);
    const double b1 = get_number(spec, "beta_1", "optimizer", 0.9, 0, 1, false, true);
    const double b2 = get_number(spec, "beta_2", "optimizer", 0.999, 0, 1, false, true);
    const double eps = get_number(spec, "epsilon", "optimizer", 1e-7, 0, 1);
    return std::make_unique<detail::Adam>(std::move(params), lr, b1, b2, eps);
  }
  if (type == "AdamW" || type == "adamw") {
    check_keys(spec, "optimizer",
               {"type", "learning_rate", "weight_decay", "beta_1", "beta_2", "epsilon"});
    // Keras 3's AdamW defaults (weight_decay 0.004; torch's is 0.01).
    const double lr = get_number(spec, "learning_rate", "optimizer", 1e-3, 0, 1e6, true);
    const double wd = get_number(spec, "weight_decay", "optimizer", 0.004, 0, 1e6);
    if (lr * wd >= 1)
      throw InvalidArgument("optimizer: learning_rate * weight_decay = " + number_string(lr * wd) +
                            " must be below 1 (each step multiplies the weights by 1 - lr * wd)");
    const double b1 = get_number(spec, "beta_1", "optimizer", 0.9, 0, 1, false, true);
    const double b2 = get_number(spec, "beta_2", "optimizer", 0.999, 0, 1, false, true);
    const double eps = get_number(spec, "epsilon", "optimizer", 1e-7, 0, 1);
    return std::make_unique<detail::Adam>(std::move(params), lr, b1, b2, eps, wd);
  }
  if (type == "RMSprop" || type == "rmsprop") {
    check_keys(spec, "optimizer",
               {"type", "learning_rate", "rho", "momentum", "epsilon", "centered"});
    const double lr = get_number(spec, "learning_rate", "optimizer", 1e-3, 0, 1e6, true);
    const double rho = get_number(spec, "rho", "optimizer", 0.9, 0, 1, false, true);
    const double momentum = get_number(spec, "momentum", "optimizer", 0.0, 0, 1, false, true);
    const double eps = get_number(spec, "epsilon", "optimizer", 1e-7, 0, 1);
    const bool centered = get_bool(spec, "centered", "optimizer", false);
    return std::make_unique<detail::RMSprop>(std::move(params), lr, rho, momentum, eps, centered);
  }
  if (type == "SGD" || type == "sgd") {
    check_keys(spec, "optimizer", {"type", "learning_rate", "momentum", "nesterov"});
    const double lr = get_number(spec, "learning_rate", "optimizer", 1e-2, 0, 1e6, true);
    const double momentum = get_number(spec, "momentum", "optimizer", 0.0, 0, 1);
    const bool nesterov = get_bool(spec, "nesterov", "optimizer", false);
    // torch refuses nesterov without momentum; with momentum 0 Keras's nesterov is plain SGD.
    return std::make_unique<detail::TorchOptimizer>(std::make_unique<torch::optim::SGD>(
        std::move(params),
        torch::optim::SGDOptions(lr).momentum(momentum).nesterov(nesterov && momentum > 0)));
  }
  throw InvalidArgument("optimizer.type " + in_quotes(type) + " is not an optimizer; allowed: " +
                        kOptimizers);
}

// Allocates and initialises the weights of one checked layer (Dense, Conv2D,
// BatchNormalization; other kinds have none) and registers them under the layer's name:
// kernels glorot_uniform, biases and beta zero, gamma and moving_variance one.
void build_modules(Layer& layer, const c10::optional<torch::Generator>& init_gen,
                   detail::Network& net) {
  if (layer.kind == LayerKind::kDense) {
    auto params = std::make_shared<detail::DenseParams>();
    params->weight = params->register_parameter("weight", torch::empty({layer.units, layer.input_shape.back()}));
    glorot_uniform_(params->weight, init_gen);
    if (layer.use_bias) params->bias = params->register_parameter("bias", torch::zeros({layer.units}));
    net.register_module(layer.name, params);
    layer.dense = std::move(params);
  } else if (layer.kind == LayerKind::kConv2D) {
    auto params = std::make_shared<detail::ConvParams>();
    params->weight = params->register_parameter(
        "weight", torch::empty({layer.units, layer.input_shape[2], layer.window[0], layer.window[1]}));
    glorot_uniform_(params->weight, init_gen);
    if (layer.use_bias) params->bias = params->register_parameter("bias", torch::zeros({layer.units}));
    net.register_module(layer.name, params);
    layer.conv = std::move(params);
  } else if (layer.kind == LayerKind::kConv1D) {
    auto params = std::make_shared<detail::ConvParams>();
    params->weight = params->register_parameter(
        "weight", torch::empty({layer.units, layer.input_shape[1], layer.window[0]}));
    glorot_uniform_(params->weight, init_gen);
    if (layer.use_bias) params->bias = params->register_parameter("bias", torch::zeros({layer.units}));
    net.register_module(layer.name, params);
    layer.conv = std::move(params);
  } else if (layer.kind == LayerKind::kEmbedding) {
    // Keras's default embeddings_initializer "uniform": RandomUniform(-0.05, 0.05).
    auto params = std::make_shared<detail::EmbeddingParams>();
    params->weight = params->register_parameter("weight", torch::empty({layer.input_dim, layer.units}));
    {
      torch::NoGradGuard no_grad;
      params->weight.uniform_(-0.05, 0.05, init_gen);
    }
    net.register_module(layer.name, params);
    layer.embedding = std::move(params);
  } else if (layer.kind == LayerKind::kBatchNormalization) {
    const std::int64_t channels = layer.input_shape.back();
    auto params = std::make_shared<detail::BatchNormParams>();
    if (layer.scale_gamma) params->gamma = params->register_parameter("gamma", torch::ones({channels}));
    if (layer.center) params->beta = params->register_parameter("beta", torch::zeros({channels}));
    params->moving_mean = params->register_buffer("moving_mean", torch::zeros({channels}));
    params->moving_variance = params->register_buffer("moving_variance", torch::ones({channels}));
    net.register_module(layer.name, params);
    layer.bn = std::move(params);
  }
}

// The config's "loss" (absent: sparse_categorical_crossentropy; null: none).
LossKind parse_loss(const json& config) {
  if (!config.contains("loss")) return LossKind::kSparseCategoricalCrossentropy;
  const json& loss = config.at("loss");
  if (loss.is_null()) return LossKind::kNone;
  const std::string name = loss.is_string() ? loss.get<std::string>() : "";
  if (name == "sparse_categorical_crossentropy") return LossKind::kSparseCategoricalCrossentropy;
  if (name == "categorical_crossentropy") return LossKind::kCategoricalCrossentropy;
  if (name == "binary_crossentropy") return LossKind::kBinaryCrossentropy;
  if (name == "mse" || name == "mean_squared_error") return LossKind::kMse;
  throw InvalidArgument("loss " + loss.dump() + " is not a loss; allowed: " + kLosses);
}

// Checks the network's output shape per example against the loss and records what fit()
// needs: the classes of a classifier, the activation the loss computes itself.
void check_output(Model::Impl& impl, const std::vector<std::int64_t>& shape) {
  impl.output_shape = shape;
  impl.num_classes = 0;
  switch (impl.loss) {
    case LossKind::kNone:
    case LossKind::kMse:
      impl.net->folded_activation = Activation::kLinear;
      return;
    case LossKind::kSparseCategoricalCrossentropy:
    case LossKind::kCategoricalCrossentropy:
      impl.net->folded_activation = Activation::kSoftmax;
      break;
    case LossKind::kBinaryCrossentropy:
      impl.net->folded_activation = Activation::kSigmoid;
      break;
  }
  if (shape.size() != 1)
    throw InvalidArgument("the network's output has shape " + shape_to_string(shape) +
                          " per example; " + detail::loss_name(impl.loss) +
                          (impl.loss == LossKind::kBinaryCrossentropy
                               ? " needs [1] (or [labels])"
                               : " needs [classes]") +
                          ": add a Flatten before the last Dense (or set \"loss\": null for an "
                          "inference-only model)");
  impl.num_classes = shape[0];
}

std::shared_ptr<Model::Impl> build(const json& config_in) {
  if (!config_in.is_object())
    throw InvalidArgument("model config must be a JSON object with \"layers\", got " +
                          config_in.dump().substr(0, 80));
  auto impl = std::make_shared<Model::Impl>();
  impl->config = config_in;
  json& config = impl->config;

  if (config.contains("dtype") &&
      !(config.at("dtype").is_string() && config.at("dtype").get<std::string>() == "float32"))
    throw InvalidArgument("dtype " + config.at("dtype").dump() + " is not supported; allowed: "
                          "float32");
  impl->loss = parse_loss(config);
  if (config.contains("metrics")) {
    const json& m = config.at("metrics");
    if (!m.is_array())
      throw InvalidArgument("metrics must be an array such as [\"accuracy\"], got " + m.dump());
    for (std::size_t i = 0; i < m.size(); ++i) {
      if (!m[i].is_string() || m[i].get<std::string>() != "accuracy")
        throw InvalidArgument("metrics[" + std::to_string(i) + "] " + m[i].dump() +
                              " is not a metric; allowed: accuracy");
      if (impl->loss == LossKind::kMse)
        throw InvalidArgument("metrics[" + std::to_string(i) + "] \"accuracy\" has no meaning "
                              "for loss \"mse\" (a regression loss); remove it");
    }
  }
  std::uint64_t seed = 0;
  if (config.contains("seed")) {
    const json& v = config.at("seed");
    if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<std::int64_t>() < 0))
      throw InvalidArgument("seed must be a non-negative integer, got " + v.dump());
    seed = v.get<std::uint64_t>();
  }
  c10::optional<torch::Generator> init_gen;
  if (seed != 0) init_gen = at::make_generator<at::CPUGeneratorImpl>(seed);

  NetworkSpec spec = parse_network(config);
  impl->input_shape = spec.input_shape;
  auto net = std::make_shared<detail::Network>();
  net->generator = make_generator(seed);
  for (std::size_t i = 0; i < spec.layers.size(); ++i) {
    // Keras's names are written back into the config, so that model.json names every layer.
    json& layer_json = config.at("layers")[i];
    if (!layer_json.contains("name")) layer_json["name"] = spec.layers[i].name;
    if (spec.layers[i].kind == LayerKind::kInput) continue;
    Layer layer;
    static_cast<LayerSpec&>(layer) = std::move(spec.layers[i]);
    build_modules(layer, init_gen, *net);
    net->layers.push_back(std::move(layer));
  }
  // The cross-entropies need [classes]; mse takes any shape; a model with "loss": null is for
  // inference only (e.g. TF Serving's half_plus_two: Rescaling of scalars).
  impl->net = std::move(net);
  check_output(*impl, spec.output_shape);
  impl->optimizer = make_optimizer(config, impl->net->parameters());
  return impl;
}

void copy_out(const torch::Tensor& src, const std::string& name, NamedTensors& out) {
  out.emplace(name, detail::f32_tensor_of(src));
}

}  // namespace

Tensor detail::f32_tensor_of(const torch::Tensor& src) {
  const torch::Tensor t = src.detach().to(torch::kFloat).contiguous();
  Tensor w;
  w.dtype = DType::kF32;
  w.shape.assign(t.sizes().begin(), t.sizes().end());
  w.data.resize(static_cast<std::size_t>(t.numel()) * sizeof(float));
  if (t.numel()) std::memcpy(w.data.data(), t.data_ptr<float>(), w.data.size());
  return w;
}

namespace detail {

namespace {

// Conv2D on channels_last x [n, H, W, C]: torch's conv2d works on [n, C, H, W], which is a
// permuted view of the same memory (channels_last strides); the result is permuted back.
torch::Tensor conv2d_nhwc(const torch::Tensor& x, const Layer& l) {
  torch::Tensor t = x.permute({0, 3, 1, 2});
  std::vector<std::int64_t> padding = {0, 0};
  if (l.pad_top == l.pad_bottom && l.pad_left == l.pad_right) {
    padding = {l.pad_top, l.pad_left};
  } else {  // TensorFlow's "same" with an odd total puts the extra row / column after
    t = torch::constant_pad_nd(t, {l.pad_left, l.pad_right, l.pad_top, l.pad_bottom}, 0);
  }
  t = torch::conv2d(t, l.conv->weight, l.conv->bias, {l.strides[0], l.strides[1]}, padding);
  return t.permute({0, 2, 3, 1});
}

// MaxPooling2D on channels_last x; "same" padding is -inf, so it never wins a max.
torch::Tensor max_pooling2d_nhwc(const torch::Tensor& x, const Layer& l) {
  torch::Tensor t = x.permute({0, 3, 1, 2});
  if (l.pad_top || l.pad_bottom || l.pad_left || l.pad_right)
    t = torch::constant_pad_nd(t, {l.pad_left, l.pad_right, l.pad_top, l.pad_bottom},
                               -std::numeric_limits<double>::infinity());
  t = torch::max_pool2d(t, {l.window[0], l.window[1]}, {l.strides[0], l.strides[1]});
  return t.permute({0, 2, 3, 1});
}

// Embedding: checks the ids (InvalidArgument naming the layer, never a torch index error) and
// looks them up; with mask_zero, `mask` becomes F32 [batch, ids...], 1 where the id is not 0.
torch::Tensor embedding_lookup(const torch::Tensor& x, const Layer& l, torch::Tensor& mask) {
  const torch::Tensor ids = x.detach().to(torch::kFloat).contiguous();
  check_embedding_ids(ids.data_ptr<float>(), ids.numel(), l);
  const torch::Tensor index = ids.to(torch::kLong);
  if (l.mask_zero) mask = index.ne(0).to(torch::kFloat);
  return torch::embedding(l.embedding->weight, index);
}

// GlobalAveragePooling1D on [n, steps, features]: the mean over the steps, or with a mask
// (use_mask) Keras's sum(x * mask) / sum(mask) over the steps; an example whose steps are all
// masked gets zeros (Keras divides 0 by 0 and gives NaN).
torch::Tensor global_average_pooling1d(const torch::Tensor& x, const Layer& l, const torch::Tensor& mask) {
  torch::Tensor y;
  if (l.use_mask && mask.defined()) {
    const torch::Tensor m = mask.reshape({x.size(0), x.size(1), 1});
    y = (x * m).sum(1) / m.sum(1).clamp_min(1);
  } else {
    y = x.mean(1);
  }
  return l.keepdims ? y.unsqueeze(1) : y;
}

// Conv1D on channels_last x [n, steps, C] through torch's conv1d on [n, C, steps].
torch::Tensor conv1d_nwc(const torch::Tensor& x, const Layer& l) {
  torch::Tensor t = x.permute({0, 2, 1});
  std::int64_t padding = 0;
  if (l.pad_top == l.pad_bottom) {
    padding = l.pad_top;
  } else {  // TensorFlow's "same" with an odd total puts the extra step after
    t = torch::constant_pad_nd(t, {l.pad_top, l.pad_bottom}, 0);
  }
  t = torch::conv1d(t, l.conv->weight, l.conv->bias, {l.strides[0]}, {padding});
  return t.permute({0, 2, 1});
}

// MaxPooling1D on channels_last x; "same" padding is -inf, so it never wins a max.
torch::Tensor max_pooling1d_nwc(const torch::Tensor& x, const Layer& l) {
  torch::Tensor t = x.permute({0, 2, 1});
  if (l.pad_top || l.pad_bottom)
    t = torch::constant_pad_nd(t, {l.pad_top, l.pad_bottom}, -std::numeric_limits<double>::infinity());
  t = torch::max_pool1d(t, {l.window[0]}, {l.strides[0]});
  return t.permute({0, 2, 1});
}

// The layers of sequences: Embedding, GlobalAveragePooling1D, Conv1D, MaxPooling1D.
torch::Tensor sequence_layer(const torch::Tensor& x, const Layer& l, torch::Tensor& mask) {
  switch (l.kind) {
    case LayerKind::kEmbedding: return embedding_lookup(x, l, mask);
    case LayerKind::kGlobalAveragePooling1D: return global_average_pooling1d(x, l, mask);
    case LayerKind::kConv1D: return conv1d_nwc(x, l);
    case LayerKind::kMaxPooling1D: return max_pooling1d_nwc(x, l);
    default: return x;
  }
}

// Keras's BatchNormalization over the last axis. Training: normalise with the batch's mean and
// (biased) variance, and move the averages: moving = momentum moving + (1 - momentum) batch,
// with the biased variance as Keras does (torch would use the unbiased one). Inference: the
// moving averages.
torch::Tensor batch_normalization(const torch::Tensor& x, const Layer& l, bool training) {
  detail::BatchNormParams& p = *l.bn;
  torch::Tensor mean = p.moving_mean, variance = p.moving_variance;
  if (training) {
    std::vector<std::int64_t> dims(static_cast<std::size_t>(x.dim() - 1));
    for (std::size_t d = 0; d < dims.size(); ++d) dims[d] = static_cast<std::int64_t>(d);
    mean = x.mean(dims);
    variance = (x - mean).square().mean(dims);
    torch::NoGradGuard no_grad;
    p.moving_mean.mul_(l.momentum).add_(mean.detach(), 1 - l.momentum);
    p.moving_variance.mul_(l.momentum).add_(variance.detach(), 1 - l.momentum);
  }
  torch::Tensor y = (x - mean) * torch::rsqrt(variance + l.epsilon);
  if (p.gamma.defined()) y = y * p.gamma;
  if (p.beta.defined()) y = y + p.beta;
  return y;
}

}  // namespace

torch::Tensor Network::forward(torch::Tensor x, bool logits, std::size_t stop) {
  const bool training = is_training();
  torch::Tensor mask;  // a mask_zero Embedding's, until the GlobalAveragePooling1D it feeds
  for (std::size_t i = 0; i < layers.size() && i <= stop; ++i) {
    const Layer& l = layers[i];
    Activation act = l.activation;
    if (logits && act != Activation::kLinear && act == folded_activation) {
      // Leave out the loss's own activation where it ends the network (only Dropout may
      // follow it).
      bool last = true;
      for (std::size_t j = i + 1; j < layers.size(); ++j)
        if (layers[j].kind != LayerKind::kDropout) last = false;
      if (last) act = Activation::kLinear;
    }
    switch (l.kind) {
      case LayerKind::kInput: break;
      case LayerKind::kDense:
        x = torch::linear(x, l.dense->weight, l.dense->bias);
        break;
      case LayerKind::kFlatten:
        x = x.reshape({x.size(0), -1});
        break;
      case LayerKind::kDropout:
        if (training && l.rate > 0) {
          // Inverted dropout: x * noise, noise 0 or 1 / (1 - rate); autograd's backward of
          // the product is grad * noise.
          x = x * dropout_mask(x, l.rate, generator);
        }
        break;
      case LayerKind::kActivation: break;
      case LayerKind::kRescaling:
        x = x * l.scale + l.offset;
        break;
      case LayerKind::kConv2D:
        x = conv2d_nhwc(x, l);
        break;
      case LayerKind::kMaxPooling2D:
        x = max_pooling2d_nhwc(x, l);
        break;
      case LayerKind::kBatchNormalization:
        x = batch_normalization(x, l, training);
        break;
      case LayerKind::kReshape: {
        // Row-major, as numpy and Keras reshape; the batch dimension stays first.
        std::vector<std::int64_t> sizes = {x.size(0)};
        sizes.insert(sizes.end(), l.target_shape.begin(), l.target_shape.end());
        x = x.reshape(sizes);
        break;
      }
      case LayerKind::kEmbedding:
      case LayerKind::kGlobalAveragePooling1D:
      case LayerKind::kConv1D:
      case LayerKind::kMaxPooling1D:
        x = sequence_layer(x, l, mask);
        break;
    }
    if (l.kind == LayerKind::kDense || l.kind == LayerKind::kConv2D ||
        l.kind == LayerKind::kConv1D || l.kind == LayerKind::kActivation) {
      switch (act) {
        case Activation::kLinear: break;
        case Activation::kRelu: x = torch::relu(x); break;
        case Activation::kSigmoid: x = torch::sigmoid(x); break;
        case Activation::kTanh: x = torch::tanh(x); break;
        case Activation::kSoftmax: x = torch::softmax(x, -1); break;
      }
    }
  }
  return x;
}

void rethrow_torch_error(const std::string& what, const c10::Error& e) {
  throw Internal(what + ": libtorch failed: " + e.what_without_backtrace());
}

}  // namespace detail

Model::Model(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

Model Model::from_config(const nlohmann::json& config) {
  try {
    return Model(build(config));
  } catch (const c10::Error& e) {
    detail::rethrow_torch_error("Model::from_config", e);
  }
}

Model Model::from_parts(const nlohmann::json& config, const NamedTensors& weights) {
  Model model = from_config(config);
  auto params = model.impl_->net->named_parameters(/*recurse=*/true);
  auto buffers = model.impl_->net->named_buffers(/*recurse=*/true);
  std::map<std::string, torch::Tensor> expected;
  for (const auto& p : params) expected.emplace(p.key(), p.value());
  for (const auto& b : buffers) expected.emplace(b.key(), b.value());

  for (const auto& [name, w] : weights) {
    if (!expected.count(name)) {
      std::string names;
      for (const auto& [n, t] : expected) names += (names.empty() ? "" : ", ") + n;
      throw InvalidArgument("weights: unexpected tensor " + in_quotes(name) +
                            " (a checkpoint of another architecture?); this model has: " + names);
    }
  }
  for (const auto& [name, t] : expected) {
    auto it = weights.find(name);
    const std::vector<std::int64_t> want(t.sizes().begin(), t.sizes().end());
    if (it == weights.end())
      throw InvalidArgument("weights: missing tensor " + in_quotes(name) + " of shape " +
                            shape_to_string(want));
    const Tensor& w = it->second;
    if (w.dtype != DType::kF32)
      throw InvalidArgument("weights[" + in_quotes(name) + "] has dtype " + dtype_name(w.dtype) +
                            "; expected F32");
    if (w.shape != want)
      throw InvalidArgument("weights[" + in_quotes(name) + "] has shape " + shape_to_string(w.shape) +
                            "; the config needs " + shape_to_string(want));
    if (w.data.size() != static_cast<std::size_t>(t.numel()) * sizeof(float))
      throw InvalidArgument("weights[" + in_quotes(name) + "] holds " +
                            std::to_string(w.data.size()) + " bytes; shape " +
                            shape_to_string(want) + " needs " +
                            std::to_string(t.numel() * sizeof(float)));
  }
  torch::NoGradGuard no_grad;
  for (auto& [name, t] : expected) {
    const Tensor& w = weights.at(name);
    if (t.numel() == 0) continue;
    t.copy_(torch::from_blob(const_cast<std::byte*>(w.data.data()), t.sizes(), torch::kFloat));
  }
  return model;
}

const nlohmann::json& Model::config() const { return impl_->config; }

NamedTensors Model::weights() const {
  NamedTensors out;
  for (const auto& p : impl_->net->named_parameters(true)) copy_out(p.value(), p.key(), out);
  for (const auto& b : impl_->net->named_buffers(true)) copy_out(b.value(), b.key(), out);
  return out;
}

std::int64_t Model::count_params() const {
  std::int64_t n = 0;
  for (const auto& p : impl_->net->parameters())
    if (p.requires_grad()) n += p.numel();
  return n;
}

void set_num_threads(int n) {
  if (n < 0) throw InvalidArgument("set_num_threads: n = " + std::to_string(n) + " is negative");
  if (n == 0) {
    if (const char* env = std::getenv("OMP_NUM_THREADS"); env && *env) {
      char* end = nullptr;
      const long v = std::strtol(env, &end, 10);
      if (end && *end == '\0' && v > 0 && v < 4096) n = static_cast<int>(v);
    }
    if (n == 0) n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }
  torch::set_num_threads(n);
}

int get_num_threads() { return torch::get_num_threads(); }

nlohmann::json mlp_config(int n_units1, int n_units2, double learning_rate) {
  return {
      {"name", "mlp"},
      {"input_shape", {784}},
      {"layers",
       {{{"type", "Dropout"}, {"rate", 0.2}},
        {{"type", "Dense"}, {"units", n_units1}, {"activation", "relu"}},
        {{"type", "Dropout"}, {"rate", 0.5}},
        {{"type", "Dense"}, {"units", n_units2}, {"activation", "relu"}},
        {{"type", "Dropout"}, {"rate", 0.5}},
        {{"type", "Dense"}, {"units", 10}}}},
      {"loss", "sparse_categorical_crossentropy"},
      {"metrics", {"accuracy"}},
      {"optimizer", {{"type", "Adam"}, {"learning_rate", learning_rate}}},
  };
}

}  // namespace tensorhub
