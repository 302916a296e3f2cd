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

#include "model_impl.h"
#include "tensorhub/core/config.h"
#include "tensorhub/core/error.h"

namespace tensorhub::train {
namespace {

using nlohmann::json;
using detail::Activation;
using detail::Layer;
using detail::LayerKind;
using detail::LossKind;

const char* const kLayerTypes =
    "Input, Dense, Dropout, Flatten, Activation, Rescaling, Conv2D, MaxPooling2D, "
    "BatchNormalization, Reshape";
const char* const kActivations = "relu, sigmoid, tanh, softmax, linear";
const char* const kLosses =
    "sparse_categorical_crossentropy, categorical_crossentropy, binary_crossentropy, mse, null";
const char* const kOptimizers = "Adam, SGD, AdamW, RMSprop";

// Largest layer we agree to allocate (elements of one weight matrix): a typo in "units" must
// be an error, not an attempt to allocate terabytes.
constexpr std::int64_t kMaxLayerParams = std::int64_t{1} << 31;

std::string shape_string(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string in_quotes(const std::string& s) { return "\"" + s + "\""; }

// Refuses keys of `obj` outside `allowed` (a typo such as "learning_rte" must not be ignored);
// the message lists the allowed keys sorted, in model.json's "<where> has unknown field" wording.
void check_keys(const json& obj, const std::string& where, const std::set<std::string>& allowed) {
  ConfigObject(obj, where, {allowed.begin(), allowed.end()}, ConfigObject::Wording::kHas);
}

std::string number_string(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// obj[key] as a number in the interval from min to max (each end closed unless said open),
// or default_value when absent.
double get_number(const json& obj, const std::string& key, const std::string& where,
                  double default_value, double min, double max, bool min_open = false,
                  bool max_open = false) {
  if (!obj.contains(key)) return default_value;
  const json& v = obj.at(key);
  if (!v.is_number())
    throw InvalidArgument(where + "." + key + " must be a number, got " + v.dump());
  const double d = v.get<double>();
  if (!std::isfinite(d) || d < min || d > max || (min_open && d == min) || (max_open && d == max))
    throw InvalidArgument(where + "." + key + " = " + v.dump() + " is outside " +
                          (min_open ? "(" : "[") + number_string(min) + ", " + number_string(max) +
                          (max_open ? ")" : "]"));
  return d;
}

bool get_bool(const json& obj, const std::string& key, const std::string& where,
              bool default_value) {
  if (!obj.contains(key)) return default_value;
  const json& v = obj.at(key);
  if (!v.is_boolean())
    throw InvalidArgument(where + "." + key + " must be true or false, got " + v.dump());
  return v.get<bool>();
}

// A shape per example: [784], [28, 28], or [] for a scalar (Keras's shape=()).
std::vector<std::int64_t> get_shape(const json& v, const std::string& where) {
  if (!v.is_array())
    throw InvalidArgument(where + " must be an array of positive integers ([] for a scalar), got " +
                          v.dump());
  std::vector<std::int64_t> shape;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_number_integer() || v[i].get<std::int64_t>() <= 0 ||
        v[i].get<std::int64_t>() > kMaxLayerParams)
      throw InvalidArgument(where + "[" + std::to_string(i) + "] must be a positive integer, got " +
                            v[i].dump());
    shape.push_back(v[i].get<std::int64_t>());
  }
  return shape;
}

Activation parse_activation(const json& layer, const std::string& where) {
  if (!layer.contains("activation") || layer.at("activation").is_null()) return Activation::kLinear;
  const json& v = layer.at("activation");
  const std::string name = v.is_string() ? v.get<std::string>() : v.dump();
  if (name == "linear") return Activation::kLinear;
  if (name == "relu") return Activation::kRelu;
  if (name == "sigmoid") return Activation::kSigmoid;
  if (name == "tanh") return Activation::kTanh;
  if (name == "softmax") return Activation::kSoftmax;
  throw InvalidArgument(where + ".activation " + (v.is_string() ? in_quotes(name) : name) +
                        " is not an activation; allowed: " + kActivations);
}

std::string snake_prefix(LayerKind kind) {
  switch (kind) {
    case LayerKind::kInput: return "input";
    case LayerKind::kDense: return "dense";
    case LayerKind::kDropout: return "dropout";
    case LayerKind::kFlatten: return "flatten";
    case LayerKind::kActivation: return "activation";
    case LayerKind::kRescaling: return "rescaling";
    case LayerKind::kConv2D: return "conv2d";
    case LayerKind::kMaxPooling2D: return "max_pooling2d";
    case LayerKind::kBatchNormalization: return "batch_normalization";
    case LayerKind::kReshape: return "reshape";
  }
  return "layer";
}

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

// kernel_size, pool_size, strides: an integer n (meaning [n, n]) or [height, width], each a
// positive integer; `out` keeps its value when the key is absent or null.
void get_pair(const json& spec, const std::string& key, const std::string& where,
              std::int64_t out[2]) {
  if (!spec.contains(key) || spec.at(key).is_null()) return;
  const json& v = spec.at(key);
  auto positive = [](const json& e) {
    return e.is_number_integer() && e.get<std::int64_t>() > 0 && e.get<std::int64_t>() <= 65536;
  };
  if (positive(v)) {
    out[0] = out[1] = v.get<std::int64_t>();
  } else if (v.is_array() && v.size() == 2 && positive(v[0]) && positive(v[1])) {
    out[0] = v[0].get<std::int64_t>();
    out[1] = v[1].get<std::int64_t>();
  } else {
    throw InvalidArgument(where + "." + key + " must be a positive integer or [height, width] of "
                          "positive integers, got " + v.dump());
  }
}

// padding: "valid" (the default) or "same".
bool get_padding_same(const json& spec, const std::string& where) {
  if (!spec.contains("padding")) return false;
  const json& v = spec.at("padding");
  if (v.is_string() && (v.get<std::string>() == "valid" || v.get<std::string>() == "same"))
    return v.get<std::string>() == "same";
  throw InvalidArgument(where + ".padding " + v.dump() + " is not a padding; allowed: valid, same");
}

// The layer's name for error messages: "layers[2] (conv2d_1)".
std::string label(const std::string& where, const Layer& layer) {
  return where + " (" + layer.name + ")";
}

// Conv2D and MaxPooling2D take channels_last images: [height, width, channels].
void require_image(const std::vector<std::int64_t>& shape, const std::string& where,
                   const Layer& layer, const std::string& type) {
  if (shape.size() != 3)
    throw InvalidArgument(label(where, layer) + ": " + type + " needs inputs of shape [height, "
                          "width, channels] (channels_last), got " + shape_string(shape) +
                          (shape.size() == 2 ? "; add a channel axis: input_shape [" +
                                                   std::to_string(shape[0]) + ", " +
                                                   std::to_string(shape[1]) + ", 1]"
                                             : ""));
}

// Output height and width of a sliding window (layer.window, layer.strides) over `shape`
// [H, W, C], TensorFlow's rule: "valid" gives floor((in - k) / s) + 1 and needs k <= in;
// "same" gives ceil(in / s) and pads max((out - 1) s + k - in, 0), half before (rounded down)
// and the rest after. Records the padding in `layer`.
std::array<std::int64_t, 2> window_output(const std::vector<std::int64_t>& shape, bool same,
                                          const std::string& where, Layer& layer,
                                          const std::string& type, const std::string& window_key) {
  std::array<std::int64_t, 2> out{};
  std::int64_t pads[2][2] = {{0, 0}, {0, 0}};
  for (int a = 0; a < 2; ++a) {
    const std::int64_t in = shape[a], k = layer.window[a], s = layer.strides[a];
    if (!same) {
      if (k > in)
        throw InvalidArgument(label(where, layer) + ": " + type + " " + window_key + " [" +
                              std::to_string(layer.window[0]) + ", " +
                              std::to_string(layer.window[1]) + "] with padding \"valid\" does "
                              "not fit its input " + shape_string(shape) +
                              "; use a smaller window or padding \"same\"");
      out[a] = (in - k) / s + 1;
    } else {
      out[a] = (in + s - 1) / s;
      const std::int64_t total = std::max<std::int64_t>((out[a] - 1) * s + k - in, 0);
      pads[a][0] = total / 2;
      pads[a][1] = total - total / 2;
    }
  }
  layer.pad_top = pads[0][0];
  layer.pad_bottom = pads[0][1];
  layer.pad_left = pads[1][0];
  layer.pad_right = pads[1][1];
  return out;
}

// Keras's Conv2D {filters, kernel_size, strides = 1, padding = "valid", activation = "linear",
// use_bias = true}, channels_last; the kernel starts glorot_uniform, the bias zero.
void build_conv2d(const json& spec, const std::string& where, std::vector<std::int64_t>& shape,
                  const c10::optional<torch::Generator>& init_gen, Layer& layer,
                  detail::Network& net) {
  require_image(shape, where, layer, "Conv2D");
  const json* f = spec.contains("filters") ? &spec.at("filters") : nullptr;
  if (!f || !f->is_number_integer() || f->get<std::int64_t>() <= 0 ||
      f->get<std::int64_t>() > 65536)
    throw InvalidArgument(where + ".filters must be a positive integer (at most 65536), got " +
                          (f ? f->dump() : "nothing"));
  if (!spec.contains("kernel_size"))
    throw InvalidArgument(where + ".kernel_size is missing; give an integer or [height, width]");
  const std::int64_t filters = f->get<std::int64_t>();
  get_pair(spec, "kernel_size", where, layer.window);
  get_pair(spec, "strides", where, layer.strides);
  const bool same = get_padding_same(spec, where);
  layer.activation = parse_activation(spec, where);
  const bool use_bias = get_bool(spec, "use_bias", where, true);
  const auto out = window_output(shape, same, where, layer, "Conv2D", "kernel_size");
  const std::int64_t channels = shape[2];
  if (filters * channels > kMaxLayerParams / (layer.window[0] * layer.window[1]))
    throw InvalidArgument(label(where, layer) + ": Conv2D kernel is too large (over 2^31 weights)");
  auto params = std::make_shared<detail::ConvParams>();
  params->weight = params->register_parameter(
      "weight", torch::empty({filters, channels, layer.window[0], layer.window[1]}));
  glorot_uniform_(params->weight, init_gen);
  if (use_bias) params->bias = params->register_parameter("bias", torch::zeros({filters}));
  net.register_module(layer.name, params);
  layer.conv = std::move(params);
  shape = {out[0], out[1], filters};
}

// Keras's MaxPooling2D {pool_size = 2, strides = pool_size, padding = "valid"}, channels_last.
void build_max_pooling2d(const json& spec, const std::string& where,
                         std::vector<std::int64_t>& shape, Layer& layer) {
  require_image(shape, where, layer, "MaxPooling2D");
  layer.window[0] = layer.window[1] = 2;
  get_pair(spec, "pool_size", where, layer.window);
  layer.strides[0] = layer.window[0];
  layer.strides[1] = layer.window[1];
  get_pair(spec, "strides", where, layer.strides);
  const bool same = get_padding_same(spec, where);
  const auto out = window_output(shape, same, where, layer, "MaxPooling2D", "pool_size");
  shape = {out[0], out[1], shape[2]};
}

// Keras's BatchNormalization {axis = -1, momentum = 0.99, epsilon = 0.001, center = true,
// scale = true}: gamma 1, beta 0, moving_mean 0, moving_variance 1 over the last axis.
void build_batch_normalization(const json& spec, const std::string& where,
                               const std::vector<std::int64_t>& shape, Layer& layer,
                               detail::Network& net) {
  if (shape.empty())
    throw InvalidArgument(label(where, layer) + ": BatchNormalization needs inputs with at least "
                          "one dimension (it normalises the last axis), got " + shape_string(shape));
  if (spec.contains("axis") &&
      !(spec.at("axis").is_number_integer() && spec.at("axis").get<std::int64_t>() == -1))
    throw InvalidArgument(where + ".axis " + spec.at("axis").dump() +
                          " is not supported; allowed: -1 (the last axis, channels_last)");
  layer.momentum = get_number(spec, "momentum", where, 0.99, 0, 1);
  layer.epsilon = get_number(spec, "epsilon", where, 1e-3, 0, 1, true);
  const bool center = get_bool(spec, "center", where, true);
  const bool scale = get_bool(spec, "scale", where, true);
  const std::int64_t channels = shape.back();
  auto params = std::make_shared<detail::BatchNormParams>();
  if (scale) params->gamma = params->register_parameter("gamma", torch::ones({channels}));
  if (center) params->beta = params->register_parameter("beta", torch::zeros({channels}));
  params->moving_mean = params->register_buffer("moving_mean", torch::zeros({channels}));
  params->moving_variance = params->register_buffer("moving_variance", torch::ones({channels}));
  net.register_module(layer.name, params);
  layer.bn = std::move(params);
}

// Keras's Reshape {target_shape}: the example's values, in row-major order (numpy's and
// Keras's reshape), laid out in `target_shape` (without the batch dimension). One entry may be
// -1: it is inferred from the input's size, as in Keras. The sizes must match: Reshape
// [28, 28, 1] takes 784 values.
void build_reshape(const json& spec, const std::string& where, std::vector<std::int64_t>& shape,
                   Layer& layer) {
  if (!spec.contains("target_shape"))
    throw InvalidArgument(where + ".target_shape is missing; a Reshape needs the shape of one "
                          "example, e.g. [28, 28, 1] (one entry may be -1)");
  const json& v = spec.at("target_shape");
  const std::string bad = where + ".target_shape must be a non-empty array of positive integers "
                          "(one may be -1), got " + v.dump();
  if (!v.is_array() || v.empty()) throw InvalidArgument(bad);
  std::int64_t in = 1;
  for (auto d : shape) {
    if (d > kMaxLayerParams / in)
      throw InvalidArgument(label(where, layer) + ": Reshape of " + shape_string(shape) +
                            " is too large (over 2^31 values per example)");
    in *= d;
  }
  std::int64_t known = 1;
  int inferred = -1;
  std::vector<std::int64_t> target;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_number_integer()) throw InvalidArgument(bad);
    const std::int64_t d = v[i].get<std::int64_t>();
    if (d == -1 && inferred < 0) {
      inferred = static_cast<int>(i);
    } else if (d <= 0 || d > kMaxLayerParams / known) {
      throw InvalidArgument(d == -1 ? where + ".target_shape " + v.dump() + " has more than one "
                                      "-1; only one entry can be inferred"
                                    : bad);
    } else {
      known *= d;
    }
    target.push_back(d);
  }
  if (inferred >= 0 ? in % known != 0 : in != known)
    throw InvalidArgument(label(where, layer) + ": Reshape target_shape " + shape_string(target) +
                          " does not fit its input " + shape_string(shape) + " (" +
                          std::to_string(in) + " values per example" +
                          (inferred >= 0 ? ", not a multiple of " + std::to_string(known) + ")"
                                         : ", target_shape holds " + std::to_string(known) +
                                               "); the products of the shapes must be equal"));
  if (inferred >= 0) target[static_cast<std::size_t>(inferred)] = in / known;
  layer.target_shape = target;
  shape = std::move(target);
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
    throw InvalidArgument("the network's output has shape " + shape_string(shape) +
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

  if (!config.contains("layers") || !config.at("layers").is_array() || config.at("layers").empty())
    throw InvalidArgument("layers must be a non-empty array of layers, e.g. [{\"type\": "
                          "\"Dense\", \"units\": 10}]");
  json& layers = config.at("layers");

  std::vector<std::int64_t> shape;
  bool have_shape = config.contains("input_shape");
  if (have_shape) shape = get_shape(config.at("input_shape"), "input_shape");

  auto net = std::make_shared<detail::Network>();
  net->generator = make_generator(seed);
  std::set<std::string> used_names;
  std::map<std::string, int> counters;

  for (std::size_t i = 0; i < layers.size(); ++i) {
    const std::string where = "layers[" + std::to_string(i) + "]";
    json& spec = layers[i];
    if (!spec.is_object())
      throw InvalidArgument(where + " must be an object with a \"type\", got " + spec.dump());
    if (!spec.contains("type") || !spec.at("type").is_string())
      throw InvalidArgument(where + ".type is missing or not a string; allowed: " +
                            std::string(kLayerTypes));
    const std::string type = spec.at("type").get<std::string>();
    Layer layer;
    std::set<std::string> keys = {"type", "name"};
    if (i == 0) keys.insert("input_shape");  // Keras accepts input_shape on the first layer
    if (type == "Input") {
      layer.kind = LayerKind::kInput;
      keys.insert("shape");
      if (i != 0) throw InvalidArgument(where + ": an Input layer must come first");
    } else if (type == "Dense") {
      layer.kind = LayerKind::kDense;
      keys.insert({"units", "activation", "use_bias"});
    } else if (type == "Dropout") {
      layer.kind = LayerKind::kDropout;
      keys.insert("rate");
    } else if (type == "Flatten") {
      layer.kind = LayerKind::kFlatten;
    } else if (type == "Activation") {
      layer.kind = LayerKind::kActivation;
      keys.insert("activation");
    } else if (type == "Rescaling") {
      layer.kind = LayerKind::kRescaling;
      keys.insert({"scale", "offset"});
    } else if (type == "Conv2D") {
      layer.kind = LayerKind::kConv2D;
      keys.insert({"filters", "kernel_size", "strides", "padding", "activation", "use_bias"});
    } else if (type == "MaxPooling2D") {
      layer.kind = LayerKind::kMaxPooling2D;
      keys.insert({"pool_size", "strides", "padding"});
    } else if (type == "BatchNormalization") {
      layer.kind = LayerKind::kBatchNormalization;
      keys.insert({"axis", "momentum", "epsilon", "center", "scale"});
    } else if (type == "Reshape") {
      layer.kind = LayerKind::kReshape;
      keys.insert("target_shape");
    } else {
      throw InvalidArgument(where + ".type " + in_quotes(type) + " is not a layer; allowed: " +
                            kLayerTypes);
    }
    check_keys(spec, where, keys);

    // The input shape: top-level input_shape, Input's shape, or the first layer's input_shape;
    // where several are given they must agree.
    for (const char* key : {"shape", "input_shape"}) {
      if (!spec.contains(key)) continue;
      const auto s = get_shape(spec.at(key), where + "." + key);
      if (have_shape && s != shape)
        throw InvalidArgument(where + "." + key + " " + shape_string(s) +
                              " contradicts input_shape " + shape_string(shape));
      shape = s;
      have_shape = true;
    }
    if (!have_shape)
      throw InvalidArgument("input_shape is missing: give \"input_shape\": [784] at the top "
                            "level or an Input layer with \"shape\"");

    // Keras names: "<snake type>", then "<snake type>_1", ...; Input is "input_1".
    if (spec.contains("name")) {
      const json& n = spec.at("name");
      if (!n.is_string() || n.get<std::string>().empty() ||
          n.get<std::string>().find('.') != std::string::npos)
        throw InvalidArgument(where + ".name must be a non-empty string without '.', got " +
                              n.dump());
      layer.name = n.get<std::string>();
      if (!used_names.insert(layer.name).second)
        throw InvalidArgument(where + ".name " + in_quotes(layer.name) + " is used twice");
    } else {
      const std::string prefix = snake_prefix(layer.kind);
      do {
        int& c = counters[prefix];
        const int k = layer.kind == LayerKind::kInput ? c + 1 : c;
        layer.name = k == 0 ? prefix : prefix + "_" + std::to_string(k);
        ++c;
      } while (used_names.count(layer.name));
      used_names.insert(layer.name);
      spec["name"] = layer.name;
    }

    switch (layer.kind) {
      case LayerKind::kInput:
      case LayerKind::kFlatten: {
        if (layer.kind == LayerKind::kFlatten) {
          std::int64_t n = 1;
          for (auto d : shape) {
            if (d > kMaxLayerParams / n)
              throw InvalidArgument(where + ": Flatten of " + shape_string(shape) +
                                    " is too large (over 2^31 values per example)");
            n *= d;
          }
          shape = {n};
        }
        break;
      }
      case LayerKind::kDense: {
        if (shape.empty())
          throw InvalidArgument(where + ": a Dense layer needs inputs with at least one dimension, "
                                "not scalars; give input_shape [1]");
        if (!spec.contains("units") || !spec.at("units").is_number_integer() ||
            spec.at("units").get<std::int64_t>() <= 0)
          throw InvalidArgument(where + ".units must be a positive integer, got " +
                                (spec.contains("units") ? spec.at("units").dump() : "nothing"));
        const std::int64_t units = spec.at("units").get<std::int64_t>();
        const std::int64_t in = shape.back();
        if (units > kMaxLayerParams / in)
          throw InvalidArgument(where + ": Dense " + std::to_string(in) + " -> " +
                                std::to_string(units) + " is too large (over 2^31 weights)");
        layer.activation = parse_activation(spec, where);
        const bool use_bias = get_bool(spec, "use_bias", where, true);
        auto params = std::make_shared<detail::DenseParams>();
        params->weight = params->register_parameter("weight", torch::empty({units, in}));
        glorot_uniform_(params->weight, init_gen);
        if (use_bias) params->bias = params->register_parameter("bias", torch::zeros({units}));
        net->register_module(layer.name, params);
        layer.dense = std::move(params);
        shape.back() = units;
        break;
      }
      case LayerKind::kDropout: {
        if (!spec.contains("rate"))
          throw InvalidArgument(where + ".rate is missing; a Dropout needs a rate in [0, 1)");
        layer.rate = get_number(spec, "rate", where, 0, 0, 1, false, true);
        break;
      }
      case LayerKind::kRescaling: {
        // Keras's Rescaling: x * scale + offset, any shape, no weights.
        if (!spec.contains("scale"))
          throw InvalidArgument(where + ".scale is missing; a Rescaling layer computes x * scale + offset");
        layer.scale = get_number(spec, "scale", where, 1, -1e30, 1e30, true, true);
        layer.offset = get_number(spec, "offset", where, 0, -1e30, 1e30, true, true);
        break;
      }
      case LayerKind::kActivation: {
        if (!spec.contains("activation"))
          throw InvalidArgument(where + ".activation is missing; allowed: " +
                                std::string(kActivations));
        layer.activation = parse_activation(spec, where);
        break;
      }
      case LayerKind::kConv2D:
        build_conv2d(spec, where, shape, init_gen, layer, *net);
        break;
      case LayerKind::kMaxPooling2D:
        build_max_pooling2d(spec, where, shape, layer);
        break;
      case LayerKind::kBatchNormalization:
        build_batch_normalization(spec, where, shape, layer, *net);
        break;
      case LayerKind::kReshape:
        build_reshape(spec, where, shape, layer);
        break;
    }
    if (layer.kind != LayerKind::kInput) net->layers.push_back(std::move(layer));
  }

  // Input shape: recorded again from the config now that it is known to be consistent.
  impl->input_shape.clear();
  if (config.contains("input_shape")) {
    impl->input_shape = get_shape(config.at("input_shape"), "input_shape");
  } else {
    const json& first = layers[0];
    impl->input_shape = get_shape(first.contains("shape") ? first.at("shape")
                                                          : first.at("input_shape"),
                                  "layers[0].shape");
  }
  // The cross-entropies need [classes]; mse takes any shape; a model with "loss": null is for
  // inference only (e.g. TF Serving's half_plus_two: Rescaling of scalars).
  impl->net = std::move(net);
  check_output(*impl, shape);
  impl->optimizer = make_optimizer(config, impl->net->parameters());
  return impl;
}

void copy_out(const torch::Tensor& src, const std::string& name, NamedTensors& out) {
  const torch::Tensor t = src.detach().to(torch::kFloat).contiguous();
  Tensor w;
  w.dtype = DType::kF32;
  w.shape.assign(t.sizes().begin(), t.sizes().end());
  w.data.resize(static_cast<std::size_t>(t.numel()) * sizeof(float));
  if (t.numel()) std::memcpy(w.data.data(), t.data_ptr<float>(), w.data.size());
  out.emplace(name, std::move(w));
}

}  // namespace

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

torch::Tensor Network::forward(torch::Tensor x, bool logits) {
  const bool training = is_training();
  for (std::size_t i = 0; i < layers.size(); ++i) {
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
    }
    if (l.kind == LayerKind::kDense || l.kind == LayerKind::kConv2D ||
        l.kind == LayerKind::kActivation) {
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
                            shape_string(want));
    const Tensor& w = it->second;
    if (w.dtype != DType::kF32)
      throw InvalidArgument("weights[" + in_quotes(name) + "] has dtype " + dtype_name(w.dtype) +
                            "; expected F32");
    if (w.shape != want)
      throw InvalidArgument("weights[" + in_quotes(name) + "] has shape " + shape_string(w.shape) +
                            "; the config needs " + shape_string(want));
    if (w.data.size() != static_cast<std::size_t>(t.numel()) * sizeof(float))
      throw InvalidArgument("weights[" + in_quotes(name) + "] holds " +
                            std::to_string(w.data.size()) + " bytes; shape " +
                            shape_string(want) + " needs " +
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

}  // namespace tensorhub::train
