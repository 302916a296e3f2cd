// Model construction from a Keras-style config, weights in and out, optimizers, threads.
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <set>
#include <thread>

#include "model_impl.h"
#include "tensorhub/core/error.h"

namespace tensorhub::train {
namespace {

using nlohmann::json;
using detail::Activation;
using detail::Layer;
using detail::LayerKind;

const char* const kLayerTypes = "Input, Dense, Dropout, Flatten, Activation, Rescaling";
const char* const kActivations = "relu, sigmoid, tanh, softmax, linear";
const char* const kLosses = "sparse_categorical_crossentropy";
const char* const kOptimizers = "Adam, SGD";

// Largest layer we agree to allocate (elements of one weight matrix): a typo in "units" must
// be an error, not an attempt to allocate terabytes.
constexpr std::int64_t kMaxLayerParams = std::int64_t{1} << 31;

std::string shape_string(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string in_quotes(const std::string& s) { return "\"" + s + "\""; }

// Refuses keys of `obj` outside `allowed` (a typo such as "learning_rte" must not be ignored).
void check_keys(const json& obj, const std::string& where, const std::set<std::string>& allowed) {
  for (const auto& [key, value] : obj.items()) {
    if (allowed.count(key)) continue;
    std::string list;
    for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
    throw InvalidArgument(where + " has unknown field " + in_quotes(key) + "; allowed: " + list);
  }
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
  }
  return "layer";
}

torch::Generator make_generator(std::uint64_t seed) {
  if (seed == 0) seed = (std::uint64_t{std::random_device{}()} << 32) | std::random_device{}();
  return at::make_generator<at::CPUGeneratorImpl>(seed);
}

// Keras's defaults: glorot_uniform kernel (Glorot & Bengio 2010, limit sqrt(6 / (in + out))),
// zero bias.
void glorot_uniform_(torch::Tensor& w, const c10::optional<torch::Generator>& gen) {
  torch::NoGradGuard no_grad;
  const double fan_out = static_cast<double>(w.size(0)), fan_in = static_cast<double>(w.size(1));
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
  if (config.contains("loss")) {
    const json& loss = config.at("loss");
    if (!loss.is_null() && (!loss.is_string() || loss.get<std::string>() != "sparse_categorical_crossentropy"))
      throw InvalidArgument("loss " + loss.dump() + " is not a loss; allowed: " + kLosses);
  }
  if (config.contains("metrics")) {
    const json& m = config.at("metrics");
    if (!m.is_array())
      throw InvalidArgument("metrics must be an array such as [\"accuracy\"], got " + m.dump());
    for (std::size_t i = 0; i < m.size(); ++i)
      if (!m[i].is_string() || m[i].get<std::string>() != "accuracy")
        throw InvalidArgument("metrics[" + std::to_string(i) + "] " + m[i].dump() +
                              " is not a metric; allowed: accuracy");
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
  impl->output_shape = shape;
  // A classifier (the only loss so far) needs [classes]; a model with "loss": null is for
  // inference only (e.g. TF Serving's half_plus_two: Rescaling of scalars).
  const bool classifier = !config.contains("loss") || !config.at("loss").is_null();
  if (classifier && shape.size() != 1)
    throw InvalidArgument("the network's output has shape " + shape_string(shape) +
                          " per example; sparse_categorical_crossentropy needs [classes]: add a "
                          "Flatten before the last Dense (or set \"loss\": null for an inference-only model)");
  impl->num_classes = classifier ? shape[0] : 0;
  impl->net = std::move(net);
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

torch::Tensor Network::forward(torch::Tensor x, bool logits) {
  const bool training = is_training();
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const Layer& l = layers[i];
    Activation act = l.activation;
    if (logits && act == Activation::kSoftmax) {
      // Leave out a softmax that ends the network (only Dropout may follow it).
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
    }
    if (l.kind == LayerKind::kDense || l.kind == LayerKind::kActivation) {
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
