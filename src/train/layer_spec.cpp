// model.json's layers: the table of layer kinds and their parsers (layer_spec.h). No libtorch;
// C++17 (the fuzz build compiles it with clang in C++17 mode).
#include "tensorhub/train/layer_spec.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <type_traits>

#include "model_json_fields.h"
#include "tensorhub/core/config_object.h"
#include "tensorhub/core/error.h"
#include "tensorhub/core/named_tensors.h"

namespace tensorhub {

using nlohmann::json;

namespace detail {

std::string in_quotes(const std::string& s) { return "\"" + s + "\""; }

std::string number_string(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

void check_keys(const json& obj, const std::string& where, const std::set<std::string>& allowed) {
  ConfigObject(obj, where, {allowed.begin(), allowed.end()}, ConfigObject::Wording::kHas);
}

double get_number(const json& obj, const std::string& key, const std::string& where,
                  double default_value, double min, double max, bool min_open, bool max_open) {
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

}  // namespace detail

namespace {

using detail::get_bool;
using detail::get_number;
using detail::get_shape;
using detail::in_quotes;
using detail::kMaxLayerParams;

const char* const kLayerTypes =
    "Input, Dense, Dropout, Flatten, Activation, Rescaling, Conv2D, MaxPooling2D, "
    "BatchNormalization, Reshape, Embedding, GlobalAveragePooling1D, Conv1D, MaxPooling1D";
const char* const kActivations = "relu, sigmoid, tanh, softmax, linear";

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
std::string label(const std::string& where, const LayerSpec& layer) {
  return where + " (" + layer.name + ")";
}

// Conv2D and MaxPooling2D take channels_last images: [height, width, channels].
void require_image(const std::vector<std::int64_t>& shape, const std::string& where,
                   const LayerSpec& layer, const std::string& type) {
  if (shape.size() != 3)
    throw InvalidArgument(label(where, layer) + ": " + type + " needs inputs of shape [height, "
                          "width, channels] (channels_last), got " + shape_to_string(shape) +
                          (shape.size() == 2 ? "; add a channel axis: input_shape [" +
                                                   std::to_string(shape[0]) + ", " +
                                                   std::to_string(shape[1]) + ", 1]"
                                             : ""));
}

// The window (or strides) of `layer` as text: "[3, 3]", or "[3]" for a 1-D layer.
std::string window_text(const std::int64_t (&w)[2], int axes) {
  return axes == 1 ? "[" + std::to_string(w[0]) + "]"
                   : "[" + std::to_string(w[0]) + ", " + std::to_string(w[1]) + "]";
}

// Output size along the first `axes` axes (2: height and width of [H, W, C]; 1: steps of
// [steps, C]) of a sliding window (layer.window, layer.strides) over `shape`, TensorFlow's
// rule: "valid" gives floor((in - k) / s) + 1 and needs k <= in; "same" gives ceil(in / s) and
// pads max((out - 1) s + k - in, 0), half before (rounded down) and the rest after. Records
// the padding in `layer` (pad_top / pad_bottom for the first axis, pad_left / pad_right for
// the second).
std::array<std::int64_t, 2> window_output(const std::vector<std::int64_t>& shape, bool same,
                                          const std::string& where, LayerSpec& layer,
                                          const std::string& type, const std::string& window_key,
                                          int axes = 2) {
  std::array<std::int64_t, 2> out{1, 1};
  std::int64_t pads[2][2] = {{0, 0}, {0, 0}};
  for (int a = 0; a < axes; ++a) {
    const std::int64_t in = shape[a], k = layer.window[a], s = layer.strides[a];
    if (!same) {
      if (k > in)
        throw InvalidArgument(label(where, layer) + ": " + type + " " + window_key + " " +
                              window_text(layer.window, axes) + " with padding \"valid\" does "
                              "not fit its input " + shape_to_string(shape) +
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

// Each parser reads its kind's fields of `spec` into `layer` and turns `shape` (the layer's
// input, per example) into its output.
using Shape = std::vector<std::int64_t>;

void parse_input(const json&, const std::string&, Shape&, LayerSpec&) {}

void parse_flatten(const json&, const std::string& where, Shape& shape, LayerSpec&) {
  std::int64_t n = 1;
  for (auto d : shape) {
    if (d > kMaxLayerParams / n)
      throw InvalidArgument(where + ": Flatten of " + shape_to_string(shape) +
                            " is too large (over 2^31 values per example)");
    n *= d;
  }
  shape = {n};
}

void parse_dense(const json& spec, const std::string& where, Shape& shape, LayerSpec& layer) {
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
  layer.use_bias = get_bool(spec, "use_bias", where, true);
  layer.units = units;
  shape.back() = units;
}

void parse_dropout(const json& spec, const std::string& where, Shape&, LayerSpec& layer) {
  if (!spec.contains("rate"))
    throw InvalidArgument(where + ".rate is missing; a Dropout needs a rate in [0, 1)");
  layer.rate = get_number(spec, "rate", where, 0, 0, 1, false, true);
}

// Keras's Rescaling: x * scale + offset, any shape, no weights.
void parse_rescaling(const json& spec, const std::string& where, Shape&, LayerSpec& layer) {
  if (!spec.contains("scale"))
    throw InvalidArgument(where + ".scale is missing; a Rescaling layer computes x * scale + offset");
  layer.scale = get_number(spec, "scale", where, 1, -1e30, 1e30, true, true);
  layer.offset = get_number(spec, "offset", where, 0, -1e30, 1e30, true, true);
}

void parse_activation_layer(const json& spec, const std::string& where, Shape&, LayerSpec& layer) {
  if (!spec.contains("activation"))
    throw InvalidArgument(where + ".activation is missing; allowed: " + std::string(kActivations));
  layer.activation = parse_activation(spec, where);
}

// Keras's Conv2D {filters, kernel_size, strides = 1, padding = "valid", activation = "linear",
// use_bias = true}, channels_last.
void parse_conv2d(const json& spec, const std::string& where, Shape& shape, LayerSpec& layer) {
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
  layer.use_bias = get_bool(spec, "use_bias", where, true);
  const auto out = window_output(shape, same, where, layer, "Conv2D", "kernel_size");
  const std::int64_t channels = shape[2];
  if (filters * channels > kMaxLayerParams / (layer.window[0] * layer.window[1]))
    throw InvalidArgument(label(where, layer) + ": Conv2D kernel is too large (over 2^31 weights)");
  layer.units = filters;
  shape = {out[0], out[1], filters};
}

// Keras's MaxPooling2D {pool_size = 2, strides = pool_size, padding = "valid"}, channels_last.
void parse_max_pooling2d(const json& spec, const std::string& where, Shape& shape, LayerSpec& layer) {
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
// scale = true} over the last axis.
void parse_batch_normalization(const json& spec, const std::string& where, Shape& shape,
                               LayerSpec& layer) {
  if (shape.empty())
    throw InvalidArgument(label(where, layer) + ": BatchNormalization needs inputs with at least "
                          "one dimension (it normalises the last axis), got " + shape_to_string(shape));
  if (spec.contains("axis") &&
      !(spec.at("axis").is_number_integer() && spec.at("axis").get<std::int64_t>() == -1))
    throw InvalidArgument(where + ".axis " + spec.at("axis").dump() +
                          " is not supported; allowed: -1 (the last axis, channels_last)");
  layer.momentum = get_number(spec, "momentum", where, 0.99, 0, 1);
  layer.epsilon = get_number(spec, "epsilon", where, 1e-3, 0, 1, true);
  layer.center = get_bool(spec, "center", where, true);
  layer.scale_gamma = get_bool(spec, "scale", where, true);
}

// The values per example of `shape`, refusing over 2^31.
std::int64_t reshape_input_size(const Shape& shape, const std::string& where, const LayerSpec& layer) {
  std::int64_t in = 1;
  for (auto d : shape) {
    if (d > kMaxLayerParams / in)
      throw InvalidArgument(label(where, layer) + ": Reshape of " + shape_to_string(shape) +
                            " is too large (over 2^31 values per example)");
    in *= d;
  }
  return in;
}

// Keras's Reshape {target_shape}: the example's values, in row-major order (numpy's and
// Keras's reshape), laid out in `target_shape` (without the batch dimension). One entry may be
// -1: it is inferred from the input's size, as in Keras. The sizes must match: Reshape
// [28, 28, 1] takes 784 values.
void parse_reshape(const json& spec, const std::string& where, Shape& shape, LayerSpec& layer) {
  if (!spec.contains("target_shape"))
    throw InvalidArgument(where + ".target_shape is missing; a Reshape needs the shape of one "
                          "example, e.g. [28, 28, 1] (one entry may be -1)");
  const json& v = spec.at("target_shape");
  const std::string bad = where + ".target_shape must be a non-empty array of positive integers "
                          "(one may be -1), got " + v.dump();
  if (!v.is_array() || v.empty()) throw InvalidArgument(bad);
  const std::int64_t in = reshape_input_size(shape, where, layer);
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
    throw InvalidArgument(label(where, layer) + ": Reshape target_shape " + shape_to_string(target) +
                          " does not fit its input " + shape_to_string(shape) + " (" +
                          std::to_string(in) + " values per example" +
                          (inferred >= 0 ? ", not a multiple of " + std::to_string(known) + ")"
                                         : ", target_shape holds " + std::to_string(known) +
                                               "); the products of the shapes must be equal"));
  if (inferred >= 0) target[static_cast<std::size_t>(inferred)] = in / known;
  layer.target_shape = target;
  shape = std::move(target);
}

// kernel_size, pool_size, strides of a 1-D layer: an integer n or [n], n a positive integer;
// `out` keeps its value when the key is absent or null.
void get_single(const json& spec, const std::string& key, const std::string& where,
                std::int64_t& out) {
  if (!spec.contains(key) || spec.at(key).is_null()) return;
  const json& v = spec.at(key);
  const json& e = v.is_array() && v.size() == 1 ? v[0] : v;
  if (!e.is_number_integer() || e.get<std::int64_t>() <= 0 || e.get<std::int64_t>() > 65536)
    throw InvalidArgument(where + "." + key + " must be a positive integer (or [n]), got " +
                          v.dump());
  out = e.get<std::int64_t>();
}

// A positive integer field that must be given, at most `max`.
std::int64_t get_count(const json& spec, const std::string& key, const std::string& where,
                       std::int64_t max, const std::string& hint) {
  const json* v = spec.contains(key) ? &spec.at(key) : nullptr;
  if (!v || !v->is_number_integer() || v->get<std::int64_t>() <= 0 || v->get<std::int64_t>() > max)
    throw InvalidArgument(where + "." + key + " must be a positive integer (at most " +
                          std::to_string(max) + ")" + hint + ", got " + (v ? v->dump() : "nothing"));
  return v->get<std::int64_t>();
}

// Conv1D, MaxPooling1D and GlobalAveragePooling1D take channels_last sequences:
// [steps, channels].
void require_sequence(const std::vector<std::int64_t>& shape, const std::string& where,
                      const LayerSpec& layer, const std::string& type) {
  if (shape.size() != 2)
    throw InvalidArgument(label(where, layer) + ": " + type + " needs inputs of shape [steps, "
                          "channels] (channels_last), got " + shape_to_string(shape) +
                          (shape.size() == 1 ? "; add a channel axis: Reshape {\"target_shape\": [" +
                                                   std::to_string(shape[0]) + ", 1]}"
                                             : ""));
}

// Keras's Embedding {input_dim, output_dim, mask_zero = false}: ids of any shape S become
// vectors, output S + [output_dim]. input_dim is at most 2^24 so that every id is exact in F32.
void parse_embedding(const json& spec, const std::string& where, Shape& shape, LayerSpec& layer) {
  layer.input_dim = get_count(spec, "input_dim", where, kMaxEmbeddingInputDim,
                              " (the vocabulary size: the largest id + 1)");
  const std::int64_t output_dim = get_count(spec, "output_dim", where, kMaxLayerParams,
                                            " (the length of each vector)");
  if (output_dim > kMaxLayerParams / layer.input_dim)
    throw InvalidArgument(label(where, layer) + ": Embedding " + std::to_string(layer.input_dim) +
                          " x " + std::to_string(output_dim) + " is too large (over 2^31 weights)");
  layer.mask_zero = get_bool(spec, "mask_zero", where, false);
  layer.units = output_dim;
  shape.push_back(output_dim);
}

// Keras's GlobalAveragePooling1D {keepdims = false}: the mean over the steps of
// [steps, features], giving [features] ([1, features] with keepdims).
void parse_global_average_pooling1d(const json& spec, const std::string& where, Shape& shape,
                                    LayerSpec& layer) {
  require_sequence(shape, where, layer, "GlobalAveragePooling1D");
  if (spec.contains("data_format") &&
      !(spec.at("data_format").is_string() &&
        spec.at("data_format").get<std::string>() == "channels_last"))
    throw InvalidArgument(where + ".data_format " + spec.at("data_format").dump() +
                          " is not supported; allowed: channels_last");
  layer.keepdims = get_bool(spec, "keepdims", where, false);
  shape = layer.keepdims ? Shape{1, shape[1]} : Shape{shape[1]};
}

// Keras's Conv1D {filters, kernel_size, strides = 1, padding = "valid", activation = "linear",
// use_bias = true}, channels_last [steps, channels] (padding "causal" is not supported).
void parse_conv1d(const json& spec, const std::string& where, Shape& shape, LayerSpec& layer) {
  require_sequence(shape, where, layer, "Conv1D");
  const std::int64_t filters = get_count(spec, "filters", where, 65536, "");
  if (!spec.contains("kernel_size"))
    throw InvalidArgument(where + ".kernel_size is missing; give an integer");
  get_single(spec, "kernel_size", where, layer.window[0]);
  get_single(spec, "strides", where, layer.strides[0]);
  const bool same = get_padding_same(spec, where);
  layer.activation = parse_activation(spec, where);
  layer.use_bias = get_bool(spec, "use_bias", where, true);
  const auto out = window_output(shape, same, where, layer, "Conv1D", "kernel_size", 1);
  if (filters * shape[1] > kMaxLayerParams / layer.window[0])
    throw InvalidArgument(label(where, layer) + ": Conv1D kernel is too large (over 2^31 weights)");
  layer.units = filters;
  shape = {out[0], filters};
}

// Keras's MaxPooling1D {pool_size = 2, strides = pool_size, padding = "valid"}, channels_last.
void parse_max_pooling1d(const json& spec, const std::string& where, Shape& shape, LayerSpec& layer) {
  require_sequence(shape, where, layer, "MaxPooling1D");
  layer.window[0] = 2;
  get_single(spec, "pool_size", where, layer.window[0]);
  layer.strides[0] = layer.window[0];
  get_single(spec, "strides", where, layer.strides[0]);
  const bool same = get_padding_same(spec, where);
  const auto out = window_output(shape, same, where, layer, "MaxPooling1D", "pool_size", 1);
  shape = {out[0], shape[1]};
}

// One row of the table of layer kinds: model.json's type, Keras's name prefix, the fields
// beyond "type" and "name", and the parser.
struct KindInfo {
  LayerKind kind;
  const char* type;
  const char* prefix;
  std::set<std::string> keys;
  void (*parse)(const json&, const std::string&, Shape&, LayerSpec&);
};

const std::vector<KindInfo>& kinds() {
  static const std::vector<KindInfo> table = {
      {LayerKind::kInput, "Input", "input", {"shape"}, parse_input},
      {LayerKind::kDense, "Dense", "dense", {"units", "activation", "use_bias"}, parse_dense},
      {LayerKind::kDropout, "Dropout", "dropout", {"rate"}, parse_dropout},
      {LayerKind::kFlatten, "Flatten", "flatten", {}, parse_flatten},
      {LayerKind::kActivation, "Activation", "activation", {"activation"}, parse_activation_layer},
      {LayerKind::kRescaling, "Rescaling", "rescaling", {"scale", "offset"}, parse_rescaling},
      {LayerKind::kConv2D, "Conv2D", "conv2d",
       {"filters", "kernel_size", "strides", "padding", "activation", "use_bias"}, parse_conv2d},
      {LayerKind::kMaxPooling2D, "MaxPooling2D", "max_pooling2d", {"pool_size", "strides", "padding"},
       parse_max_pooling2d},
      {LayerKind::kBatchNormalization, "BatchNormalization", "batch_normalization",
       {"axis", "momentum", "epsilon", "center", "scale"}, parse_batch_normalization},
      {LayerKind::kReshape, "Reshape", "reshape", {"target_shape"}, parse_reshape},
      {LayerKind::kEmbedding, "Embedding", "embedding", {"input_dim", "output_dim", "mask_zero"},
       parse_embedding},
      {LayerKind::kGlobalAveragePooling1D, "GlobalAveragePooling1D", "global_average_pooling1d",
       {"keepdims", "data_format"}, parse_global_average_pooling1d},
      {LayerKind::kConv1D, "Conv1D", "conv1d",
       {"filters", "kernel_size", "strides", "padding", "activation", "use_bias"}, parse_conv1d},
      {LayerKind::kMaxPooling1D, "MaxPooling1D", "max_pooling1d", {"pool_size", "strides", "padding"},
       parse_max_pooling1d},
  };
  return table;
}

// The row of layers[i]'s "type", its fields checked.
const KindInfo& kind_of(const json& spec, const std::string& where, std::size_t i) {
  if (!spec.is_object())
    throw InvalidArgument(where + " must be an object with a \"type\", got " + spec.dump());
  if (!spec.contains("type") || !spec.at("type").is_string())
    throw InvalidArgument(where + ".type is missing or not a string; allowed: " +
                          std::string(kLayerTypes));
  const std::string type = spec.at("type").get<std::string>();
  for (const KindInfo& k : kinds()) {
    if (type != k.type) continue;
    std::set<std::string> keys = k.keys;
    keys.insert({"type", "name"});
    if (i == 0) keys.insert("input_shape");  // Keras accepts input_shape on the first layer
    if (k.kind == LayerKind::kInput && i != 0)
      throw InvalidArgument(where + ": an Input layer must come first");
    detail::check_keys(spec, where, keys);
    return k;
  }
  throw InvalidArgument(where + ".type " + in_quotes(type) + " is not a layer; allowed: " +
                        kLayerTypes);
}

// Keras names: "<snake type>", then "<snake type>_1", ...; Input is "input_1". A given name
// must be unique and without '.' (it prefixes the weights' names).
class LayerNamer {
 public:
  std::string name(const json& spec, const std::string& where, const KindInfo& kind) {
    if (spec.contains("name")) {
      const json& n = spec.at("name");
      if (!n.is_string() || n.get<std::string>().empty() ||
          n.get<std::string>().find('.') != std::string::npos)
        throw InvalidArgument(where + ".name must be a non-empty string without '.', got " + n.dump());
      const std::string name = n.get<std::string>();
      if (!used_.insert(name).second)
        throw InvalidArgument(where + ".name " + in_quotes(name) + " is used twice");
      return name;
    }
    const std::string prefix = kind.prefix;
    std::string name;
    do {
      int& c = counters_[prefix];
      const int k = kind.kind == LayerKind::kInput ? c + 1 : c;
      name = k == 0 ? prefix : prefix + "_" + std::to_string(k);
      ++c;
    } while (used_.count(name));
    used_.insert(name);
    return name;
  }

 private:
  std::set<std::string> used_;
  std::map<std::string, int> counters_;
};

// The input shape: top-level input_shape, Input's shape, or the first layer's input_shape;
// where several are given they must agree.
void take_input_shape(const json& spec, const std::string& where, Shape& shape, bool& have_shape) {
  for (const char* key : {"shape", "input_shape"}) {
    if (!spec.contains(key)) continue;
    const auto s = get_shape(spec.at(key), where + "." + key);
    if (have_shape && s != shape)
      throw InvalidArgument(where + "." + key + " " + shape_to_string(s) + " contradicts input_shape " +
                            shape_to_string(shape));
    shape = s;
    have_shape = true;
  }
  if (!have_shape)
    throw InvalidArgument("input_shape is missing: give \"input_shape\": [784] at the top "
                          "level or an Input layer with \"shape\"");
}

// Follows the mask of a mask_zero Embedding through the layers (Keras's mask propagation,
// restricted to what tensorhub computes): Dropout, Activation and Dense pass it on unchanged
// (they act on each step alone), GlobalAveragePooling1D consumes it; anything else refuses it.
class MaskTracker {
 public:
  void follow(LayerSpec& layer, const std::string& where) {
    if (!source_.empty()) {
      switch (layer.kind) {
        case LayerKind::kDropout:
        case LayerKind::kActivation:
        case LayerKind::kDense:
          break;
        case LayerKind::kGlobalAveragePooling1D:
          layer.use_mask = true;
          source_.clear();
          break;
        default:
          throw InvalidArgument(label(where, layer) + " does not support the mask of Embedding " +
                                in_quotes(source_) + " (mask_zero true), as in Keras; only "
                                "Dropout, Activation and Dense may come between it and the "
                                "GlobalAveragePooling1D that averages the unmasked steps, or set "
                                "mask_zero false");
      }
    }
    if (layer.kind == LayerKind::kEmbedding && layer.mask_zero) source_ = layer.name;
  }
  // Refuses a mask that reaches the network's output (Keras would weight the loss by it).
  void finish() const {
    if (!source_.empty())
      throw InvalidArgument("the mask of Embedding " + in_quotes(source_) + " (mask_zero true) "
                            "reaches the network's output, where Keras would weight the loss by "
                            "it; tensorhub supports a mask only when a GlobalAveragePooling1D "
                            "averages the unmasked steps: add one, or set mask_zero false");
  }

 private:
  std::string source_;  // the Embedding whose mask is live, "" when none
};

}  // namespace

NetworkSpec parse_network(const json& config) {
  if (!config.contains("layers") || !config.at("layers").is_array() || config.at("layers").empty())
    throw InvalidArgument("layers must be a non-empty array of layers, e.g. [{\"type\": "
                          "\"Dense\", \"units\": 10}]");
  const json& layers = config.at("layers");
  Shape shape;
  bool have_shape = config.contains("input_shape");
  if (have_shape) shape = get_shape(config.at("input_shape"), "input_shape");
  NetworkSpec net;
  LayerNamer namer;
  MaskTracker mask;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const std::string where = "layers[" + std::to_string(i) + "]";
    const json& spec = layers[i];
    const KindInfo& kind = kind_of(spec, where, i);
    take_input_shape(spec, where, shape, have_shape);
    LayerSpec layer;
    layer.kind = kind.kind;
    layer.name = namer.name(spec, where, kind);
    layer.input_shape = shape;
    kind.parse(spec, where, shape, layer);
    layer.output_shape = shape;
    mask.follow(layer, where);
    if (i == 0) net.input_shape = layer.input_shape;
    net.layers.push_back(std::move(layer));
  }
  mask.finish();
  net.output_shape = shape;
  return net;
}

namespace {

// "Embedding layer \"embedding\": input value 12 at element 3 is not an id in [0, 10)...".
[[noreturn]] void throw_bad_id(const std::string& value, std::int64_t index, const LayerSpec& layer) {
  throw InvalidArgument("Embedding layer " + in_quotes(layer.name) + ": input value " + value +
                        " (element " + std::to_string(index) + " of its input, row-major) is not "
                        "an integer id in [0, " + std::to_string(layer.input_dim) +
                        "): ids must be whole numbers below input_dim = " +
                        std::to_string(layer.input_dim));
}

template <typename T>
void check_integer_ids(const T* ids, std::int64_t count, const LayerSpec& layer) {
  for (std::int64_t i = 0; i < count; ++i) {
    const T v = ids[i];
    bool ok;
    if constexpr (std::is_floating_point_v<T>)
      ok = v >= 0 && v < static_cast<T>(layer.input_dim) && std::floor(v) == v;
    else if constexpr (std::is_signed_v<T>)
      ok = v >= 0 && static_cast<std::int64_t>(v) < layer.input_dim;
    else
      ok = static_cast<std::uint64_t>(v) < static_cast<std::uint64_t>(layer.input_dim);
    if (ok) continue;
    if constexpr (std::is_floating_point_v<T>) {
      char buf[40];
      std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(v));
      throw_bad_id(buf, i, layer);
    } else {
      throw_bad_id(std::to_string(+v), i, layer);
    }
  }
}

}  // namespace

void check_embedding_ids(const float* ids, std::int64_t count, const LayerSpec& layer) {
  check_integer_ids(ids, count, layer);
}

Tensor embedding_ids_as_f32(const Tensor& x, const LayerSpec& embedding) {
  const std::int64_t n = x.numel();
  if (n < 0 || x.data.size() != static_cast<std::size_t>(n) * dtype_size(x.dtype))
    throw InvalidArgument("x holds " + std::to_string(x.data.size()) + " bytes, which does not "
                          "match its shape " + shape_to_string(x.shape) + " and dtype " +
                          dtype_name(x.dtype));
  Tensor out;
  out.shape = x.shape;
  out.dtype = DType::kF32;
  out.data.resize(static_cast<std::size_t>(n) * sizeof(float));
  float* f = reinterpret_cast<float*>(out.data.data());
  auto convert = [&](auto tag) {
    using T = decltype(tag);
    std::vector<T> v(static_cast<std::size_t>(n));  // aligned copy of the bytes
    if (n) std::memcpy(v.data(), x.data.data(), x.data.size());
    check_integer_ids(v.data(), n, embedding);
    for (std::int64_t i = 0; i < n; ++i) f[i] = static_cast<float>(v[static_cast<std::size_t>(i)]);
  };
  switch (x.dtype) {
    case DType::kF32: out.data = x.data; break;
    case DType::kF64: convert(double{}); break;
    case DType::kI64: convert(std::int64_t{}); break;
    case DType::kI32: convert(std::int32_t{}); break;
    case DType::kU8: convert(std::uint8_t{}); break;
    case DType::kI8: convert(std::int8_t{}); break;
    default:
      throw InvalidArgument("x has dtype " + dtype_name(x.dtype) + "; Embedding " +
                            in_quotes(embedding.name) + " takes integer ids as F32, F64, I64, "
                            "I32, U8 or I8");
  }
  return out;
}

}  // namespace tensorhub
